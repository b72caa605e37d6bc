"""Serving (specviz.labs.serving): B requests at once, with and without speculation. Total tokens/s by
B, a pass's cost per row by rows per pass (with the line a fixed-cost, memory-bound pass would
follow), per-request latency by B; the table the page shows and its sentences, computed from the
same cells so that every number on the page is one of the table's. Words from the catalogue
(words.py) in `lang`."""

from __future__ import annotations

import math
from itertools import takewhile
from typing import Any

import plotly.graph_objects as go

from specviz.labs.serving import MODES, ServingResult
from specviz.teaching.charts.style import PREDICTION_COLOR, house_figure, titled
from specviz.teaching.charts.words import words
from specviz.teaching.charts.workloads import fill, recorded_with

MODE_COLORS = {"target": "#616161", "speculative": "#1565c0"}
MODE_STYLE = {"target": ("dash", "square"), "speculative": ("solid", "circle")}
# A pass that costs more than this many times the pass over the fewest rows no longer gets its extra rows
# nearly free: past here, its rows and requests cost more than the weights' one read (compute, and
# each request's own attention and cache, which forward_many runs request by request).
MEMORY_BOUND_FACTOR = 2.0


def mode_label(mode: str, lang: str = "en") -> str:
    """A mode's name in `lang`: "target alone" or "speculative decoding" (labs.serving.MODE_LABELS in English)."""
    return words(lang)[f"serving_mode_{mode}"]


def _by_batch(fig: go.Figure, result: ServingResult, title: str, y_title: str, lang: str) -> go.Figure:
    """The layout of a chart by B: B on a log axis ticked at the sizes measured, y from zero."""
    batches = result.batches()
    axis = {"title": {"text": words(lang)["serving_b_axis"]}, "type": "log", "tickvals": batches,
            "ticktext": [str(b) for b in batches]}  # fmt: skip
    y_axis = {"title": {"text": y_title}, "rangemode": "tozero"}
    fig.update_layout(title=titled(title), xaxis=axis, yaxis=y_axis, height=360)
    return fig


def _line(fig: go.Figure, result: ServingResult, mode: str, y: str, hover: str, lang: str, **extra: Any) -> None:
    cells = [result.cell(b, mode) for b in result.batches()]
    cells = [c for c in cells if c is not None and c.get(y) is not None]
    dash, symbol = MODE_STYLE[mode]
    fig.add_scatter(
        x=[c["batch"] for c in cells],
        y=[c[y] for c in cells],
        name=mode_label(mode, lang),
        mode="lines+markers",
        line={"color": MODE_COLORS[mode], "dash": dash},
        marker={"symbol": symbol, "size": 9},
        hovertemplate=hover + f"<extra>{mode_label(mode, lang)}</extra>",
        **extra,
    )


def throughput_figure(result: ServingResult, lang: str = "en") -> go.Figure:
    """Total tokens/s of all B requests, the target alone and speculative, by B; the crossover marked."""
    w = words(lang)
    fig = house_figure()
    for mode in MODES:
        _line(fig, result, mode, "tokens_per_s", w["serving_hover_throughput"], lang)
    if (b := result.crossover()) is not None:  # a trace, not add_vline: its label stretched the log axis
        top = max(c["tokens_per_s"] or 0 for c in result.cells)
        fig.add_scatter(x=[b, b], y=[0, top], mode="lines", name=w["serving_crossover_line"].format(b=b),
                        line={"color": PREDICTION_COLOR, "dash": "dot"}, hoverinfo="skip")  # fmt: skip
    return _by_batch(fig, result, w["serving_throughput_title"], w["serving_throughput_y"], lang)


def latency_figure(result: ServingResult, lang: str = "en") -> go.Figure:
    """Each request's seconds from the common start to its last token: the median request, the slowest as a bar."""
    w = words(lang)
    fig = house_figure()
    for mode in MODES:
        cells = [c for b in result.batches() if (c := result.cell(b, mode)) and c.get("latency_s") is not None]
        spread = [(c.get("latency_max_s") or c["latency_s"]) - c["latency_s"] for c in cells]
        _line(
            fig,
            result,
            mode,
            "latency_s",
            w["serving_hover_latency"],
            lang,
            error_y={"type": "data", "array": spread, "arrayminus": [0] * len(cells), "visible": True},
        )
    return _by_batch(fig, result, w["serving_latency_title"], w["serving_latency_y"], lang)


# The pass-cost chart's plot area in a half-width column at 1280×720 (Plotly's own, measured in Chromium)
# and its labels' size there: a "B n" label is drawn only where it fits beside the others at that size (a
# wider window only spreads them; hover names every point either way).
PLOT_PX = (309, 165)
CHAR_PX, LINE_PX, MARKER_PX = 7, 15, 10
LABEL_SHIFT = MARKER_PX / 2 + 3 + LINE_PX / 2  # pixels from a point to its label's middle


def _log_range(values: list[float], pad_px: tuple[float, float], size_px: float) -> tuple[float, float]:
    """A log axis's range (log10 units) holding `values` with pad_px pixels free below and above."""
    lo, hi = math.log10(min(values)), math.log10(max(values))
    span = max(hi - lo, 0.3)  # a lone point still gets a readable axis
    per_px = span / max(size_px - sum(pad_px), 1.0)
    return lo - pad_px[0] * per_px, hi + pad_px[1] * per_px


def _near_groups(points: list[tuple[float, float, int]], to_px) -> list[list[tuple[float, float, int]]]:
    """Points (x, y, B) in runs along x whose "B n" labels would cover each other's at PLOT_PX."""
    groups: list[list[tuple[float, float, int]]] = []
    for point in sorted(points):
        px, py = to_px(*point[:2])
        if groups and any(
            abs(px - (q := to_px(*g[:2]))[0]) < 4 * CHAR_PX and abs(py - q[1]) < LINE_PX for g in groups[-1]
        ):
            groups[-1].append(point)
        else:
            groups.append([point])
    return groups


def _label_text(batches: list[int], measured: list[int]) -> str:
    """ "B 4", "B 8, 16", or "B 2–16" for a run of every B measured from 2 to 16 (short enough to fit)."""
    run = measured[measured.index(batches[0]) : measured.index(batches[-1]) + 1]
    if len(batches) > 2 and batches == run:
        return f"B {batches[0]}–{batches[-1]}"
    return "B " + ", ".join(str(b) for b in batches)


def _add_labels(fig: go.Figure, points: list[tuple[float, float, int]], mode: str, to_px, placed: list) -> None:
    """One mode's "B n" labels, above their points (clear of the dotted line, which falls to the right),
    else below: near points share one, at their middle; a label that would cover one already `placed`
    (boxes in pixels; it grows) on both sides is left out, and hover names its points."""
    measured = sorted({b for _, _, b in points})
    for group in _near_groups(points, to_px):
        text = _label_text(sorted(g[2] for g in group), measured)
        x = math.prod(g[0] for g in group) ** (1 / len(group))  # the middle, on a log axis
        for side in (1, -1):
            y = max(g[1] for g in group) if side > 0 else min(g[1] for g in group)
            cx, cy = to_px(x, y)
            cy += side * LABEL_SHIFT
            half = CHAR_PX * len(text) / 2
            box = (cx - half, cx + half, cy - LINE_PX / 2, cy + LINE_PX / 2)
            if not any(box[0] < o[1] and o[0] < box[1] and box[2] < o[3] and o[2] < box[3] for o in placed):
                placed.append(box)
                where = {"x": math.log10(x), "y": math.log10(y), "yshift": side * LABEL_SHIFT}  # log axes: log10
                fig.add_annotation(**where, text=text, showarrow=False, font={"color": MODE_COLORS[mode], "size": 12})
                break


def _ticks(lo: float, hi: float, steps: tuple[float, ...], base: float = 10.0) -> list[float]:
    """Round ticks inside a log range (log10 units): steps × base**k, no minor labels to crowd a projected axis."""
    top = math.ceil(hi / math.log10(base)) + 1
    every = {s * base**k for k in range(math.floor(lo / math.log10(base)) - 1, top) for s in steps}
    return sorted(v for v in every if lo <= math.log10(v) <= hi)


def pass_cost_figure(result: ServingResult, lang: str = "en") -> go.Figure:
    """A verification pass's time per token row, by rows per pass (each point one B and mode), beside
    what a pass of fixed cost (purely memory-bound: the weights read once, whatever the rows) would give."""
    w = words(lang)
    fig = house_figure()
    fig.update_layout(title=titled(w["serving_pass_title"]), height=360)
    cells = [c for c in result.cells if c.get("pass_ms_per_row") and c.get("rows_per_pass")]
    if not cells:
        return fig
    first = min(cells, key=lambda c: c["rows_per_pass"])
    xs = sorted({c["rows_per_pass"] for c in cells})
    pad = LABEL_SHIFT + LINE_PX / 2 + 2
    x_range = _log_range(xs, (4 * CHAR_PX, 4 * CHAR_PX), PLOT_PX[0])
    y_range = _log_range([c["pass_ms_per_row"] for c in cells] + [first["pass_ms"] / xs[-1]], (pad, pad), PLOT_PX[1])

    def to_px(x: float, y: float) -> tuple[float, float]:
        scale = [PLOT_PX[i] / (r[1] - r[0]) for i, r in enumerate((x_range, y_range))]
        return (math.log10(x) - x_range[0]) * scale[0], (math.log10(y) - y_range[0]) * scale[1]

    placed: list = []
    for mode in MODES:
        mine = sorted((c for c in cells if c["mode"] == mode), key=lambda c: c["rows_per_pass"])
        fig.add_scatter(
            x=[c["rows_per_pass"] for c in mine],
            y=[c["pass_ms_per_row"] for c in mine],
            name=mode_label(mode, lang),
            mode="markers",
            marker={"symbol": MODE_STYLE[mode][1], "size": MARKER_PX, "color": MODE_COLORS[mode]},
            customdata=[[c["batch"], c["pass_ms"]] for c in mine],
            hovertemplate=w["serving_hover_pass"] + f"<extra>{mode_label(mode, lang)}</extra>",
        )
        _add_labels(fig, [(c["rows_per_pass"], c["pass_ms_per_row"], c["batch"]) for c in mine], mode, to_px, placed)
    fig.add_scatter(x=xs, y=[first["pass_ms"] / x for x in xs], name=w["serving_fixed_cost"],
                    mode="lines", line={"color": PREDICTION_COLOR, "dash": "dot"}, hoverinfo="skip")  # fmt: skip
    fig.update_layout(
        xaxis={"type": "log", "range": list(x_range), "tickvals": _ticks(*x_range, (1,), base=2.0),
               "title": {"text": w["serving_rows_x"]}},
        yaxis={"type": "log", "range": list(y_range), "tickvals": _ticks(*y_range, (1, 2, 5)),
               "title": {"text": w["serving_ms_row_y"]}},
    )  # fmt: skip
    return fig


def serving_table(result: ServingResult, lang: str = "en") -> list[dict[str, Any]]:
    """One row per B: both modes' tokens/s, the gain, latency, pass cost, and greedy identity (the keys
    are stable: the page shows each column under its header in the language on show)."""
    of = words(lang)["serving_identical_of"]
    rows = []
    for b in result.batches():
        alone, spec = result.cell(b, "target") or {}, result.cell(b, "speculative") or {}
        same = spec.get("identical")
        rows.append(
            {
                "B": b,
                "alone tok/s": alone.get("tokens_per_s"),
                "spec tok/s": spec.get("tokens_per_s"),
                "gain ×": result.gain(b),
                "alone latency s": alone.get("latency_s"),
                "spec latency s": spec.get("latency_s"),
                "alone ms/row": alone.get("pass_ms_per_row"),
                "spec ms/row": spec.get("pass_ms_per_row"),
                "alone rows/pass": alone.get("rows_per_pass"),
                "spec rows/pass": spec.get("rows_per_pass"),
                "identical": "–" if same is None else of.format(same=same, requests=spec.get("requests")),
            }
        )
    return rows


def crossover_sentence(result: ServingResult, lang: str = "en") -> str:
    """Where speculation's gain shrinks, in one plain sentence from the measured gains."""
    w = words(lang)
    gains = [(b, g) for b in result.batches() if (g := result.gain(b)) is not None]
    if not gains:
        return w["serving_need_both"]
    listed = w["serving_list_sep"].join(w["serving_gain_at"].format(gain=g, b=b) for b, g in gains)
    crossover = result.crossover()
    if crossover is None:
        return w["serving_no_crossover"].format(listed=listed, last=gains[-1][0])
    paid = [b for b, g in gains if g > 1 and b < crossover]
    before = w["serving_paid_up_to"].format(b=paid[-1]) if paid else w["serving_never_paid"]
    return w["serving_crossover"].format(before=before, crossover=crossover, listed=listed)


def memory_bound_sentence(result: ServingResult, lang: str = "en") -> str:
    """Whether the passes stayed nearly free as rows were added: the first pass, by rows, that cost over
    MEMORY_BOUND_FACTOR times the pass over the fewest rows (the one the others add rows to), and its
    B, or that none did, from the measured passes."""
    w = words(lang)
    cells = sorted(
        (c for c in result.cells if c.get("pass_ms") and c.get("rows_per_pass")), key=lambda c: c["rows_per_pass"]
    )
    if not cells:
        return w["serving_no_pass"]
    first, limit = cells[0], cells[0]["pass_ms"] * MEMORY_BOUND_FACTOR
    bound = list(takewhile(lambda c: c["pass_ms"] <= limit, cells))  # from the fewest rows up to the first over
    last = bound[-1]
    said = w["serving_pass_said"].format(
        rows=first["rows_per_pass"], ms=first["pass_ms"], last_rows=last["rows_per_pass"], last_ms=last["pass_ms"],
        per_row=last["pass_ms_per_row"],
    )  # fmt: skip
    if len(bound) == len(cells):
        return w["serving_memory_bound"].format(said=said, factor=MEMORY_BOUND_FACTOR, rows=last["rows_per_pass"])
    over = cells[len(bound)]
    return w["serving_not_memory_bound"].format(
        said=said, b=over["batch"], rows=over["rows_per_pass"], ms=over["pass_ms"], factor=MEMORY_BOUND_FACTOR
    )


def provenance(result: ServingResult, lang: str = "en") -> str:
    """Where and how the numbers were measured, in one line of markdown: speed is this machine's."""
    w, cfg = words(lang), result.config
    load = cfg.get("load_before")
    load = w["serving_prov_load"].format(load=load[0]) if isinstance(load, list) and load else ""
    parts = [
        fill(w["serving_prov_models"], target=str(cfg.get("target", "?")), draft=str(cfg.get("draft", "?"))),
        fill(w["serving_prov_settings"], gamma=cfg.get("gamma", "?"), temperature=cfg.get("temperature", "?"),
             max_new=cfg.get("max_new_tokens", "?")),
        fill(w["serving_prov_cpu" if "cpu" in cfg else "serving_prov_no_cpu"], cpu=str(cfg.get("cpu")),
             cores=cfg.get("cores", "?"), load=load),
    ]  # fmt: skip
    if cfg.get("recorded_with"):
        parts.append(recorded_with(str(cfg["recorded_with"]), lang))
    return " · ".join(parts)


def gpu_note(lang: str = "en") -> str:
    """What a GPU changes, in markdown: its pass stays memory-bound far longer, so the crossover moves right."""
    return words(lang)["serving_gpu_note"]
