"""Theory: the paper's closed forms driven by sliders for α, γ and c, with the current trace's
measured α and c as a point on the same axes, and Table 4 recomputed as a visible check."""

import streamlit as st

from specviz import glossary, theory
from specviz.charts import theory as theory_charts
from specviz.config import GAMMA_MAX
from specviz_app import keys, state


@st.cache_data(show_spinner=False, max_entries=64)
def _plane(alpha: float, c: float, measured_alpha: float | None, measured_c: float | None):
    measured = None if measured_alpha is None or measured_c is None else {"alpha": measured_alpha, "c": measured_c}
    return theory_charts.alpha_c_plane_figure(alpha, c, measured=measured, gamma_max=GAMMA_MAX)


def _measured() -> dict | None:
    """α, c, γ, tokens per iteration and the measured speedup of the trace on show (None: none to use)."""
    loaded = state.current()
    point = None if loaded is None else theory.measured_point(loaded.trace, loaded.baseline)
    return None if point is None else {"source": loaded.source, **point}


def _use_measured(m: dict) -> None:
    exact = {}
    for key, value in (("th_alpha", m["alpha"]), ("th_c", m["c"])):
        if value is not None:
            exact[key] = min(max(value, 0.0), 1.0)
            st.session_state[key] = round(exact[key], 2)  # the slider's 0.01 grid
    st.session_state[keys.THEORY_EXACT] = exact
    if m["gamma"]:
        st.session_state[keys.THEORY_GAMMA] = min(int(m["gamma"]), GAMMA_MAX)


def _exact(key: str, shown: float) -> float:
    """The trace's own value behind a slider that 'Use the current trace's α, γ, c' set, for as long as
    the slider still shows it rounded; else the slider's value. The headline then computes Thm 3.8
    from the same α and c as the chart's trace point (rounded inputs printed 0.99× beside its 0.98×)."""
    exact = st.session_state.get(keys.THEORY_EXACT, {}).get(key)
    return exact if exact is not None and round(exact, 2) == shown else shown


def theory_page() -> None:
    st.title("Theory")
    st.caption(
        "Leviathan et al. (2023) predict the speed of speculative decoding from three numbers: α, how often a "
        "draft passes on average; γ, drafts per iteration; and c, what one draft step costs as a fraction of one "
        "target step. Move them and watch the curves; the pink diamond is what the current trace measured."
    )
    st.session_state.setdefault(keys.THEORY_ALPHA, 0.75)
    st.session_state.setdefault(keys.THEORY_GAMMA, 7)
    st.session_state.setdefault(keys.THEORY_C, 0.05)
    m = _measured()

    cols = st.columns([1, 1, 1, 1.1], vertical_alignment="bottom")
    alpha = cols[0].slider(
        glossary.ALPHA.label, 0.0, 1.0, step=0.01, key=keys.THEORY_ALPHA,
        help="the mean of β = Σ min(p, q): how likely a draft is to pass",
    )  # fmt: skip
    gamma = cols[1].slider(
        "γ (draft tokens per iteration)", 1, GAMMA_MAX, key=keys.THEORY_GAMMA,
        help="more drafts: more to win and to waste",
    )  # fmt: skip
    c = cols[2].slider(
        "c (draft step ÷ target step)", 0.0, 1.0, step=0.01, key=keys.THEORY_C,
        help="cost of one draft step as a fraction of one target pass; 0 = free draft",
    )  # fmt: skip
    cols[3].button(
        "Use the current trace's α, γ, c",
        on_click=_use_measured,
        args=(m,),
        disabled=m is None or m["alpha"] is None or m["c"] is None,
        help="set the sliders to what the trace on show measured",
        width="stretch",
    )

    alpha, c = _exact("th_alpha", alpha), _exact("th_c", c)
    best = theory.best_gamma(alpha, c, GAMMA_MAX)
    cols = st.columns(4)
    cols[0].metric(
        "Expected tokens per iteration",
        f"{theory.expected_tokens_per_iteration(alpha, gamma):.2f}",
        help="(1 − α^(γ+1)) / (1 − α), Eq. 1",
    )
    cols[1].metric(
        "Expected walltime improvement",
        f"{theory.walltime_improvement(alpha, gamma, c):.2f}×",
        help="(1 − α^(γ+1)) / ((1 − α)(γc + 1)), Thm 3.8, at your γ",
    )
    cols[2].metric(
        "Best γ", f"{best}", help=f"gives {theory.walltime_improvement(alpha, best, c):.2f}× (γ from 1 to {GAMMA_MAX})"
    )
    cols[3].metric(
        "Arithmetic operations",
        f"{theory.operations_factor(alpha, gamma):.2f}×",
        help="total target work vs the target alone (Thm 3.11, c_hat = 0): speed is bought with extra compute",
    )
    if theory.speedup_possible(alpha, c):
        st.success(f"α = {alpha:.2f} > c = {c:.2f}: some γ gives a speedup (Cor 3.9). The best is γ = {best}.")
    else:
        st.error(
            f"α = {alpha:.2f} ≤ c = {c:.2f}: no γ gives a speedup (Cor 3.9). Drafting costs more than it saves; "
            "a better draft (higher α) or a cheaper one (lower c) is needed."
        )

    measured_point = None
    if m is None:
        st.info(
            "No speculative trace on show: run one (sidebar ▶ Run) or open an example on **Traces** to see a point."
        )
    elif m["alpha"] is None or m["c"] is None:
        st.info("The trace on show has no measured α or c (nothing was drafted), so there is no point to draw.")
    else:
        measured_point = m
        speed = "" if m["speedup"] is None else f", measured speedup {m['speedup']:.2f}×"
        st.caption(
            f"Current trace ({m['source']}): α = {m['alpha']:.3f}, {glossary.C_PER_VERIFY.label} = {m['c']:.3f}, "
            f"γ = {m['gamma']}, {m['tokens']:.2f} tokens per iteration{speed}. Here c is the "
            f"{glossary.C_PER_VERIFY.label}: {glossary.C_PER_VERIFY.definition}."
        )

    left, right = st.columns(2)
    left.plotly_chart(
        theory_charts.tokens_per_iteration_curve_figure(alpha, gamma, GAMMA_MAX, measured=measured_point),
        key="th-tokens",
    )
    right.plotly_chart(
        theory_charts.walltime_curve_figure(alpha, c, gamma, GAMMA_MAX, measured=measured_point), key="th-walltime"
    )
    point = measured_point or {"alpha": None, "c": None}
    st.plotly_chart(_plane(alpha, c, point["alpha"], point["c"]), key="th-plane")
    st.caption(
        f"Each point of the plane shows the best speedup over γ = 1..{GAMMA_MAX} (white: 1×, no gain; red: slower; "
        "green: "
        "faster, deepest at 4× or more). Above the dashed line α = c drafting never pays, whatever γ."
    )

    st.subheader("Check: the paper's Table 4, recomputed")
    st.caption(
        "T5-XXL target with three T5 drafts on one TPU-v4 (Leviathan et al., Appendix A.3). 'Paper expected' is "
        "Thm 3.8 as the paper printed it (one decimal); 'our formula' is specviz.theory at the same α, γ, c. "
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


theory_page()
