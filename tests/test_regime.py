"""The regime (specviz.labs.regime, specviz.teaching.charts.regime): the predicted speedup and where a pass
stops paying are read from the record's own v(rows), τ and c, and the table and sentences show those very
numbers, in English and Chinese."""

from __future__ import annotations

import pytest

from specviz.labs import regime
from specviz.teaching.charts import regime as charts

pytestmark = pytest.mark.quick


def record() -> dict:
    def fmt(v: dict, tau: float, c: float, rows: int, measured: float) -> dict:
        return {
            "weights": "x", "kernels": "k", "one_row_ms": 6.0, "v": {str(r): x for r, x in v.items()},
            "tau": tau, "c": c, "verify_rows": rows, "v_pass": v[8], "measured_speedup": measured,
            "tokens_per_s": {"speculative": 100.0, "target_alone": 120.0},
        }  # fmt: skip

    return {
        "schema": regime.SCHEMA, "machine": "cpu", "threads": 2, "prompt": "p", "new_tokens": 64,
        "formats": {
            "shipped": fmt({1: 1.0, 4: 1.5, 8: 2.3, 16: 4.0}, tau=1.9, c=0.4, rows=7, measured=0.6),
            "float32": fmt({1: 1.0, 4: 1.1, 8: 1.2, 16: 1.5}, tau=1.9, c=0.2, rows=7, measured=1.2),
        },
    }  # fmt: skip


def test_v_at_reads_the_nearest_measured_rows_at_or_above():
    f = record()["formats"]["shipped"]
    assert regime.v_at(f, 7) == 2.3 and regime.v_at(f, 4) == 1.5 and regime.v_at(f, 40) == 4.0


def test_predicted_speedup_and_where_a_pass_stops_paying():
    r = record()
    assert regime.predicted_speedup(r, "shipped") == pytest.approx(
        1.9 / (0.4 + 2.3)
    )  # v_pass: the mean v of its passes
    assert regime.stops_paying_at(r, "shipped") == 4  # v 1.5 reaches tau - c = 1.5
    assert regime.stops_paying_at(r, "float32") is None  # v stays below tau - c = 1.7 up to 16 rows
    r["formats"]["float32"]["v"]["16"] = 1.8
    assert regime.stops_paying_at(r, "float32") == 16


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_table_and_sentences_show_the_records_numbers(lang):
    r = record()
    table = charts.regime_table(r, lang)
    assert [row["τ"] for row in table] == [1.9, 1.9]  # as the sentences print them
    sentences = charts.regime_sentences(r, lang)
    assert "0.60×" in sentences[0] and "1.20×" in sentences[1] and "2.30" in sentences[0]
    assert "llama.cpp" in sentences[-1]
    figure = charts.v_figure(r, lang)
    assert len(figure.data) == 4  # a line and the pass's marker per format
