"""Serving ("Batch size"): B requests decoding at once, with and without speculation, through the
batched verification the classroom's sessions share: total tokens/s, per-request latency and a
pass's cost per row, where speculation's gain shrinks, and what a GPU changes. Opens on the shipped
recording; a live run re-measures on this machine (stoppable); JSON/CSV out and back in. The
measuring is specviz.labs.serving, the figures and sentences specviz.teaching.charts.serving."""

import streamlit as st

from specviz.labs import serving
from specviz.teaching.charts import serving as serving_charts
from specviz_app import keys, loading, params, render, session

RECORDED = "the recording shipped with specviz"
HERE = "measured here, on this machine"
SAVED = render.SavedResults(
    "Serving", serving.read, keys.SERVING_FILES, (keys.SERVING_RESULT, keys.SERVING_SOURCE),
    "JSON keeps the settings and the machine; CSV is one row per batch size and mode.",
)  # fmt: skip


def _number(label: str, help: str) -> st.column_config.NumberColumn:
    return st.column_config.NumberColumn(label, help=help, format="%.2f", width="small")


# The table's columns under short headers (explained in the caption under it, in full on hover): eleven
# columns fit the main area at 1280 × 720 with the sidebar open only at about 75 px each.
TABLE_COLUMNS = {
    "B": st.column_config.NumberColumn("B", help="requests decoding at once", width=40),
    "alone tok/s": _number("tok/s T", "tokens per second of all B requests, the target alone"),
    "spec tok/s": _number("tok/s S", "tokens per second of all B requests, speculative decoding"),
    "gain ×": _number("gain ×", "speculative tokens/s over the target alone's"),
    "alone latency s": _number("s/req T", "the median request's seconds to its last token, the target alone"),
    "spec latency s": _number("s/req S", "the median request's seconds to its last token, speculative decoding"),
    "alone ms/row": _number("ms/row T", "a target pass's milliseconds per token row, the target alone"),
    "spec ms/row": _number("ms/row S", "a target pass's milliseconds per token row, speculative decoding"),
    "alone rows/pass": _number("rows T", "token rows per target pass (mean), the target alone"),
    "spec rows/pass": _number("rows S", "token rows per target pass (mean), speculative decoding"),
    "identical": st.column_config.TextColumn(
        "identical", help="greedy requests whose speculative output equals the target alone's", width=80
    ),
}


@st.cache_resource(max_entries=1, show_spinner=False)
def _recording() -> serving.ServingResult | None:
    return serving.shipped()


def _press(measure: bool) -> None:
    """Measure (True: a run starts on this rerun) or Stop (False: the run stops before its next measurement)."""
    st.session_state[keys.SERVING_RUNNING], st.session_state[keys.SERVING_STOP] = measure, not measure


def _run(batches: list[int], max_new: int) -> None:
    settings = st.session_state[keys.SETTINGS]
    first = "Loading the offline target and warming up…"
    with session.progress_box(keys.SERVING_ERROR, lambda: _press(False), keys.SERVING_STOP_BUTTON, first) as (
        bar,
        guard,
    ):
        target_name, draft = params.DEFAULTS.model_names()
        target = loading.get_model(target_name, settings.dtype)

        def progress(done: int, total: int, partial: serving.ServingResult) -> None:
            # Kept even when a Stop click interrupts this script: the page then shows what was measured.
            st.session_state[keys.SERVING_RESULT], st.session_state[keys.SERVING_SOURCE] = partial, HERE
            last = f"B {partial.cells[-1]['batch']}, {serving.MODE_LABELS[partial.cells[-1]['mode']]}"
            bar.progress(done / total, text=f"{done} of {total} measured (last: {last})")

        sidebar = {"gamma": settings.gamma, "temperature": float(settings.temperature), "seed": settings.seed}
        stop = lambda: bool(st.session_state.get(keys.SERVING_STOP))  # noqa: E731 (read at each measurement)
        result = serving.run_serving(target=target, draft=draft, batch_sizes=batches, max_new_tokens=max_new,
                                     on_progress=progress, should_stop=stop, **sidebar)  # fmt: skip
    if not guard.failed:
        st.session_state[keys.SERVING_RESULT], st.session_state[keys.SERVING_SOURCE] = result, HERE


def _live() -> None:
    with st.expander("Run on this machine", icon=":material/play_arrow:"):
        cols = st.columns([2, 1])
        batches = cols[0].multiselect(
            "Batch sizes B", serving.BATCH_SIZES, default=list(serving.BATCH_SIZES), key=keys.SERVING_BATCHES
        )
        max_new = cols[1].number_input("New tokens per request", 4, 64, 16, key=keys.SERVING_MAX_NEW)
        st.caption(
            f"{2 * len(batches)} measurements: at each B, B requests (the Workloads page's prompts, mixed) "
            f"decode {max_new} tokens at once with the offline target alone, then with its default draft "
            "(or the other way round), using the sidebar's γ, temperature and seed. About a minute on a CPU."
        )
        measure = {"on_click": _press, "args": (True,), "disabled": not batches, "key": keys.SERVING_RUN}
        st.button("Measure", icon=":material/play_arrow:", type="primary", **measure)
    if st.session_state.pop(keys.SERVING_RUNNING, False):
        _run(sorted(batches), int(max_new))
    if error := st.session_state.pop(keys.SERVING_ERROR, None):
        st.error(f"{error}\n\nThe results shown before are still shown.")


def _show(result: serving.ServingResult, source: str) -> None:
    st.caption(render.md_escape(f"Showing {source}: {serving_charts.provenance(result)}"))
    if result.stopped or len(result.cells) < result.cells_total:
        st.warning(f"Stopped after {len(result.cells)} of {result.cells_total} measurements: the charts show those.")
    st.info(serving_charts.crossover_sentence(result), icon=":material/insights:")
    st.plotly_chart(serving_charts.throughput_figure(result), key=keys.SERVING_CHART_PREFIX + "throughput")
    left, right = st.columns(2)
    left.plotly_chart(serving_charts.pass_cost_figure(result), key=keys.SERVING_CHART_PREFIX + "pass")
    right.plotly_chart(serving_charts.latency_figure(result), key=keys.SERVING_CHART_PREFIX + "latency")
    st.markdown(serving_charts.memory_bound_sentence(result))
    st.caption(
        "Pass cost: the batcher's own timing of each target pass (forward_many over every waiting request's "
        "rows), prompts' first passes left out. A speculative request brings up to 1 + 2γ rows to each pass "
        "(the default draft's two-branch tree; a chain γ + 1), the target alone one; the dotted line is what a "
        "pass costing the same for any number of rows would give. "
        "Drafting and sampling run one request at a time (one compute lock), so they grow with B too. A pass "
        "waits until every request has drafted, so it carries up to B × (1 + 2γ) rows; fewer where the draft "
        "stopped early or requests had finished (the table's rows S)."
    )
    st.dataframe(serving_charts.serving_table(result), hide_index=True, column_config=TABLE_COLUMNS)
    st.caption(
        "T: the target alone; S: speculative decoding. tok/s: all B requests' tokens per second; s/req: the "
        "median request's seconds; ms/row: a pass's cost per token row; rows: token rows per pass (mean). "
        "identical: greedy requests whose speculative output equals the target alone's token for token "
        "(speculation never changes the text; it only changes how fast it comes)."
    )
    st.markdown(serving_charts.GPU_NOTE)
    st.caption(
        "A live run seats its requests at the same batcher as everyone using this server: run it when no one "
        "else is decoding, or their rows and their turns at the lock are counted in its figures."
    )


def _on_show() -> tuple[serving.ServingResult | None, str]:
    """The result on show and where it came from: measured here or opened from a file, else the recording."""
    if (result := st.session_state.get(keys.SERVING_RESULT)) is not None:
        return result, st.session_state.get(keys.SERVING_SOURCE, HERE)
    return _recording(), RECORDED


def serving_page() -> None:
    st.title("Serving: batch size")
    st.caption(
        "A server decodes many requests at once. Does speculative decoding still pay when the target's passes "
        "are already shared by B requests?"
    )
    st.markdown(
        "Speculative decoding fills a **memory-bound** target pass with a request's drafted rows, nearly for free. "
        "A server fills the same pass with **other requests'** rows. Below, B requests decode together through "
        "the batched verification this app's sessions share, with and without speculation."
    )
    _live()
    result, source = _on_show()
    if result is not None and result.cells:
        _show(result, source)
    else:  # a copy without its recording, before anything was measured or opened
        st.info("No measurements yet: open **Run on this machine** above, or load a saved file below.")
        result = None
    render.save_or_load(SAVED, result, "specviz-serving")


serving_page()
