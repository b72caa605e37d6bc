"""specviz in a Jupyter notebook: a trace renders itself inline, and `trace.show(view)` draws the
app's other views with the same builders (specviz.teaching.charts), so a number reads the same in both.

    trace                                  # in a cell: headline numbers, legend, token stream
    trace.show("tokens", baseline=base)    # the same, with the speedup and the sameness verdict
    trace.show("step", iteration=3)        # the step inspector for one iteration
    trace.show("timeline", baseline=base)  # draft and verify phases beside the target alone
    trace.show("acceptance")               # by draft position, tokens per iteration, β along the text
    trace.show("theory", baseline=base)    # the formulas with the trace's measured α and c as a point

Plotly figures display through Plotly's own renderers, offline (no CDN): in Jupyter each figure
goes out as Plotly's JSON (drawn by the plotly.js that the installed plotly package bundles for
JupyterLab and Notebook 7) plus HTML using plotly.js embedded into the notebook once, from the
installed package (for classic Notebook 6 and HTML exports; `embed_plotly_once`). Colab, VS Code
and other front ends keep Plotly's own choice. `View.to_html()` writes a standalone page with
plotly.js embedded.
Every piece of text from a user or a model is escaped (specviz.teaching.charts.stream).
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from specviz.config import GAMMA_MAX
from specviz.errors import TraceError
from specviz.labs import theory
from specviz.teaching.charts import accept_length_figure, acceptance_by_position_figure, beta_along_text_figure
from specviz.teaching.charts import theory as theory_charts
from specviz.teaching.charts.headline import headline_metrics, passes_versus_time
from specviz.teaching.charts.step import step_view
from specviz.teaching.charts.stream import CSS, escaped_text, legend_html, statuses_in, token_stream_html
from specviz.teaching.charts.timeline import time_to_tokens_ms, timeline_figure, tokens_in_common
from specviz.traces.sameness import sameness_of, sentence_for
from specviz.traces.trace import Trace

VIEWS = ("tokens", "step", "timeline", "acceptance", "theory")

NOTEBOOK_CSS = (
    "<style>"
    ".sv-nb{font:14px/1.45 system-ui,sans-serif;color:#212121}"
    ".sv-metrics{display:grid;grid-template-columns:repeat(4,minmax(0,1fr));gap:6px 12px;margin:6px 0 10px}"
    ".sv-metric{border:1px solid #ddd;border-radius:6px;padding:4px 8px}"
    ".sv-metric-label{font-size:12px;color:#555}.sv-metric-value{font-size:20px;font-weight:600}"
    ".sv-config{font-size:12px;color:#555;margin:2px 0}"
    ".sv-verdict{padding:6px 9px;border-radius:6px;background:#eef5ff;margin:8px 0}"
    ".sv-verdict.sv-identical{background:#eaf7ea}.sv-verdict.sv-different{background:#fff4e5}"
    ".sv-columns{display:grid;grid-template-columns:1fr 1fr;gap:12px}"
    ".sv-plain{white-space:pre-wrap;border:1px solid #eee;border-radius:6px;padding:6px 9px}"
    "</style>"
)


def embed_plotly_once() -> None:
    """In plain Jupyter, Plotly draws with the plotly.js its JupyterLab extension bundles (offline);
    add its "notebook" renderer so each figure also carries HTML that uses plotly.js embedded in
    the notebook once (classic Notebook 6, HTML exports). Other front ends keep Plotly's choice."""
    import plotly.io as pio

    if pio.renderers.default == "plotly_mimetype":
        pio.renderers.default = "plotly_mimetype+notebook"


class View:
    """What a notebook cell shows: pieces of HTML and Plotly figures, in order."""

    def __init__(self, parts: list[str | go.Figure]):
        self.parts = parts

    @property
    def figures(self) -> list[go.Figure]:
        return [p for p in self.parts if isinstance(p, go.Figure)]

    @property
    def html(self) -> str:
        """The HTML pieces only (the figures are displayed by Plotly)."""
        return "".join(p for p in self.parts if isinstance(p, str))

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        if self.figures:
            embed_plotly_once()
        for part in self.parts:
            display(HTML(part) if isinstance(part, str) else part)

    def to_html(self) -> str:
        """A standalone page: plotly.js embedded once from the installed package (works offline)."""
        body, first = [], True
        for part in self.parts:
            if isinstance(part, go.Figure):
                body.append(part.to_html(full_html=False, include_plotlyjs=first))
                first = False
            else:
                body.append(part)
        return "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>" + "".join(body) + "</body></html>"


def _metrics_html(trace: Trace, baseline: Trace | None) -> str:
    cells = "".join(
        f"<div class='sv-metric' title='{html.escape(m.help, quote=True)}'>"
        f"<div class='sv-metric-label'>{html.escape(m.label)}</div>"
        f"<div class='sv-metric-value'>{html.escape(m.value)}</div>"
        + (f"<div class='sv-metric-label'>{html.escape(m.note)}</div>" if m.note else "")
        + "</div>"
        for row in headline_metrics(trace, baseline)
        for m in row
    )
    note = passes_versus_time(trace, baseline)
    return f"<div class='sv-metrics'>{cells}</div>" + (f"<p>{html.escape(note)}</p>" if note else "")


def _config_html(trace: Trace) -> str:
    c = trace.config
    parts = [f"target {c.get('target')}"]
    if trace.mode == "speculative":
        parts += [f"draft {c.get('draft')}", f"γ {c.get('gamma')}"]
    parts += [f"temperature {c.get('temperature')}", f"seed {c.get('seed')}", f"{trace.summary['new_tokens']} tokens"]
    return f"<div class='sv-config'>{html.escape(' · '.join(parts))}</div>"


def _sameness_html(trace: Trace, baseline: Trace) -> str:
    verdict = sameness_of(trace, baseline)

    kind = {"identical": "sv-identical", "near_tie": "", "different_samples": ""}.get(verdict.verdict, "sv-different")
    left = f"<div><b>Speculative</b> ({trace.summary['new_tokens']} tokens)<div class='sv-plain'>"
    left += f"{escaped_text(trace.output_text)}</div></div>"
    right = f"<div><b>Target alone</b> ({baseline.summary['new_tokens']} tokens)<div class='sv-plain'>"
    right += f"{escaped_text(baseline.output_text)}</div></div>"
    return (
        f"<div class='sv-verdict {kind}' data-verdict='{html.escape(verdict.verdict)}'>"
        f"{html.escape(sentence_for(trace, verdict))}</div><div class='sv-columns'>{left}{right}</div>"
    )


def trace_html(trace: Trace, baseline: Trace | None = None) -> str:
    """The trace as one block of HTML: settings, headline numbers, sameness (with a baseline),
    legend and the coloured token stream with hover cards."""
    parts = [NOTEBOOK_CSS, CSS, "<div class='sv-nb'>", _config_html(trace), _metrics_html(trace, baseline)]
    if baseline is not None and baseline is not trace:
        parts.append(_sameness_html(trace, baseline))
    if trace.iterations:
        parts += [
            legend_html(statuses_in(trace.iterations)),
            token_stream_html(trace.iterations, trace.extra, gamma=trace.config.get("gamma")),
        ]
    else:
        parts.append(f"<div class='sv-plain'>{escaped_text(trace.output_text)}</div>")
    return "".join(parts) + "</div>"


def _heading(text: str) -> str:
    return f"<div class='sv-nb'><h4 style='margin:10px 0 4px'>{html.escape(text)}</h4></div>"


def _paragraph(text: str, bold: str = "") -> str:
    lead = f"<b>{html.escape(bold)}</b> " if bold else ""
    return f"<div class='sv-nb'><p style='margin:4px 0'>{lead}{html.escape(text)}</p></div>"


def step_parts(trace: Trace, iteration: int) -> list[str | go.Figure]:
    view = step_view(trace, iteration)
    parts: list[str | go.Figure] = [
        NOTEBOOK_CSS + _heading(view.summary),
        "<div class='sv-nb'>"
        + legend_html(statuses_in([view.iteration]))
        + token_stream_html([view.iteration], trace.extra, gamma=trace.config.get("gamma"))
        + "</div>",
    ]
    if view.tree_note:
        parts.append(_paragraph(view.tree_note))
    for panel in view.drafts:
        parts += [_paragraph("", panel.title), panel.figure]
    if view.discarded_note:
        parts.append(_paragraph(view.discarded_note))
    corr = view.correction
    parts.append(_paragraph(corr.text, corr.title))
    if corr.figure is not None:
        parts.append(corr.figure)
    return parts


def timeline_parts(trace: Trace, baseline: Trace | None) -> list[str | go.Figure]:
    parts: list[str | go.Figure] = [timeline_figure(trace, baseline)]
    if baseline is not None and baseline is not trace:
        common = tokens_in_common(trace, baseline)
        spec_ms, base_ms = time_to_tokens_ms(trace, common), time_to_tokens_ms(baseline, common)
        parts.append(
            _paragraph(
                f"speculative {spec_ms:.0f} ms against {base_ms:.0f} ms for the target alone, over the {common} "
                "tokens both runs wrote (a fair race)",
                f"Time to {common} tokens:",
            )
        )
    return parts


def theory_parts(trace: Trace, baseline: Trace | None) -> list[str | go.Figure]:
    point = theory.measured_point(trace, baseline)
    if point is None or point["alpha"] is None or point["c"] is None or point["v"] is None:
        raise TraceError(
            "The theory view needs a speculative trace that drafted something, and its target-alone baseline "
            "(c and v are measured against it): show(trace, 'theory', baseline=baseline)."
        )
    alpha, c, v, gamma = point["alpha"], point["c"], point["v"], int(point["gamma"])
    explained = theory.explain_measurement(point)
    return [
        _paragraph(
            f"α = {alpha:.3f}, c = {c:.3f}, v = {v:.2f}, γ = {gamma}, {point['tokens']:.2f} tokens per iteration, "
            f"measured speedup {point['spread'].text()}. The curves are the formulas at these values; the point is "
            "what the trace measured.",
            "Measured:",
        ),
        *([_paragraph(explained.sentence(), "Prediction:")] if explained is not None else []),
        theory_charts.tokens_per_iteration_curve_figure(alpha, gamma, GAMMA_MAX, measured=point),
        theory_charts.walltime_curve_figure(alpha, c, gamma, GAMMA_MAX, measured=point, v=v),
        theory_charts.alpha_c_plane_figure(alpha, c, measured=point, gamma_max=GAMMA_MAX, v=v),
    ]


def show(trace: Trace, view: str = "tokens", *, baseline: Trace | None = None, iteration: int = 1) -> View:
    """One of the app's views of `trace` for a notebook cell (see the module docstring)."""
    if view == "tokens":
        return View([trace_html(trace, baseline)])
    if view in ("step", "timeline", "acceptance") and not trace.iterations:
        raise TraceError(f"The {view} view needs a traced run (this one was made with tracing off).")
    if view == "step":
        return View(step_parts(trace, iteration))
    if view == "timeline":
        return View(timeline_parts(trace, baseline))
    if view == "acceptance":
        return View([acceptance_by_position_figure(trace), accept_length_figure(trace), beta_along_text_figure(trace)])
    if view == "theory":
        return View(theory_parts(trace, baseline))
    raise TraceError(f"Unknown view {view!r}: pick one of {', '.join(VIEWS)}.")


def show_race(result: dict) -> View:
    """A race of drafters (specviz.labs.race.run_race) as the Drafters page draws it: speed and acceptance."""
    from specviz.teaching.charts.race import race_position_figure, race_speed_figure

    return View([race_speed_figure(result), race_position_figure(result)])
