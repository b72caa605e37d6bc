"""specviz.labs.sweep on the toy pair: the grid, the stop flag, progress, and the JSON/CSV round trip
with validation of bad files. No model beyond two tiny random Llamas; a full 2 x 2 grid takes
well under a second on one thread."""

from __future__ import annotations

import json

import pytest

from specviz.engine import toy
from specviz.errors import SpecvizError
from specviz.labs import sweep
from specviz.labs.theory import expected_tokens_per_iteration


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with toy.one_thread():
        yield


@pytest.fixture(scope="module")
def pair():
    return toy.toy_pair()


@pytest.fixture(scope="module")
def small(pair):
    target, draft = pair
    return sweep.run_sweep(
        toy.TOY_PROMPT, target=target, draft=draft, gammas=[2, 1, 2], temperatures=[1.0, 0.0], max_new_tokens=6
    )


def test_grid_covers_every_gamma_and_temperature_in_order(small):
    assert [(c["gamma"], c["temperature"]) for c in small.cells] == [(1, 0.0), (2, 0.0), (1, 1.0), (2, 1.0)]
    assert set(small.baselines) == {"0.0", "1.0"}
    assert small.runs_done == small.runs_total == 6 and not small.stopped
    assert small.gammas() == [1, 2] and small.temperatures() == [0.0, 1.0]


def test_cells_hold_measurements_and_the_formulas(small):
    for cell in small.cells:
        assert cell["new_tokens"] == 6
        assert cell["speedup"] == pytest.approx(cell["tokens_per_s"] / cell["baseline_tokens_per_s"])
        assert cell["baseline_tokens_per_s"] == small.baselines[str(cell["temperature"])]
        assert 1 <= cell["mean_accepted_length"] <= cell["gamma"] + 1
        assert 0 <= cell["alpha"] <= 1 and cell["c"] > 0
        assert cell["predicted_tokens_per_iteration"] == pytest.approx(
            expected_tokens_per_iteration(cell["alpha"], cell["gamma"])
        )
        assert cell["verify_cost"] > 0  # v: the verify pass over the target alone's step (specviz.traces.speedup)
        assert cell["predicted_speedup"] == pytest.approx(
            cell["predicted_tokens_per_iteration"] / (cell["gamma"] * cell["c"] + cell["verify_cost"])
        )
    assert small.measured_c() > 0
    assert small.best() in small.cells


def test_same_seed_same_acceptance(pair, small):
    target, draft = pair
    again = sweep.run_sweep(
        toy.TOY_PROMPT, target=target, draft=draft, gammas=[1], temperatures=[1.0], max_new_tokens=6
    )
    assert again.cells[0]["alpha"] == small.cell(1, 1.0)["alpha"]
    assert again.cells[0]["mean_accepted_length"] == small.cell(1, 1.0)["mean_accepted_length"]


def test_stop_flag_is_checked_between_runs_and_keeps_partial_results(pair):
    target, draft = pair
    seen = []

    def progress(done, total, partial):
        seen.append((done, total, len(partial.cells)))

    result = sweep.run_sweep(
        toy.TOY_PROMPT, target=target, draft=draft, gammas=[1, 2, 3], temperatures=[0.0, 1.0], max_new_tokens=4,
        on_progress=progress, should_stop=lambda: len(seen) >= 3,
    )  # fmt: skip
    assert result.stopped
    assert result.runs_done == 3 and result.runs_total == 8
    assert len(result.cells) == 2  # baseline at 0.0, then gamma 1 and 2
    assert seen == [(1, 8, 0), (2, 8, 1), (3, 8, 2)]
    back = sweep.from_json(result.to_json())
    assert back.stopped and back.runs_total == 8 and back.runs_done == 3


def test_stop_before_anything_runs(pair):
    target, draft = pair
    result = sweep.run_sweep(toy.TOY_PROMPT, target=target, draft=draft, should_stop=lambda: True)
    assert result.stopped and result.cells == [] and result.runs_done == 0


def test_bad_grid_is_refused_with_a_clear_message(pair):
    target, draft = pair
    with pytest.raises(SpecvizError, match="at least one"):
        sweep.run_sweep(toy.TOY_PROMPT, target=target, draft=draft, gammas=[])
    with pytest.raises(SpecvizError, match="γ must be"):
        sweep.run_sweep(toy.TOY_PROMPT, target=target, draft=draft, gammas=[0])
    with pytest.raises(SpecvizError, match="Temperatures"):
        sweep.run_sweep(toy.TOY_PROMPT, target=target, draft=draft, temperatures=[float("nan")])


def test_json_and_csv_round_trip(small):
    back = sweep.from_json(small.to_json())
    assert back.cells == small.cells and back.baselines == small.baselines
    assert back.config["gammas"] == [1, 2]
    from_csv = sweep.from_csv(small.to_csv().encode())
    assert len(from_csv.cells) == 4
    for a, b in zip(from_csv.cells, small.cells, strict=True):
        assert a["gamma"] == b["gamma"] and a["speedup"] == pytest.approx(b["speedup"])
        assert a["alpha"] == pytest.approx(b["alpha"])
    assert sweep.read("x.csv", small.to_csv().encode()).cells[0]["gamma"] == 1
    assert sweep.read("x.json", small.to_json().encode()).cells == small.cells


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "empty"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not a sweep"),
        (json.dumps({"schema": "specviz.trace/1"}).encode(), "Unsupported schema"),
        (json.dumps({"schema": sweep.SCHEMA, "cells": []}).encode(), "holds no results"),
        (json.dumps({"schema": sweep.SCHEMA, "cells": [{"gamma": 1}]}).encode(), "missing"),
        (b'{"schema": "specviz.sweep/1", "cells": [{"gamma": NaN}]}', "not a valid number"),
        (b"\xff\xfe", "UTF-8"),
        # The trace's careful reading, in a sweep's words: its size limit, and a file cut short.
        (b" " * (sweep.MAX_SWEEP_BYTES + 1), "The sweep file is 2.1 MB; the limit is 2 MB"),
        (b'{"schema": "specviz.sweep/1", "cells": [', "not valid JSON.*It looks truncated"),
    ],
)
def test_bad_json_files_get_clear_errors(data, message):
    with pytest.raises(sweep.SweepError, match=message):
        sweep.from_json(data)


def test_bad_cell_values(small):
    data = small.to_dict()
    data["cells"][0]["gamma"] = 1.5
    with pytest.raises(sweep.SweepError, match="whole number"):
        sweep.from_json(json.dumps(data))
    data = small.to_dict()
    data["cells"][0]["alpha"] = 3
    with pytest.raises(sweep.SweepError, match="above 1"):
        sweep.from_json(json.dumps(data))
    data = small.to_dict()
    data["cells"][1] = dict(data["cells"][0])
    with pytest.raises(sweep.SweepError, match="twice"):
        sweep.from_json(json.dumps(data))


def test_bad_csv_files_get_clear_errors(small):
    with pytest.raises(sweep.SweepError, match="no column"):
        sweep.from_csv("a,b\n1,2\n")
    bad = small.to_csv().replace("\n1,", "\nabc,", 1)
    with pytest.raises(sweep.SweepError, match="not a number"):
        sweep.from_csv(bad)
    header = small.to_csv().splitlines()[0]
    with pytest.raises(sweep.SweepError, match="holds no results"):
        sweep.from_csv(header + "\n")
    # The trace's careful reading of an upload, in a sweep's words (specviz.traces.trace.uploaded_text).
    with pytest.raises(sweep.SweepError, match="The sweep file is not UTF-8 text"):
        sweep.from_csv(b"gamma,temperature\n\xff\xfe\n")
    with pytest.raises(sweep.SweepError, match="The sweep file is empty"):
        sweep.from_csv(b"  \n")
    with pytest.raises(sweep.SweepError, match="the limit is 2 MB. A sweep file is a few kB"):
        sweep.from_csv(b"x" * (sweep.MAX_SWEEP_BYTES + 1))
    assert sweep.from_csv(("\ufeff" + small.to_csv()).encode()).cells == sweep.from_csv(small.to_csv()).cells  # a BOM
