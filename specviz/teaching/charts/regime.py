"""The regime (specviz.labs.regime): v(rows) for both weight formats of the target, with the line where a
verification pass stops paying for itself (τ − c), the table of what was measured, and the sentences
that say why, every number read from the same record. Words from the catalogue (words.py) in `lang`."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.labs.regime import predicted_speedup, stops_paying_at, v_at
from specviz.teaching.charts.style import house_figure, titled
from specviz.teaching.charts.words import words

COLORS = {"float32": "#616161", "shipped": "#1565c0"}
DASH = {"float32": "dash", "shipped": "solid"}


def format_label(name: str, lang: str = "en") -> str:
    return words(lang)[f"regime_format_{name}"]


def v_figure(record: dict, lang: str = "en") -> go.Figure:
    """v(rows) per format, the break-even line τ − c of each, and its verification rows marked."""
    w = words(lang)
    fig = house_figure()
    for name, f in record["formats"].items():
        rows = sorted(int(r) for r in f["v"])
        label, color = format_label(name, lang), COLORS.get(name, "#2e7d32")
        fig.add_scatter(
            x=rows, y=[f["v"][str(r)] for r in rows], name=label, mode="lines+markers",
            line={"color": color, "dash": DASH.get(name, "solid")},
            hovertemplate=w["regime_hover_v"] + f"<extra>{label}</extra>",
        )  # fmt: skip
        fig.add_hline(y=f["tau"] - f["c"], line={"color": color, "dash": "dot", "width": 1})
        fig.add_scatter(
            x=[f["verify_rows"]], y=[v_at(f, f["verify_rows"])], mode="markers", showlegend=False,
            marker={"color": color, "size": 13, "symbol": "diamond"},
            hovertemplate=w["regime_hover_pass"].format(rows=f["verify_rows"]) + f"<extra>{label}</extra>",
        )  # fmt: skip
    fig.update_layout(
        title=titled(w["regime_title"]),
        xaxis={"title": {"text": w["regime_rows_x"]}},
        yaxis={"title": {"text": w["regime_v_y"]}, "rangemode": "tozero"},
        height=380,
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def regime_table(record: dict, lang: str = "en") -> list[dict]:
    """One row per format: the one-row step, the default's passes (median rows, mean v), τ, c, predicted and
    measured speedup, rounded as the sentences print them (eight columns: they fit at 1280 px)."""
    w = words(lang)
    out = []
    for name, f in record["formats"].items():
        out.append({
            w["regime_col_format"]: format_label(name, lang),
            w["regime_col_step"]: round(f["one_row_ms"], 1),
            w["regime_col_rows"]: f["verify_rows"],
            w["regime_col_v"]: round(f["v_pass"], 2),
            "τ": round(f["tau"], 2),
            "c": round(f["c"], 2),
            w["regime_col_predicted"]: round(predicted_speedup(record, name), 2),
            w["regime_col_measured"]: round(f["measured_speedup"], 2),
        })  # fmt: skip
    return out


def regime_sentences(record: dict, lang: str = "en") -> list[str]:
    """Per format, what it measured and whether speculation paid; then why, with llama.cpp's case."""
    w = words(lang)
    out = []
    for name, f in record["formats"].items():
        stop = stops_paying_at(record, name)
        where = w["regime_stops_at"].format(rows=stop) if stop is not None else w["regime_never_stops"]
        verdict = w["regime_pays"] if f["measured_speedup"] > 1 else w["regime_loses"]
        out.append(
            w["regime_sentence"].format(
                format=format_label(name, lang), step=f["one_row_ms"], rows=f["verify_rows"], v=f["v_pass"],
                tau=f["tau"], c=f["c"], predicted=predicted_speedup(record, name), measured=f["measured_speedup"],
                spec=f["tokens_per_s"]["speculative"], alone=f["tokens_per_s"]["target_alone"], verdict=verdict,
                where=where,
            )
        )  # fmt: skip
    if any(f["measured_speedup"] < predicted_speedup(record, n) for n, f in record["formats"].items()):
        out.append(w["regime_gap"])
    out.append(w["regime_why"])
    return out
