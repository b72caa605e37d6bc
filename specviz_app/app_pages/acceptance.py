"""Acceptance: how often drafts pass, by position and along the text, against the theory from α."""

import streamlit as st

from specviz.labs import theory
from specviz.teaching import charts, glossary
from specviz.teaching.charts.acceptance import counted_iterations, predicted_mean_length
from specviz.teaching.charts.drafting import iteration_counts, run_summary, tree_effect
from specviz_app import keys, render


def acceptance() -> None:
    loaded = render.open_trace_page("acceptance")
    if loaded is None:
        return
    trace = loaded.trace
    if trace.mode != "speculative":
        st.info("This is a target-only trace: it has no drafts to accept. Open a speculative trace.")
        return
    if (summary := run_summary(trace)) is not None:
        st.info(summary, icon=":material/content_cut:")
    left, right = st.columns(2)
    left.plotly_chart(charts.acceptance_by_position_figure(trace), key=keys.ACCEPTANCE_BY_POSITION_CHART)
    right.plotly_chart(charts.accept_length_figure(trace), key=keys.ACCEPTANCE_LENGTHS_CHART)
    st.plotly_chart(charts.beta_along_text_figure(trace), key=keys.ACCEPTANCE_BETA_CHART)
    _captions(trace)
    left, right = st.columns(2)
    left.markdown("**By draft position**")
    fraction = st.column_config.NumberColumn(format="%.3f")
    at_k = glossary.ACCEPTANCE_AT_POSITION
    # Short headers, the full names on hover: in half the page at 1400 px the long ones cut "mean β" off.
    left.dataframe(
        charts.position_table(trace),
        hide_index=True,
        column_config={
            "draft position": st.column_config.NumberColumn("k", help="draft position k = 1..γ"),
            at_k.label: st.column_config.NumberColumn(
                "acceptance at k", help=f"{at_k.label}: {at_k.definition}", format="%.3f"
            ),
            "mean β": st.column_config.NumberColumn(
                "mean β", help=f"mean over the iterations that reached k of {glossary.BETA.definition}", format="%.3f"
            ),
        },
    )
    right.markdown("**Tokens per iteration**")
    right.dataframe(
        charts.length_table(trace),
        hide_index=True,
        column_config={"measured fraction": fraction, "predicted fraction": fraction},
    )
    _means(trace)


def _captions(trace) -> None:
    """What the charts rest on (which iterations each counts), and where the engine's draft tree parts
    them from the prediction."""
    if (counts := iteration_counts(trace)) is not None:
        st.caption(":material/functions: " + counts)
    if (effect := tree_effect(trace)) is not None:
        st.caption(effect)
    st.caption(
        "Later positions are reached less often (only when the iteration drafted that far and every earlier "
        "draft passed), so their bars rest on fewer iterations. The histogram counts every iteration that "
        f"drafted, each against the prediction for the drafts it actually made. "
        f"{glossary.HISTOGRAM_PREDICTION.label}: {glossary.HISTOGRAM_PREDICTION.definition}."
    )


def _means(trace) -> None:
    """The predicted mean tokens per iteration beside the measured one, over the same iterations, and
    the paper's formula at γ: they part when iterations drafted fewer than γ."""
    alpha, gamma = trace.summary.get("alpha"), trace.config.get("gamma") or 0
    its = counted_iterations(trace)
    if alpha is None or not gamma or not its:
        return
    made = [len(it["drafts"]) for it in its]
    measured = sum(it["accepted_count"] + 1 for it in its) / len(its)
    paper = theory.expected_tokens_per_iteration(alpha, gamma)
    text = (
        f"Over the {len(its)} whole iterations that drafted (they drafted {sum(made) / len(made):.2f} of γ = {gamma} "
        f"on average): predicted mean tokens per iteration **{predicted_mean_length(alpha, made):.2f}**, "
        f"measured **{measured:.2f}**. The paper's (1 − α^(γ+1)) / (1 − α) assumes γ drafts every time: "
        f"**{paper:.2f}** at α = {alpha:.2f}."
    )
    s = trace.summary
    if len(its) != s["iterations"]:  # the headline's and Theory's tokens per iteration count them all
        text += (
            f" The headline's {glossary.MEAN_ACCEPTED_LENGTH.label.lower()}, {s['mean_accepted_length']:.2f}, "
            f"is over all {s['iterations']} iterations ({s['new_tokens']} tokens ÷ {s['iterations']}), the ones "
            "without a draft or without a correction included."
        )
    if min(made) < gamma:
        text += f" {glossary.DRAFTS_MADE.label}: {glossary.DRAFTS_MADE.definition}."
    st.markdown(text)


acceptance()
