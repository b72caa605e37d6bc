"""Trace JSON/CSV I/O and validation of bad files, using a hand-made trace (no torch needed)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from specviz.errors import TraceError
from specviz.trace import SCHEMA, Trace, parse_json


def hand_made_trace() -> dict:
    """Two iterations: 'A B' accepted then C rejected -> resample D; then E accepted -> bonus F."""

    def draft(pos, tid, q, p, r, accepted):
        return {
            "position": pos,
            "token_id": tid,
            "token": f"t{tid}",
            "q": q,
            "p": p,
            "accept_prob": min(1.0, p / q),
            "r": r,
            "accepted": accepted,
            "q_top": [[tid, q]],
            "p_top": [[tid, p]],
            "beta": 0.8,
        }

    return {
        "schema": SCHEMA,
        "mode": "speculative",
        "config": {
            "target": "t",
            "draft": "d",
            "gamma": 3,
            "temperature": 1.0,
            "top_k": None,
            "top_p": None,
            "seed": 0,
            "max_new_tokens": 6,
            "device": "cpu",
            "dtype": "float32",
            "rule": "exact",
            "traced": True,
        },
        "prompt": "hi",
        "prompt_token_ids": [1, 2],
        "output_token_ids": [10, 11, 13, 14, 15],
        "output_text": "t10t11t13t14t15",
        "stop_reason": "max_new_tokens",
        "iterations": [
            {
                "index": 0,
                "start_ms": 0.0,
                "draft_ms": 1.0,
                "verify_ms": 5.0,
                "accepted_count": 2,
                "drafts": [
                    draft(0, 10, 0.5, 0.6, 0.1, True),
                    draft(1, 11, 0.5, 0.4, 0.3, True),
                    draft(2, 12, 0.9, 0.1, 0.5, False),
                ],
                "correction": {
                    "kind": "resample",
                    "position": 2,
                    "token_id": 13,
                    "token": "t13",
                    "p": 0.7,
                    "residual_top": [[13, 0.7]],
                    "p_top": [[13, 0.5]],
                },
            },
            {
                "index": 1,
                "start_ms": 6.0,
                "draft_ms": 1.0,
                "verify_ms": 5.0,
                "accepted_count": 1,
                "drafts": [draft(3, 14, 0.5, 0.9, 0.2, True)],
                "correction": {
                    "kind": "bonus",
                    "position": 4,
                    "token_id": 15,
                    "token": "t15",
                    "p": 0.3,
                    "residual_top": None,
                    "p_top": [[15, 0.3]],
                },
            },
        ],
        "summary": {
            "iterations": 2,
            "target_calls": 2,
            "drafted": 4,
            "accepted": 3,
            "new_tokens": 5,
            "acceptance_rate": 0.75,
            "mean_accepted_length": 2.5,
            "alpha": 0.8,
            "wall_ms": 12.0,
            "tokens_per_s": 416.0,
            "draft_ms": 2.0,
            "verify_ms": 10.0,
        },
        "extra": {},
    }


def test_round_trip_is_lossless():
    trace = Trace.from_dict(hand_made_trace())
    assert Trace.from_json(trace.to_json()).to_dict() == trace.to_dict()
    assert Trace.from_json(trace.to_json(indent=2).encode()).to_dict() == trace.to_dict()


def test_csv_has_one_row_per_draft_token():
    rows = Trace.from_dict(hand_made_trace()).to_csv().strip().splitlines()
    assert rows[0].startswith("iteration,position,token_id,token,q,p,accept_prob,r,accepted,beta")
    assert len(rows) == 1 + 4
    assert rows[3].split(",")[:3] == ["0", "2", "12"]


def test_accept_lengths_count_the_correction():
    assert Trace.from_dict(hand_made_trace()).accept_lengths() == [3, 2]


def _broken(mutate) -> dict:
    data = copy.deepcopy(hand_made_trace())
    mutate(data)
    return data


BROKEN = {
    "wrong schema": (lambda d: d.update(schema="specviz.trace/0"), "Unsupported trace schema"),
    "missing field": (lambda d: d.pop("summary"), "missing the field 'summary'"),
    "non-prefix accepts": (lambda d: d["iterations"][0]["drafts"][0].update(accepted=False), "prefix"),
    "accept_prob wrong": (lambda d: d["iterations"][0]["drafts"][0].update(accept_prob=0.5), "min\\(1, p/q\\)"),
    "accepted but r too big": (lambda d: d["iterations"][0]["drafts"][1].update(r=0.95), "accepted although"),
    "output mismatch": (lambda d: d["output_token_ids"].append(99), "output_token_ids"),
    "summary mismatch": (lambda d: d["summary"].update(accepted=4), "summary.accepted"),
    "probability above one": (lambda d: d["iterations"][0]["drafts"][0].update(p=1.5), "from 0 to 1"),
    "enormous number": (lambda d: d["summary"].update(wall_ms=1e300), "summary.wall_ms"),
    "bonus after a rejection": (lambda d: d["iterations"][0]["correction"].update(kind="bonus"), "resample"),
    "string id": (lambda d: d["prompt_token_ids"].append("7"), "prompt_token_ids"),
    "not an object": (lambda d: d["iterations"].append(5), "iterations\\[2\\]"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_invalid_traces_name_the_problem(case):
    mutate, message = BROKEN[case]
    with pytest.raises(TraceError, match=message):
        Trace.from_dict(_broken(mutate))


def test_truncated_json_says_so():
    text = Trace.from_dict(hand_made_trace()).to_json()
    with pytest.raises(TraceError, match="not valid JSON.*truncated"):
        Trace.from_json(text[: len(text) // 2])
    inside_a_string = text.index('"output_text": "') + len('"output_text": "') + 2
    with pytest.raises(TraceError, match="Unterminated string.*truncated"):
        Trace.from_json(text[:inside_a_string])
    inside_a_word = text.index('"accepted": true') + len('"accepted": tr')
    with pytest.raises(TraceError, match="Expecting value.*truncated"):
        Trace.from_json(text[:inside_a_word])
    with pytest.raises(TraceError) as refused:  # a broken file that is not cut short says nothing of it
        Trace.from_json(text.replace('"mode":', '"mode"', 1))
    assert "truncated" not in str(refused.value)


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '"a string"', b"\xff\xfe"])
def test_non_trace_files(text):
    with pytest.raises(TraceError):
        Trace.from_json(text)


def test_nan_is_refused():
    text = json.dumps(hand_made_trace()).replace('"alpha": 0.8', '"alpha": NaN')
    with pytest.raises(TraceError, match="NaN"):
        Trace.from_json(text)


def test_oversize_file_is_refused_before_parsing():
    with pytest.raises(TraceError, match="limit is"):
        parse_json(b" " * (21 * 1024 * 1024))


def test_trace_module_imports_without_torch():
    code = "import specviz.trace, sys; assert 'torch' not in sys.modules and 'streamlit' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
