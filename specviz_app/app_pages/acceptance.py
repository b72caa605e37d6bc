"""Acceptance: how often drafts pass, by position and along the text, against the theory from α."""

import streamlit as st

from specviz.labs import theory
from specviz.teaching import charts, glossary
from specviz.teaching.charts import quality
from specviz.teaching.charts.acceptance import counted_iterations, predicted_mean_length
from specviz.teaching.charts.drafting import iteration_counts, run_summary, tree_effect
from specviz_app import keys, language, render
from specviz_app.runs import gallery


def acceptance() -> None:
    loaded = render.open_trace_page("acceptance")
    if loaded is None:
        return
    trace, lang, w = loaded.trace, language.current(), language.words("acceptance")
    if trace.mode != "speculative":
        st.info(w["target_only"])
        return
    if (summary := run_summary(trace, lang)) is not None:
        st.info(summary, icon=":material/content_cut:")
    left, right = st.columns(2)
    left.plotly_chart(charts.acceptance_by_position_figure(trace, lang), key=keys.ACCEPTANCE_BY_POSITION_CHART)
    right.plotly_chart(charts.accept_length_figure(trace, lang), key=keys.ACCEPTANCE_LENGTHS_CHART)
    st.plotly_chart(charts.beta_along_text_figure(trace, lang), key=keys.ACCEPTANCE_BETA_CHART)
    _captions(trace, lang, w)
    _tables(trace, lang, w)
    _means(trace, lang, w)
    _beside_record(trace, lang, w)


def _beside_record(trace, lang: str, w: dict[str, str]) -> None:
    """This run's τ, acceptance and α by position and top-k coverage beside the shipped head's and the
    default's on held-out text (the shipped record)."""
    st.markdown(w["quality_heading"])
    st.caption(w["quality_intro"])
    record, why = gallery.shipped_draft_report()
    if record is None:
        st.info(quality.record_problem(why, lang))
        return
    rows, notes = quality.run_beside_record(trace, record, lang)
    st.dataframe(rows, hide_index=True, height=35 * (len(rows) + 1) + 3)  # every row in sight, no inner scroll
    for note in notes:
        st.caption(note)
    st.caption(quality.record_words(record, lang))


def _tables(trace, lang: str, w: dict[str, str]) -> None:
    """The charts' numbers as tables: their columns keep the library's English names, shown in `lang`."""
    left, right = st.columns(2)
    left.markdown(w["by_position"])
    number = st.column_config.NumberColumn
    at_k, beta = glossary.term("acceptance_at_position", lang), glossary.term("beta", lang)
    # Short headers, the full names on hover: in half the page at 1400 px the long ones cut "mean β" off.
    left.dataframe(
        charts.position_table(trace),
        hide_index=True,
        column_config={
            "draft position": number(w["col_k"], help=w["col_k_help"]),
            "reached": number(w["col_reached"]),
            "accepted": number(w["col_accepted"]),
            glossary.ACCEPTANCE_AT_POSITION.label: number(
                w["col_at_k"], help=f"{at_k.label}: {at_k.definition}", format="%.3f"
            ),
            "mean β": number(
                w["col_mean_beta"], help=w["col_mean_beta_help"].format(definition=beta.definition), format="%.3f"
            ),
        },
    )
    right.markdown(w["tokens_heading"])
    right.dataframe(
        charts.length_table(trace),
        hide_index=True,
        column_config={
            "tokens per iteration": number(w["col_tokens"]),
            "iterations": number(w["col_iterations"]),
            "measured fraction": number(w["col_measured"], format="%.3f"),
            "predicted fraction": number(w["col_predicted"], format="%.3f"),
        },
    )


def _captions(trace, lang: str, w: dict[str, str]) -> None:
    """What the charts rest on (which iterations each counts), and where the engine's draft tree parts
    them from the prediction."""
    if (counts := iteration_counts(trace, lang)) is not None:
        st.caption(":material/functions: " + counts)
    if (effect := tree_effect(trace, lang)) is not None:
        st.caption(effect)
    prediction = glossary.term("histogram_prediction", lang)
    st.caption(w["later_positions"].format(label=prediction.label, definition=prediction.definition))


def _means(trace, lang: str, w: dict[str, str]) -> None:
    """The predicted mean tokens per iteration beside the measured one, over the same iterations, and
    the paper's formula at γ: they part when iterations drafted fewer than γ."""
    alpha, gamma = trace.summary.get("alpha"), trace.config.get("gamma") or 0
    its = counted_iterations(trace)
    if alpha is None or not gamma or not its:
        return
    made = [len(it["drafts"]) for it in its]
    text = w["means"].format(
        n=len(its), made=sum(made) / len(made), gamma=gamma, predicted=predicted_mean_length(alpha, made),
        measured=sum(it["accepted_count"] + 1 for it in its) / len(its),
        paper=theory.expected_tokens_per_iteration(alpha, gamma), alpha=alpha,
    )  # fmt: skip
    s = trace.summary
    if len(its) != s["iterations"]:  # the headline's and Theory's tokens per iteration count them all
        text += w["means_headline"].format(
            label=glossary.term("mean_accepted_length", lang).label.lower(), mean=s["mean_accepted_length"],
            iterations=s["iterations"], tokens=s["new_tokens"],
        )  # fmt: skip
    if min(made) < gamma:
        drafts = glossary.term("drafts_made", lang)
        text += w["means_drafts"].format(label=drafts.label, definition=drafts.definition)
    st.markdown(text)


acceptance()
