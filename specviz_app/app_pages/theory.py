"""Theory: the paper's closed forms driven by sliders for α, γ, c and v, the current trace's
measured α, c and v as a point on the same axes with its prediction beside its measured speedup
(and what parts them), and Table 4 recomputed as a visible check. The sliders and the buttons that
set them from the trace live in specviz_app/controls/theory.py."""

import streamlit as st

from specviz.config import GAMMA_MAX
from specviz.labs import theory
from specviz.teaching import glossary
from specviz.teaching.charts import theory as theory_charts
from specviz.teaching.charts import theory_text
from specviz_app import keys, language, render, session
from specviz_app.controls import theory as theory_controls
from specviz_app.runs import opening


@st.cache_data(show_spinner=False, max_entries=64)
def _plane(alpha: float, c: float, v: float, measured_alpha: float | None, measured_c: float | None, lang: str):
    measured = None if measured_alpha is None or measured_c is None else {"alpha": measured_alpha, "c": measured_c}
    return theory_charts.alpha_c_plane_figure(alpha, c, measured=measured, gamma_max=GAMMA_MAX, v=v, lang=lang)


def _metrics(alpha: float, gamma: int, c: float, v: float, w: dict[str, str]) -> None:
    best = theory.best_gamma(alpha, c, GAMMA_MAX, v)
    cols = st.columns([1, 1.3, 0.6, 1])  # equal columns cut "Expected walltime improv…" at 1280 px
    cols[0].metric(w["m_tokens"], f"{theory.expected_tokens_per_iteration(alpha, gamma):.2f}", help=w["m_tokens_help"])
    cols[1].metric(
        w["m_walltime"],
        f"{theory.walltime_improvement(alpha, gamma, c, v):.2f}×",
        delta=w["m_walltime_delta"].format(speedup=theory.walltime_improvement(alpha, gamma, c)),
        delta_color="off",
        delta_arrow="off",
        help=w["m_walltime_help"],
    )
    cols[2].metric(
        w["m_best"],
        f"{best}",
        help=w["m_best_help"].format(speedup=theory.walltime_improvement(alpha, best, c, v), gamma_max=GAMMA_MAX),
    )
    cols[3].metric(w["m_ops"], f"{theory.operations_factor(alpha, gamma):.2f}×", help=w["m_ops_help"])


def _verdict(alpha: float, c: float, v: float, run: theory.Explanation | None, lang: str, w: dict[str, str]) -> None:
    """Whether some γ pays at the sliders' values. When the sliders hold the trace's own values
    (`run`), the verdict never contradicts what that run measured."""
    best = theory.best_gamma(alpha, c, GAMMA_MAX, v)
    pays = theory.speedup_possible(alpha, c, v, GAMMA_MAX)
    if run is not None and pays != (run.measured >= 1):
        speedup = theory.walltime_improvement(alpha, best, c, v)
        said = w["would_pay"].format(gamma=best, speedup=speedup) if pays else w["no_gamma_pays"]
        st.warning(
            w["contradicts"].format(
                said=said, result=w["a_loss" if run.measured < 1 else "a_gain"], measured=run.measured,
                timed=_timed(w, run, "timed_range"), sentence=theory_text.explanation_sentence(run, lang),
            ),
            icon=":material/hourglass_bottom:",
        )  # fmt: skip
    elif pays:
        rule = w["rule_cor"].format(alpha=alpha, c=c) if v == 1.0 else w["rule_v"].format(v=v)
        st.success(w["pays"].format(rule=rule, gamma=best))
    else:
        st.error(w["no_pay"].format(alpha=alpha, c=c, v=v))


def _timed(w: dict[str, str], run: theory.Explanation, range_key: str) -> str:
    """How the run's measured speedup was timed: its pairs' range and count, or that one pair timed it, and
    whether it was measured under load (as the Playground says it: headline.range_note)."""
    said = w["timed_one"] if run.pairs == 1 else w[range_key].format(low=run.low, high=run.high, pairs=run.pairs)
    return said + language.words("charts")["headline_under_load_mark"] if run.spread.under_load else said


def _measured_section(m: dict | None, lang: str, w: dict[str, str]) -> theory.Explanation | None:
    """The current trace's numbers, its prediction against its measurement, and what parts them."""
    if m is None:
        st.info(w["no_trace"])
        return None
    if not theory_controls.usable(m):
        st.info(w["not_usable"])
        return None
    here = m["source"].startswith(("run here", "stored run"))
    st.caption(
        w["current"].format(**{**m, "source": opening.source_words(m["source"], lang)})
        + "".join(w["term"].format(**vars(glossary.term(name, lang))) for name in ("c", "verify_cost"))
        + theory_text.measured_where(session.current().trace, here, lang)
    )
    explained = theory.explain_measurement(m)
    if explained is None:
        return None
    cols = st.columns([1.3, 1.3, 1, 1.6])  # [1, 1, 1, 2] cut both predictions' labels at 1280 px
    cols[0].metric(w["m_paper"], f"{explained.paper:.2f}×")
    cols[1].metric(w["m_predicted"], f"{explained.predicted:.2f}×")
    cols[2].metric(
        w["m_measured"], f"{explained.measured:.2f}×",
        _timed(w, explained, "m_measured_delta"),
        delta_color="off", delta_arrow="off",
    )  # fmt: skip
    cols[3].markdown(theory_text.explanation_sentence(explained, lang))
    with st.expander(w["assumes"]):
        st.dataframe(
            [
                {"": what, "formula": round(f, 2), "this run": round(r, 2)}
                for what, f, r in theory_text.explanation_rows(explained, lang)
            ],
            hide_index=True,
            column_config={"formula": w["col_formula"], "this run": w["col_run"]},
        )
    return explained


def _charts(alpha: float, gamma: int, c: float, v: float, point: dict | None, lang: str, w: dict[str, str]) -> None:
    left, right = st.columns(2)
    left.plotly_chart(
        theory_charts.tokens_per_iteration_curve_figure(alpha, gamma, GAMMA_MAX, measured=point, lang=lang),
        key=keys.THEORY_TOKENS_CHART,
    )
    right.plotly_chart(
        theory_charts.walltime_curve_figure(alpha, c, gamma, GAMMA_MAX, measured=point, v=v, lang=lang),
        key=keys.THEORY_WALLTIME_CHART,
    )
    measured = (point["alpha"], point["c"]) if point else (None, None)
    st.plotly_chart(_plane(alpha, c, v, *measured, lang), key=keys.THEORY_PLANE_CHART)
    st.caption(w["plane_caption"].format(gamma_max=GAMMA_MAX))


TABLE4_COLUMNS = {  # table4_rows' keys -> the words of their headers
    "task": "col_task", "draft": "col_draft", "temperature": "col_temperature", "paper expected (×)": "col_expected",
    "paper measured (×)": "col_empirical", "our formula (×)": "col_ours", "formula − paper expected": "col_diff",
}  # fmt: skip


def _table4(w: dict[str, str]) -> None:
    st.subheader(w["table4_title"])
    st.caption(w["table4_caption"])
    rows = theory_charts.table4_rows()
    columns = {key: w[said] for key, said in TABLE4_COLUMNS.items()}
    st.dataframe(
        rows,
        hide_index=True,
        height=35 * (len(rows) + 1) + 3,
        column_config={**columns, "our formula (×)": st.column_config.NumberColumn(w["col_ours"], format="%.2f")},
    )
    worst = max(abs(r["formula − paper expected"]) for r in rows)
    if worst <= 0.1:
        st.success(w["table4_ok"].format(n=len(rows), worst=worst))
    else:
        st.error(w["table4_bad"].format(worst=worst))


def theory_page() -> None:
    lang, w = language.current(), language.words("theory")
    st.title(w["title"])
    st.caption(w["intro"])
    render.follow_timing(session.current())  # every measured figure below follows the pairs as they come in
    m = theory_controls.measured()
    alpha, gamma, c, v = theory_controls.sliders(m)
    if said := theory_text.sliders_against_run(m, alpha, gamma, c, v, lang):
        st.caption(":material/tune: " + said)
    theory_controls.drafting_note(session.current())
    _metrics(alpha, gamma, c, v, w)
    explained = _measured_section(m, lang, w)
    _verdict(alpha, c, v, explained if theory_controls.on_trace(m, alpha, gamma, c, v) else None, lang, w)
    _charts(alpha, gamma, c, v, m if theory_controls.usable(m) else None, lang, w)
    _table4(w)


theory_page()
