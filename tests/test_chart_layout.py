"""Layout and number hygiene of the charts (issue 10): legends never under titles, legend swatches
the colour of their marks, labels never under the points they name, and a number shown twice is
one number. Plain figure dicts and shipped traces: no model, no browser."""

from __future__ import annotations

import pytest

from specviz.labs import theory
from specviz.labs.sweep import SweepResult
from specviz.labs.theory import walltime_improvement
from specviz.shipped import ASSETS
from specviz.teaching import lesson
from specviz.teaching.charts import residual_figure
from specviz.teaching.charts import sweep as sweep_charts
from specviz.teaching.charts import theory as theory_charts
from specviz.teaching.charts.lesson import pick_iterations
from specviz.traces.trace import Trace

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick

# ----- legends and titles ------------------------------------------------------------------------


def make_sweep() -> SweepResult:
    """Two temperatures by three γ, numbers shaped like a real sweep's."""
    cells = []
    for t, alpha in ((0.0, 0.8), (1.0, 0.5)):
        for g in (1, 2, 3):
            tokens = sum(alpha**k for k in range(g + 1))
            cells.append(
                {"gamma": g, "temperature": t, "speedup": tokens / (1 + 0.1 * g), "mean_accepted_length": tokens,
                 "alpha": alpha, "c": 0.1, "predicted_speedup": walltime_improvement(alpha, g, 0.1),
                 "predicted_tokens_per_iteration": tokens, "tokens_per_s": 10.0, "baseline_tokens_per_s": 10.0}
            )  # fmt: skip
    return SweepResult(config={}, baselines={"0.0": 10.0, "1.0": 10.0}, cells=cells)


def theory_and_sweep_figures():
    measured = {"gamma": 4, "alpha": 0.6, "c": 0.2, "speedup": 0.98, "tokens": 2.1}
    history = [{"step": 0, "alpha": 0.2, "greedy_agreement": 0.3}, {"step": 100, "alpha": 0.4, "greedy_agreement": 0.5}]
    result = make_sweep()
    return {
        "tokens per iteration": theory_charts.tokens_per_iteration_curve_figure(0.8, 4, measured=measured),
        "walltime": theory_charts.walltime_curve_figure(0.62, 0.09, 4, measured=measured),
        "α-c plane": theory_charts.alpha_c_plane_figure(0.7, 0.1, measured=measured, steps=11),
        "draft training": theory_charts.draft_training_figure(history, 0.1),
        "sweep heatmap": sweep_charts.speedup_heatmap(result),
        "sweep tokens": sweep_charts.tokens_per_iteration_sweep_figure(result),
        "sweep speedup": sweep_charts.speedup_sweep_figure(result),
    }


@pytest.mark.parametrize("name", list(theory_and_sweep_figures()))
def test_legend_and_title_sit_in_separate_bands(name):
    """The title is pinned to the top of the figure; the legend must sit in its own band at the bottom.

    A horizontal legend above the plot (paper y > 1) grows upwards as it wraps onto more lines in a
    narrow column and runs into the title; anchored to the bottom of the figure it reserves its own
    margin below the x axis, whatever its height."""
    layout = theory_and_sweep_figures()[name].layout
    title = layout.title
    assert title.yref == "container" and title.yanchor == "top" and title.y >= 0.95, title
    legend = layout.legend
    assert legend.yref == "container", f"{name}: a paper-anchored legend shares the top margin with the title"
    assert legend.yanchor == "bottom" and legend.y == 0, legend
    assert layout.xaxis.automargin is True  # the axis titles push the plot up, so they stay above the legend
    assert layout.margin.t >= 40  # room for one line of title above the plot


# ----- legend swatches ---------------------------------------------------------------------------


def legend_entry(fig, bars):
    """The legend item that stands for `bars`: the trace itself, or the legend-only entry of its group."""
    if bars.showlegend is not False:
        return bars
    return next(t for t in fig.data if t.legendgroup == bars.legendgroup and t.showlegend is not False)


def test_residual_legend_swatches_are_the_colour_of_their_bars():
    """Plotly draws a bar's legend swatch with marker.color and the first bar's outline, and leaves
    marker.opacity out: a pale (marker.opacity) trace showed a full-strength swatch, and the trace
    whose first bar outlines the resampled token showed a black-edged swatch no bar has."""
    trace = lesson.load_recordings().trace
    it = trace.iterations[pick_iterations(trace.iterations)["resample"]]
    fig = residual_figure(it["drafts"][it["accepted_count"]], it["correction"], trace.extra)
    drawn = [t for t in fig.data if t.type == "bar" and any(y is not None for y in t.y)]
    assert len(drawn) == 2
    swatches = []
    for bars in drawn:
        entry = legend_entry(fig, bars)
        assert isinstance(bars.marker.color, str), "one colour per trace: a list shows only its first in the legend"
        assert bars.marker.opacity in (None, 1), "marker.opacity is not drawn in the legend swatch"
        assert entry.marker.color == bars.marker.color, entry.name
        width = entry.marker.line.width
        assert width is None or isinstance(width, int | float), f"{entry.name}: swatch takes bar 1 outline"
        swatches.append(entry.marker.color)
    assert len(set(swatches)) == 2, "the two residuals are told apart in the legend"


# ----- labels and points -------------------------------------------------------------------------


@pytest.mark.parametrize("example", ["01-default", "02-sampled", "04-ngram-gamma6"])
def test_alpha_label_is_never_under_a_draft_marker(example):
    """β along the text: the label of the α line sat at the line's left end, inside the plot, where
    the first drafts' markers start at about the same height. It is now a legend entry, out of the plot."""
    from specviz.teaching.charts import beta_along_text_figure

    trace = Trace.from_json((ASSETS / "examples" / f"{example}.json").read_bytes())
    fig = beta_along_text_figure(trace)
    inside = [a for a in fig.layout.annotations if a.xref != "paper" or 0 <= (a.x or 0) <= 1]
    assert not [a.text for a in inside if "α" in (a.text or "")], "an α label inside the plot area"
    alpha = trace.summary["alpha"]
    assert any(t.name == f"α = mean β = {alpha:.3f}" and t.showlegend is not False for t in fig.data)
    assert any(s.type == "line" and s.y0 == s.y1 == alpha for s in fig.layout.shapes)  # the line itself stays


# ----- one number, one value ---------------------------------------------------------------------


def shipped_pairs():
    """(name, speculative trace, its target-alone baseline) for every shipped recording with a baseline."""
    rec = lesson.load_recordings()
    pairs = [("lesson", rec.trace, rec.baseline), ("lesson contrast", rec.contrast, rec.contrast_baseline)]
    for path in sorted((ASSETS / "examples").glob("*.baseline.json")):
        spec = path.with_name(path.name.replace(".baseline", ""))
        pairs.append((spec.stem, Trace.from_json(spec.read_bytes()), Trace.from_json(path.read_bytes())))
    return pairs


@pytest.mark.parametrize("name, trace, baseline", shipped_pairs(), ids=[p[0] for p in shipped_pairs()])
def test_a_run_prints_one_duration(name, trace, baseline):
    """The headline's "N tokens in X ms" and the timeline's "X ms for the first N tokens" are the same
    run's duration: they printed 2545 and 2547 ms when the timeline took the last iteration's end."""
    from specviz.teaching.charts import timeline_figure
    from specviz.teaching.charts.headline import headline_metrics

    helps = " ".join(m.help for row in headline_metrics(trace, baseline) for m in row)
    notes = " ".join(a.text for a in timeline_figure(trace, baseline).layout.annotations)
    common = min(trace.summary["new_tokens"], baseline.summary["new_tokens"])
    for run in (trace, baseline):
        s = run.summary
        assert f"{s['new_tokens']} tokens in {s['wall_ms']:.0f} ms" in helps
        if s["new_tokens"] == common:  # not cut short by the race: the timeline prints the whole run
            assert f" {s['wall_ms']:.0f} ms for the first {common} tokens" in notes, notes


def test_theory_headline_and_legend_give_the_trace_one_predicted_speedup(monkeypatch):
    """After 'Use the current trace's α, γ, c' the headline's expected improvement and the walltime
    chart's trace point are Thm 3.8 at the same γ, α and c. The sliders hold α and c rounded to 0.01:
    computed from those, the headline printed 0.99× beside the legend's 0.98×."""
    import json
    import re

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the page needs no model; never reach for one
    at = AppTest.from_file(str(ASSETS.parent.parent / "specviz_app" / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("app_pages/theory.py").run()
    at.button[[b.label for b in at.button].index("Use the current trace's α, γ, c, v")].click().run()
    assert not at.exception, [e.value for e in at.exception]
    loaded = at.session_state["loaded"]
    point = theory.measured_point(loaded.trace, loaded.baseline)
    predicted = walltime_improvement(point["alpha"], point["gamma"], point["c"], point["v"])
    headline = {m.label: m.value for m in at.metric}["Expected walltime improvement"]
    chart = next(c for c in at.get("plotly_chart") if c.key == "th-walltime")
    names = [t.get("name", "") for t in json.loads(chart.proto.spec)["data"]]
    legend = next(re.search(r"\((\d+\.\d+)×\)", n).group(1) for n in names if "predicted from its α, c" in n)
    assert headline == f"{predicted:.2f}×" and legend == f"{predicted:.2f}", (headline, legend)
    assert at.slider(key="th_alpha").value == pytest.approx(round(point["alpha"], 2))  # the slider shows it rounded


def test_fewer_passes_that_lost_time_are_named_as_a_loss():
    """ "Target passes 7 vs 14" beside a speedup under 1 must not read as a gain: the headline says so."""
    import copy

    from specviz.teaching.charts.headline import headline_metrics, passes_versus_time
    from specviz.traces.speedup import SPECULATIVE_FIRST, pair_record

    _, trace, baseline = shipped_pairs()[2]  # the default example
    s = trace.summary
    assert s["target_calls"] < s["new_tokens"]
    metrics = {m.label: m for row in headline_metrics(trace, baseline) for m in row}
    assert metrics["Target passes"].value == f"{s['target_calls']} vs {s['new_tokens']}"

    def timed_against(ratio: float):
        """The trace with one timed pair whose target alone ran at its tokens/s ÷ ratio."""
        timed = copy.deepcopy(trace)
        alone = dict(baseline.summary, new_tokens=s["new_tokens"], wall_ms=s["wall_ms"] * ratio)
        timed.extra["timing"] = {"pairs": [pair_record(s, alone, SPECULATIVE_FIRST, True)], "wanted": 1}
        return timed

    note = passes_versus_time(timed_against(0.8), baseline)  # the target alone was faster
    assert note and f"({s['target_calls']} instead of {s['new_tokens']}) still took longer (0.80×)" in note
    assert passes_versus_time(timed_against(1.25), baseline) is None and passes_versus_time(trace, None) is None
