"""The Workloads lab (specviz.labs.workloads) on the toy pair: what a cell measures and that it is
the trace's own numbers, a stop between pairs, JSON/CSV out and back, and files it refuses; the
shipped task kinds and the shipped recording."""

from __future__ import annotations

import json

import pytest

from specviz.config import DecodeOptions
from specviz.decoding.decoder import speculative_generate
from specviz.engine import toy
from specviz.labs import workloads
from specviz.labs.theory import expected_tokens_per_iteration, walltime_improvement
from specviz.traces.trace import acceptance_by_position

TOY_KINDS = (
    workloads.Kind("code", "code", "repeats itself", ((3, 1, 4, 1, 5, 9, 2, 6), (1, 2, 3, 1, 2, 3, 1, 2))),
    workloads.Kind("story", "open-ended story", "does not", ((5, 4, 3, 7), (9, 8, 7, 6))),
)
MAX_NEW = 6


@pytest.fixture(scope="module")
def pair():
    with toy.one_thread():
        yield toy.toy_pair()


@pytest.fixture(scope="module")
def measured(pair):
    target, draft = pair
    calls = []
    with toy.one_thread():
        result = workloads.run_workloads(
            target=target, drafts=[draft, "ngram"], kinds=TOY_KINDS, prompts_per_kind=2,
            max_new_tokens=MAX_NEW, on_progress=lambda done, total, partial: calls.append((done, total)),
        )  # fmt: skip
    return result, calls


def test_every_kind_and_drafter_is_measured_with_its_prediction(measured):
    result, calls = measured
    assert calls == [(i, 8) for i in range(1, 9)]  # 2 kinds x 2 prompts x 2 drafters, one call per pair
    assert not result.stopped and result.pairs_done == result.pairs_total == 8
    assert result.kinds() == ["code", "story"] and result.drafts() == ["toy-draft", "ngram"]
    for cell in result.cells:
        assert cell["prompts"] == cell["pairs"] == 2
        assert cell["new_tokens"] == 2 * MAX_NEW  # the toy pair has no end-of-sequence token
        assert cell["tokens_per_iteration"] == pytest.approx(cell["new_tokens"] / cell["iterations"])
        assert len(cell["acceptance_by_position"]) == cell["gamma"]
        assert cell["speedup_low"] <= cell["speedup"] <= cell["speedup_high"]
        if cell["alpha"] is not None:
            assert cell["predicted_tokens_per_iteration"] == expected_tokens_per_iteration(cell["alpha"], 3)
            expected = walltime_improvement(cell["alpha"], 3, cell["c"], cell["verify_cost"])
            assert cell["predicted_speedup"] == pytest.approx(expected)
    toy_cell = result.cell("code", "toy-draft")
    assert toy_cell["alpha"] is not None and 0 <= toy_cell["alpha"] <= 1


def test_a_cell_of_one_prompt_is_that_runs_own_trace(pair):
    """Pooled over one prompt, α, tokens per pass and acceptance by position are the trace's (greedy: the same run)."""
    target, draft = pair
    kind = workloads.Kind("code", "code", "", (TOY_KINDS[0].prompts[0],))
    with toy.one_thread():
        result = workloads.run_workloads(target=target, drafts=[draft], kinds=[kind], max_new_tokens=MAX_NEW)
        trace = speculative_generate(
            list(kind.prompts[0]),
            target=target,
            draft=draft,
            options=DecodeOptions(gamma=3, temperature=0.0, max_new_tokens=MAX_NEW),
        )
    cell = result.cells[0]
    assert cell["alpha"] == pytest.approx(trace.summary["alpha"])
    assert cell["tokens_per_iteration"] == pytest.approx(trace.summary["mean_accepted_length"])
    assert cell["acceptance_by_position"] == [r["acceptance"] for r in acceptance_by_position(trace.iterations, 3)]


def test_a_stop_between_pairs_keeps_what_was_timed(pair):
    target, draft = pair
    done = []
    with toy.one_thread():
        result = workloads.run_workloads(
            target=target, drafts=[draft, "ngram"], kinds=TOY_KINDS, prompts_per_kind=2, max_new_tokens=4,
            on_progress=lambda d, t, partial: done.append(d), should_stop=lambda: len(done) >= 3,
        )  # fmt: skip
    assert result.stopped and result.pairs_done == 3 and result.pairs_total == 8
    # code's first prompt for both drafters, then its second for the toy draft only
    assert result.cell("code", "toy-draft")["pairs"] == 2 and result.cell("code", "ngram")["pairs"] == 1
    assert len(result.cells) == 2 and result.drafts() == ["toy-draft", "ngram"]


def test_json_and_csv_round_trip(measured):
    result = measured[0]
    back = workloads.from_json(result.to_json())
    assert back.cells == result.cells and back.config == result.config
    from_csv = workloads.from_csv(result.to_csv().encode())
    for a, b in zip(from_csv.cells, result.cells, strict=True):
        assert a["kind"] == b["kind"] and a["draft"] == b["draft"] and a["pairs"] == b["pairs"]
        assert a["speedup"] == pytest.approx(b["speedup"])
        assert a["acceptance_by_position"] == pytest.approx(b["acceptance_by_position"], abs=1e-4)
    assert workloads.read("x.csv", result.to_csv().encode()).cells == from_csv.cells


def test_a_position_no_iteration_reached_survives_the_csv(measured):
    result = measured[0]
    result = workloads.WorkloadsResult(config={}, cells=[dict(result.cells[0])])
    result.cells[0]["acceptance_by_position"] = [0.5, None, None]
    assert workloads.from_csv(result.to_csv()).cells[0]["acceptance_by_position"] == [0.5, None, None]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(schema="specviz.sweep/1"), "not a workloads file"),
        (lambda d: d["cells"][0].update(alpha=1.5), "alpha: 1.5 is outside"),
        (lambda d: d["cells"][0].pop("speedup"), "missing speedup"),
        (lambda d: d["cells"][0].update(pairs=1.5), "whole number"),
        (lambda d: d["cells"][0].update(acceptance_by_position=[0.5, 2]), "position 2"),
        (lambda d: d["cells"].append(dict(d["cells"][0])), "twice"),
        (lambda d: d.update(cells=[]), "no rows"),
        (lambda d: d.update(cells="x"), "must be a list"),
    ],
)
def test_a_bad_file_is_refused_with_a_reason(measured, change, message):
    data = json.loads(measured[0].to_json())
    change(data)
    with pytest.raises(workloads.WorkloadsError, match=message):
        workloads.from_json(json.dumps(data))


@pytest.mark.parametrize(
    ("text", "message"),
    [(b"", "empty"), (b'{"cells": [', "truncated"), (b"\xff\xfe", "not UTF-8"), (b'{"a": NaN}', "NaN")],
)
def test_a_broken_file_is_refused_with_a_reason(text, message):
    with pytest.raises(workloads.WorkloadsError, match=message):
        workloads.from_json(text)


def test_a_csv_without_the_columns_is_refused():
    with pytest.raises(workloads.WorkloadsError, match="no column"):
        workloads.from_csv("gamma,temperature\n3,0\n")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"drafts": []}, "at least one"), ({"kinds": []}, "at least one"), ({"max_new_tokens": 0}, "max new tokens"),
     ({"prompts_per_kind": True}, "prompts per kind")],
)  # fmt: skip
def test_unusable_settings_are_refused(pair, kwargs, message):
    with pytest.raises(workloads.WorkloadsError, match=message):
        workloads.run_workloads(target=pair[0], **{"drafts": ["ngram"], "kinds": TOY_KINDS, **kwargs})


def test_the_shipped_kinds_are_six_with_three_prompts_each():
    assert len(workloads.KINDS) >= 5 and len(set(workloads.KIND_KEYS)) == len(workloads.KINDS)
    prompts = [p for kind in workloads.KINDS for p in kind.prompts]
    assert all(len(kind.prompts) == 3 for kind in workloads.KINDS)
    assert len(set(prompts)) == len(prompts) and all(isinstance(p, str) and p.strip() for p in prompts)


def test_the_shipped_recording_covers_every_kind_and_offline_drafter():
    result = workloads.shipped()
    assert result is not None, "specviz/assets/workloads.json is missing or unreadable"
    assert set(result.kinds()) == set(workloads.KIND_KEYS)
    assert set(result.drafts()) == set(workloads.OFFLINE_DRAFTS)
    assert len(result.cells) == len(workloads.KINDS) * len(workloads.OFFLINE_DRAFTS) and not result.stopped
    assert result.config["cpu"] and result.config["recorded_with"]
    assert "CPU " in workloads.provenance(result)
