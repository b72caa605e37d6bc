"""Workloads ("Where it pays"): speculative decoding measured per kind of task and drafter, α,
tokens per target pass, acceptance by position and the measured speedup beside the paper's
prediction. Opens on the shipped recording; a live run re-measures on this machine (stoppable);
results export as JSON/CSV and load back (validated). The measuring is specviz.labs.workloads; the
words are the catalogue's section "workloads" in the language on show."""

import streamlit as st

from specviz.labs import workloads
from specviz.teaching.charts import workloads as workload_charts
from specviz_app import keys, language, params, render, session
from specviz_app.runs import loading

# Where the result on show came from (keys.WORKLOADS_SOURCE): the recording, a run here, or render's "file: <name>".
RECORDED, HERE = "recorded", "here"  # the result on show: the shipped recording, or measured here
# The table's columns (workloads_table's keys) -> their headers' words; α, c and v are their own.
COLUMNS = {"kind": "col_kind", "drafter": "col_drafter", "tokens/pass": "col_tokens", "predicted": "col_predicted",
           "speedup ×": "col_speedup", "predicted ×": "col_predicted_x"}  # fmt: skip


@st.cache_resource(max_entries=1, show_spinner=False)
def _recording() -> workloads.WorkloadsResult | None:
    return workloads.shipped()


def _start() -> None:
    st.session_state[keys.WORKLOADS_RUNNING] = True
    st.session_state[keys.WORKLOADS_STOP] = False


def _stop() -> None:
    st.session_state[keys.WORKLOADS_STOP] = True


def _run(drafts: list[str], prompts: int, max_new: int, w: dict[str, str]) -> None:
    settings, lang = st.session_state[keys.SETTINGS], language.current()
    with session.progress_box(keys.WORKLOADS_ERROR, _stop, keys.WORKLOADS_STOP_BUTTON, w["loading"]) as (bar, guard):
        target = loading.get_model(params.DEFAULTS.model_names()[0], settings.dtype, settings.weights)

        def progress(done: int, total: int, partial: workloads.WorkloadsResult) -> None:
            # Kept even when a Stop click interrupts this script: the page then shows what was measured.
            st.session_state[keys.WORKLOADS_RESULT], st.session_state[keys.WORKLOADS_SOURCE] = partial, HERE
            last = partial.cells[-1]
            kind = workload_charts.kind_name(last["kind"], lang)
            drafter = workload_charts.drafter_label(last["draft"], lang, last["label"])
            bar.progress(done / total, text=w["progress"].format(done=done, total=total, kind=kind, drafter=drafter))

        result = workloads.run_workloads(
            target=target, drafts=drafts, prompts_per_kind=prompts, gamma=settings.gamma,
            temperature=float(settings.temperature), seed=settings.seed, max_new_tokens=max_new,
            on_progress=progress, should_stop=lambda: bool(st.session_state.get(keys.WORKLOADS_STOP)),
        )  # fmt: skip
    if not guard.failed:
        st.session_state[keys.WORKLOADS_RESULT], st.session_state[keys.WORKLOADS_SOURCE] = result, HERE


def _live(w: dict[str, str]) -> None:
    lang = language.current()
    with st.expander(w["run_here"], icon=":material/play_arrow:"):
        cols = st.columns([2, 1, 1])
        st.session_state.setdefault(keys.WORKLOADS_DRAFTS, list(workloads.OFFLINE_DRAFTS))  # all, at first
        language.keep(keys.WORKLOADS_DRAFTS)
        drafts = cols[0].multiselect(
            w["drafters"], workloads.OFFLINE_DRAFTS,
            format_func=lambda d: workload_charts.drafter_label(d, lang), key=keys.WORKLOADS_DRAFTS,
        )  # fmt: skip
        prompts = cols[1].slider(w["prompts_per_kind"], 1, 3, 1, key=keys.WORKLOADS_PROMPTS)
        max_new = cols[2].number_input(w["new_tokens"], 4, 64, 24, key=keys.WORKLOADS_MAX_NEW)
        pairs = len(workloads.KINDS) * prompts * len(drafts)
        st.caption(w["live_caption"].format(pairs=pairs, max_new=max_new))
        st.button(w["measure"], icon=":material/play_arrow:", type="primary", on_click=_start, disabled=not drafts,
                  key=keys.WORKLOADS_RUN)  # fmt: skip
    if st.session_state.pop(keys.WORKLOADS_RUNNING, False):
        _run(list(drafts), prompts, int(max_new), w)
    if error := st.session_state.pop(keys.WORKLOADS_ERROR, None):
        st.error(w["run_failed"].format(error=error))


def _table(result: workloads.WorkloadsResult, w: dict[str, str], lang: str) -> None:
    """The table, each column under its header in the language on show (numbers to two places)."""
    table = workload_charts.workloads_table(result, lang)
    config = {}
    for k in table[0] if table else ():
        header = w[COLUMNS[k]] if k in COLUMNS else k
        text = k in ("kind", "drafter")
        config[k] = (
            st.column_config.Column(header)
            if text
            else st.column_config.NumberColumn(header, format="%.2f", width="small")
        )
    st.dataframe(table, hide_index=True, column_config=config)
    st.caption(w["table_caption"])


def _show(result: workloads.WorkloadsResult, source: str, w: dict[str, str]) -> None:
    lang = language.current()
    provenance = workload_charts.provenance(result, lang)
    st.caption(w["showing"].format(source=render.saved_result_source(source, w), provenance=provenance))
    if result.stopped or result.pairs_done < result.pairs_total:
        st.warning(w["stopped"].format(done=result.pairs_done, total=result.pairs_total))
    speed = workload_charts.measure_figure(result, "speedup", lang)
    st.plotly_chart(speed, key=keys.WORKLOADS_CHART_PREFIX + "speedup")
    st.caption(w["speed_caption"])
    left, right = st.columns(2)
    for column, measure in ((left, "alpha"), (right, "tokens_per_iteration")):
        figure = workload_charts.measure_figure(result, measure, lang)
        column.plotly_chart(figure, key=keys.WORKLOADS_CHART_PREFIX + measure)
    language.keep(keys.WORKLOADS_POSITION_DRAFT)
    draft = st.selectbox(
        w["position_for"], result.drafts(), format_func=lambda d: workload_charts.drafter_label(d, lang),
        key=keys.WORKLOADS_POSITION_DRAFT,
    )  # fmt: skip
    if draft is not None:
        figure = workload_charts.position_figure(result, draft, lang)
        st.plotly_chart(figure, key=keys.WORKLOADS_POSITIONS_CHART)
    _table(result, w, lang)


def _saved(w: dict[str, str]) -> render.SavedResults:
    return render.SavedResults(
        w["saved_what"], workloads.read, keys.WORKLOADS_FILES, (keys.WORKLOADS_RESULT, keys.WORKLOADS_SOURCE),
        w["saved_formats"],
    )  # fmt: skip


def workloads_page() -> None:
    w = language.words("workloads")
    title, caption = render.page_intro("workloads")
    st.title(title)
    st.caption(caption)
    st.markdown(w["idea"])
    _live(w)
    result = st.session_state.get(keys.WORKLOADS_RESULT)
    source = st.session_state.get(keys.WORKLOADS_SOURCE, RECORDED)
    if result is None:
        result, source = _recording(), RECORDED
    if result is None or not result.cells:
        st.info(w["nothing_yet"])
    else:
        _show(result, source, w)
    render.save_or_load(_saved(w), result if result is not None and result.cells else None, "specviz-workloads")


workloads_page()
