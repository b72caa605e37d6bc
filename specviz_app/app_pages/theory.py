"""Theory: the paper's closed forms driven by sliders for α, γ, c and v, the current trace's
measured α, c and v as a point on the same axes with its prediction beside its measured speedup
(and what parts them), and Table 4 recomputed as a visible check. The sliders and the buttons that
set them from the trace live in specviz_app/theory_controls.py."""

import streamlit as st

from specviz.config import GAMMA_MAX
from specviz.labs import theory
from specviz.teaching import glossary
from specviz.teaching.charts import theory as theory_charts
from specviz_app import keys, session, theory_controls


@st.cache_data(show_spinner=False, max_entries=64)
def _plane(alpha: float, c: float, v: float, measured_alpha: float | None, measured_c: float | None):
    measured = None if measured_alpha is None or measured_c is None else {"alpha": measured_alpha, "c": measured_c}
    return theory_charts.alpha_c_plane_figure(alpha, c, measured=measured, gamma_max=GAMMA_MAX, v=v)


def _metrics(alpha: float, gamma: int, c: float, v: float) -> None:
    best = theory.best_gamma(alpha, c, GAMMA_MAX, v)
    cols = st.columns([1, 1.3, 0.6, 1])  # equal columns cut "Expected walltime improv…" at 1280 px
    cols[0].metric(
        "Expected tokens per iteration",
        f"{theory.expected_tokens_per_iteration(alpha, gamma):.2f}",
        help="τ = (1 − α^(γ+1)) / (1 − α), Eq. 1",
    )
    cols[1].metric(
        "Expected walltime improvement",
        f"{theory.walltime_improvement(alpha, gamma, c, v):.2f}×",
        delta=f"paper's v = 1: {theory.walltime_improvement(alpha, gamma, c):.2f}×",
        delta_color="off",
        delta_arrow="off",
        help="τ / (γc + v) at your γ: an iteration costs γ draft steps and one verification pass of v target steps, "
        "and the target alone pays one step per token. Thm 3.8 of the paper is v = 1",
    )
    cols[2].metric(
        "Best γ",
        f"{best}",
        help=f"gives {theory.walltime_improvement(alpha, best, c, v):.2f}× (γ from 1 to {GAMMA_MAX})",
    )
    cols[3].metric(
        "Arithmetic operations",
        f"{theory.operations_factor(alpha, gamma):.2f}×",
        help="total target work vs the target alone (Thm 3.11, c_hat = 0): speed is bought with extra compute",
    )


def _verdict(alpha: float, c: float, v: float, run: theory.Explanation | None) -> None:
    """Whether some γ pays at the sliders' values. When the sliders hold the trace's own values
    (`run`), the verdict never contradicts what that run measured."""
    best = theory.best_gamma(alpha, c, GAMMA_MAX, v)
    pays = theory.speedup_possible(alpha, c, v, GAMMA_MAX)
    if run is not None and pays != (run.measured >= 1):
        said = f"γ = {best} would pay ({theory.walltime_improvement(alpha, best, c, v):.2f}×)" if pays else "no γ pays"
        result = "a loss" if run.measured < 1 else "a gain"
        st.warning(
            f"At these values the formula says {said}, but this run measured {result}: {run.measured:.2f}× "
            f"({run.low:.2f}–{run.high:.2f} over {run.pairs} pairs). {run.sentence()}",
            icon=":material/hourglass_bottom:",
        )
    elif pays:
        rule = f"α = {alpha:.2f} > c = {c:.2f} (Cor 3.9)" if v == 1.0 else f"At v = {v:.2f}"
        st.success(f"{rule}: some γ gives a speedup. The best is γ = {best}.")
    else:
        st.error(
            f"At α = {alpha:.2f}, c = {c:.2f} and v = {v:.2f} no γ gives a speedup: drafting and verifying cost "
            "more than they save; a better draft (higher α), a cheaper one (lower c) or a cheaper pass is needed."
        )


def _measured_section(m: dict | None) -> theory.Explanation | None:
    """The current trace's numbers, its prediction against its measurement, and what parts them."""
    if m is None:
        st.info(
            "No speculative trace on show: run one (sidebar ▶ Run) or open an example on **Traces** to see a point."
        )
        return None
    if not theory_controls.usable(m):
        st.info(
            "The trace on show has no measured α, c or v (nothing was drafted, or no target-alone run was recorded "
            "to measure c and v against), so there is no point to draw."
        )
        return None
    st.caption(
        f"Current trace ({m['source']}): α = {m['alpha']:.3f}, c = {m['c']:.3f}, v = {m['v']:.2f}, γ = {m['gamma']}, "
        f"{m['tokens']:.2f} tokens per iteration (the headline's, over all its iterations). "
        f"{glossary.C.label}: {glossary.C.definition}. "
        f"{glossary.VERIFY_COST.label}: {glossary.VERIFY_COST.definition}. "
        + theory_charts.measured_where(session.current().trace, m["source"].startswith(("run here", "stored run")))
    )
    explained = theory.explain_measurement(m)
    if explained is None:
        return None
    cols = st.columns([1.3, 1.3, 1, 1.6])  # [1, 1, 1, 2] cut both predictions' labels at 1280 px
    cols[0].metric("Paper's prediction (v = 1)", f"{explained.paper:.2f}×")
    cols[1].metric("Prediction with measured v", f"{explained.predicted:.2f}×")
    cols[2].metric(
        "Measured", f"{explained.measured:.2f}×", f"{explained.low:.2f}–{explained.high:.2f}, {explained.pairs} pairs",
        delta_color="off", delta_arrow="off",
    )  # fmt: skip
    cols[3].markdown(explained.sentence())
    with st.expander("What the formula assumes and what the run did"):
        st.dataframe(
            [{"": what, "formula": round(f, 2), "this run": round(r, 2)} for what, f, r in explained.rows],
            hide_index=True,
        )
    return explained


def _charts(alpha: float, gamma: int, c: float, v: float, point: dict | None) -> None:
    left, right = st.columns(2)
    left.plotly_chart(
        theory_charts.tokens_per_iteration_curve_figure(alpha, gamma, GAMMA_MAX, measured=point),
        key=keys.THEORY_TOKENS_CHART,
    )
    right.plotly_chart(
        theory_charts.walltime_curve_figure(alpha, c, gamma, GAMMA_MAX, measured=point, v=v),
        key=keys.THEORY_WALLTIME_CHART,
    )
    st.plotly_chart(
        _plane(alpha, c, v, *((point["alpha"], point["c"]) if point else (None, None))), key=keys.THEORY_PLANE_CHART
    )
    st.caption(
        f"Each point of the plane shows the best speedup over γ = 1..{GAMMA_MAX} at your v (white: 1×, no gain; red: "
        "slower; green: faster, deepest at 4× or more). At v = 1, above the dashed line α = c drafting never pays."
    )


def _table4() -> None:
    st.subheader("Check: the paper's Table 4, recomputed")
    st.caption(
        "T5-XXL target with three T5 drafts on one TPU-v4 (Leviathan et al., Appendix A.3). 'Paper expected' is "
        "Thm 3.8 as the paper printed it (one decimal); 'our formula' is specviz.labs.theory at the same α, γ, c. "
        "'Paper measured' is the speedup they observed."
    )
    rows = theory_charts.table4_rows()
    st.dataframe(
        rows,
        hide_index=True,
        height=35 * (len(rows) + 1) + 3,
        column_config={"our formula (×)": st.column_config.NumberColumn(format="%.2f")},
    )
    worst = max(abs(r["formula − paper expected"]) for r in rows)
    if worst <= 0.1:
        st.success(f"All {len(rows)} rows agree with the paper's expected column within {worst:.2f}.")
    else:
        st.error(f"A row differs from the paper's expected column by {worst:.2f}: the formula has a bug.")


def theory_page() -> None:
    st.title("Theory")
    st.caption(
        "Leviathan et al. (2023) predict the speed of speculative decoding from α, how often a draft passes on "
        "average; γ, drafts per iteration; and c, what one draft step costs in target steps. They assume checking "
        "γ + 1 tokens costs one target step; v says what it really costs here. The pink diamond is what the "
        "current trace's own numbers predict, the cross what it measured."
    )
    m = theory_controls.measured()
    alpha, gamma, c, v = theory_controls.sliders(m)
    if words := theory_charts.sliders_against_run(m, alpha, gamma, c, v):
        st.caption(":material/tune: " + words)
    theory_controls.drafting_note(session.current())
    _metrics(alpha, gamma, c, v)
    explained = _measured_section(m)
    _verdict(alpha, c, v, explained if theory_controls.on_trace(m, alpha, gamma, c, v) else None)
    _charts(alpha, gamma, c, v, m if theory_controls.usable(m) else None)
    _table4()


theory_page()
