"""Serving ("Batch size"): B requests decoding at once, with and without speculation, through the
batched verification the classroom's sessions share: total tokens/s, per-request latency and a
pass's cost per row, where speculation's gain shrinks, and what a GPU changes. Opens on the shipped
recording; a live run re-measures on this machine (stoppable); JSON/CSV out and back in. The
measuring is specviz.labs.serving, the figures and sentences specviz.teaching.charts.serving; the
words are the catalogue's section "serving" in the language on show."""

import streamlit as st

from specviz.labs import regime, serving
from specviz.teaching.charts import regime as regime_charts
from specviz.teaching.charts import serving as serving_charts
from specviz_app import keys, language, params, render, session
from specviz_app.runs import loading

# Where the result on show came from (keys.SERVING_SOURCE): the recording, a run here, or render's "file: <name>".
RECORDED, HERE = "recorded", "here"  # the result on show: the shipped recording, or measured here
# The table's columns (serving_table's keys, B's own header aside) -> their words: "<word>" a short
# header, "<word>_help" its help.
COLUMNS = {
    "alone tok/s": "col_alone_tps", "spec tok/s": "col_spec_tps", "gain ×": "col_gain",
    "alone latency s": "col_alone_latency", "spec latency s": "col_spec_latency", "alone ms/row": "col_alone_ms",
    "spec ms/row": "col_spec_ms", "alone rows/pass": "col_alone_rows", "spec rows/pass": "col_spec_rows",
}  # fmt: skip


def _saved(w: dict[str, str]) -> render.SavedResults:
    return render.SavedResults(
        w["saved_what"], serving.read, keys.SERVING_FILES, (keys.SERVING_RESULT, keys.SERVING_SOURCE),
        w["saved_formats"],
    )  # fmt: skip


def table_columns(w: dict[str, str]) -> dict:
    """The table's columns under short headers (explained in the caption under it, in full on hover):
    eleven columns fit the main area at 1280 × 720 with the sidebar open only at about 75 px each."""
    number = st.column_config.NumberColumn
    columns = {
        key: number(w[word], help=w[f"{word}_help"], format="%.2f", width="small") for key, word in COLUMNS.items()
    }
    columns["B"] = number("B", help=w["col_b_help"], width=40)
    columns["identical"] = st.column_config.TextColumn(w["col_identical"], help=w["col_identical_help"], width=80)
    return columns


@st.cache_resource(max_entries=1, show_spinner=False)
def _recording() -> serving.ServingResult | None:
    return serving.shipped()


def _press(measure: bool) -> None:
    """Measure (True: a run starts on this rerun) or Stop (False: the run stops before its next measurement)."""
    st.session_state[keys.SERVING_RUNNING], st.session_state[keys.SERVING_STOP] = measure, not measure


def _run(batches: list[int], max_new: int, w: dict[str, str]) -> None:
    settings, lang = st.session_state[keys.SETTINGS], language.current()
    with session.progress_box(keys.SERVING_ERROR, lambda: _press(False), keys.SERVING_STOP_BUTTON, w["loading"]) as (
        bar,
        guard,
    ):
        target_name, draft = params.DEFAULTS.model_names()
        target = loading.get_model(target_name, settings.dtype, settings.weights)

        def progress(done: int, total: int, partial: serving.ServingResult) -> None:
            # Kept even when a Stop click interrupts this script: the page then shows what was measured.
            st.session_state[keys.SERVING_RESULT], st.session_state[keys.SERVING_SOURCE] = partial, HERE
            cell = partial.cells[-1]
            last = w["last"].format(b=cell["batch"], mode=serving_charts.mode_label(cell["mode"], lang))
            bar.progress(done / total, text=w["progress"].format(done=done, total=total, last=last))

        sidebar = {"gamma": settings.gamma, "temperature": float(settings.temperature), "seed": settings.seed}
        stop = lambda: bool(st.session_state.get(keys.SERVING_STOP))  # noqa: E731 (read at each measurement)
        result = serving.run_serving(target=target, draft=draft, batch_sizes=batches, max_new_tokens=max_new,
                                     on_progress=progress, should_stop=stop, **sidebar)  # fmt: skip
    if not guard.failed:
        st.session_state[keys.SERVING_RESULT], st.session_state[keys.SERVING_SOURCE] = result, HERE


def _live(w: dict[str, str]) -> None:
    with st.expander(w["run_here"], icon=":material/play_arrow:"):
        cols = st.columns([2, 1])
        batches = cols[0].multiselect(
            w["batch_sizes"], serving.BATCH_SIZES, default=list(serving.BATCH_SIZES), key=keys.SERVING_BATCHES
        )
        max_new = cols[1].number_input(w["new_tokens"], 4, 64, 16, key=keys.SERVING_MAX_NEW)
        st.caption(w["live_caption"].format(n=2 * len(batches), max_new=max_new))
        measure = {"on_click": _press, "args": (True,), "disabled": not batches, "key": keys.SERVING_RUN}
        st.button(w["measure"], icon=":material/play_arrow:", type="primary", **measure)
    if st.session_state.pop(keys.SERVING_RUNNING, False):
        _run(sorted(batches), int(max_new), w)
    if error := st.session_state.pop(keys.SERVING_ERROR, None):
        st.error(w["run_failed"].format(error=error))


def _show(result: serving.ServingResult, source: str, w: dict[str, str]) -> None:
    lang = language.current()
    provenance = serving_charts.provenance(result, lang)
    st.caption(w["showing"].format(source=render.saved_result_source(source, w), provenance=provenance))
    if result.stopped or len(result.cells) < result.cells_total:
        st.warning(w["stopped"].format(done=len(result.cells), total=result.cells_total))
    st.info(serving_charts.crossover_sentence(result, lang), icon=":material/insights:")
    throughput = serving_charts.throughput_figure(result, lang)
    st.plotly_chart(throughput, key=keys.SERVING_CHART_PREFIX + "throughput")
    left, right = st.columns(2)
    left.plotly_chart(serving_charts.pass_cost_figure(result, lang), key=keys.SERVING_CHART_PREFIX + "pass")
    right.plotly_chart(serving_charts.latency_figure(result, lang), key=keys.SERVING_CHART_PREFIX + "latency")
    st.markdown(serving_charts.memory_bound_sentence(result, lang))
    st.caption(w["pass_caption"])
    st.dataframe(serving_charts.serving_table(result, lang), hide_index=True, column_config=table_columns(w))
    st.caption(w["table_caption"])
    st.markdown(serving_charts.gpu_note(lang))
    st.caption(w["shared_caption"])


def _regime(w: dict[str, str]) -> None:
    """The regime section: v(rows) of both weight formats, the recording or measured here."""
    lang = language.current()
    st.subheader(w["regime_header"])
    st.caption(w["regime_intro"])
    if st.button(w["regime_measure"], icon=":material/play_arrow:", key=keys.REGIME_RUN):
        st.session_state[keys.REGIME_STOP] = False
        stop = lambda: st.session_state.update({keys.REGIME_STOP: True})  # noqa: E731 (the Stop button's)
        with session.progress_box(keys.REGIME_ERROR, stop, keys.REGIME_STOP_BUTTON, w["loading"]) as (_bar, guard):
            name, dtype = params.DEFAULTS.model_names()[0], st.session_state[keys.SETTINGS].dtype
            targets = {f: loading.get_model(name, dtype, f) for f in params.WEIGHTS_CHOICES}
            record = regime.measure(targets, should_stop=lambda: bool(st.session_state.get(keys.REGIME_STOP)))
        if not guard.failed and record["formats"]:
            st.session_state[keys.REGIME_RESULT] = record
    st.caption(w["regime_caption"])
    if error := st.session_state.pop(keys.REGIME_ERROR, None):
        st.error(w["regime_failed"].format(error=error))
    record = st.session_state.get(keys.REGIME_RESULT)
    source = w["regime_here"] if record is not None else w["regime_recorded"]
    record = record if record is not None else regime.recording()
    if not record or not record.get("formats"):
        st.info(w["regime_nothing"])
        return
    st.caption(w["regime_showing"].format(source=source, machine=record["machine"], threads=record["threads"],
                                          prompt=record["prompt"]))  # fmt: skip
    st.plotly_chart(regime_charts.v_figure(record, lang), key=keys.SERVING_CHART_PREFIX + "regime")
    st.dataframe(regime_charts.regime_table(record, lang), hide_index=True)
    for sentence in regime_charts.regime_sentences(record, lang):
        st.markdown(sentence)


def _on_show() -> tuple[serving.ServingResult | None, str]:
    """The result on show and where it came from: measured here or opened from a file, else the recording."""
    if (result := st.session_state.get(keys.SERVING_RESULT)) is not None:
        return result, st.session_state.get(keys.SERVING_SOURCE, HERE)
    return _recording(), RECORDED


def serving_page() -> None:
    w = language.words("serving")
    st.title(w["title"])
    st.caption(w["intro"])
    st.markdown(w["idea"])
    _live(w)
    result, source = _on_show()
    if result is not None and result.cells:
        _show(result, source, w)
    else:  # a copy without its recording, before anything was measured or opened
        st.info(w["nothing_yet"])
        result = None
    render.save_or_load(_saved(w), result, "specviz-serving")
    _regime(w)


serving_page()
