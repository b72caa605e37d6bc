"""Trace JSON/CSV I/O and validation of bad files, using a hand-made trace (no torch needed)."""

from __future__ import annotations

import copy
import csv
import io
import json

import pytest

from specviz.errors import TraceError
from specviz.traces.trace import SCHEMA, Trace, parse_json

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick


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


def test_csv_has_one_row_per_token_of_the_stream():
    rows = Trace.from_dict(hand_made_trace()).to_csv().strip().splitlines()
    assert rows[0] == "iteration,position,token_id,token,status,q,p,accept_prob,r,accepted,beta"
    assert len(rows) == 1 + 4 + 2  # four drafts and two corrections
    assert rows[3].split(",")[:5] == ["1", "2", "12", "t12", "rejected"]


def every_status_trace() -> dict:
    """Three iterations: the draft proposes nothing (an older file's "bonus"); then A accepted, C
    rejected and a third draft discarded (its accept_prob is 1: p > q), resampled D; then E
    accepted and a bonus F."""
    data = copy.deepcopy(hand_made_trace())
    first, second = data["iterations"]
    discarded = {**copy.deepcopy(first["drafts"][0]), "token_id": 16, "token": "t16", "r": 0.7, "accepted": False}
    second_drafts = [first["drafts"][0], first["drafts"][2], discarded]
    for j, d in enumerate(second_drafts):
        d["position"] = 1 + j
    draftless = {
        "index": 0,
        "start_ms": 0.0,
        "draft_ms": 0.0,
        "verify_ms": 5.0,
        "accepted_count": 0,
        "drafts": [],
        "correction": {"kind": "bonus", "position": 0, "token_id": 20, "token": "t20", "p": 0.5, "p_top": [[20, 0.5]]},
    }
    first.update(index=1, accepted_count=1, drafts=second_drafts)
    first["correction"].update(position=2)
    second.update(index=2)
    second["drafts"][0]["position"] = 3
    second["correction"]["position"] = 4
    data["iterations"] = [draftless, first, second]
    data["output_token_ids"] = [20, 10, 13, 14, 15]
    data["summary"].update(iterations=3, target_calls=3, drafted=4, accepted=2, acceptance_rate=0.5)
    data["summary"].update(mean_accepted_length=5 / 3)
    return data


def csv_rows(trace: Trace) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(trace.to_csv())))


def test_exports_number_iterations_from_one_as_the_pages_do():
    """The inspector says "Iteration 2 of 3" of the second iteration; the JSON and the CSV say 2 too."""
    from specviz.teaching.charts.step import step_view

    trace = Trace.from_dict(every_status_trace())
    assert step_view(trace, 2).summary.startswith("Iteration 2 of 3")
    assert [it["iteration"] for it in json.loads(trace.to_json())["iterations"]] == [1, 2, 3]
    assert [r["iteration"] for r in csv_rows(trace)] == ["1"] + ["2"] * 4 + ["3"] * 2
    assert Trace.from_json(trace.to_json()).to_dict() == trace.to_dict()  # read back unchanged
    with pytest.raises(TraceError, match=r"iterations\[1\]\.iteration"):
        Trace.from_dict(_broken(lambda d: d["iterations"][1].update(iteration=1)))


def test_csv_says_each_tokens_status_in_the_pages_words():
    from specviz.teaching.charts.stream import MAIN_STATUSES
    from specviz.teaching.charts.style import STATUS_COLORS, STATUS_LABELS
    from specviz.teaching.charts.tokens import token_rows
    from specviz.traces.trace import STATUSES

    trace = Trace.from_dict(every_status_trace())
    rows = csv_rows(trace)
    assert [r["status"] for r in rows] == [r["status"] for r in token_rows(trace)]
    assert [r["status"] for r in rows] == [
        "target", "accepted", "rejected", "discarded", "resampled", "accepted", "bonus",
    ]  # fmt: skip
    assert set(STATUSES) == set(STATUS_COLORS) == set(STATUS_LABELS) and set(MAIN_STATUSES) < set(STATUSES)
    discarded = rows[3]
    assert discarded["accept_prob"] == "" and discarded["r"] == ""  # never checked: no accept_prob, no r
    assert discarded["p"] and discarded["q"] and discarded["beta"]
    rejected = rows[2]
    assert float(rejected["accept_prob"]) == pytest.approx(0.1 / 0.9) and float(rejected["r"]) == 0.5
    resampled = rows[4]
    assert resampled["q"] == resampled["accept_prob"] == resampled["r"] == resampled["accepted"] == ""
    assert float(resampled["p"]) == 0.7


def test_a_draftless_iteration_is_the_target_alone_in_the_json_too():
    """An older file (and the recorder) called the token of an iteration without drafts a "bonus";
    the page calls it the target alone. The trace reads it as "target" and writes that back."""
    data = every_status_trace()
    trace = Trace.from_dict(data)
    assert trace.iterations[0]["correction"]["kind"] == "target"
    assert json.loads(trace.to_json())["iterations"][0]["correction"]["kind"] == "target"
    assert Trace.from_json(trace.to_json()).iterations[0]["correction"]["kind"] == "target"
    assert trace.iterations[2]["correction"]["kind"] == "bonus"  # a real bonus keeps its word
    with pytest.raises(TraceError, match="correction.kind"):  # "target" where drafts were proposed
        Trace.from_dict(_broken(lambda d: d["iterations"][1]["correction"].update(kind="target")))


def test_old_example_traces_still_load_and_export():
    from specviz.shipped import ASSETS
    from specviz.teaching.charts.tokens import token_rows

    files = sorted((ASSETS / "examples").glob("*.json"))
    assert files
    for path in files:
        trace = Trace.from_json(path.read_bytes())
        rows = csv_rows(trace)
        assert [r["status"] for r in rows] == [r["status"] for r in token_rows(trace)]
        assert rows[0]["iteration"] == "1"
        assert Trace.from_json(trace.to_json(indent=1)).to_dict() == trace.to_dict()


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
    with pytest.raises(TraceError, match="Extra data") as refused:  # a word after the whole trace: added, not cut
        Trace.from_json(text + " x")
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
