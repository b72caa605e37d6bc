"""Workloads ("Where it pays"): speculative decoding measured per kind of task and drafter, α,
tokens per target pass, acceptance by position and the measured speedup beside the paper's
prediction. Opens on the shipped recording; a live run re-measures on this machine (stoppable);
results export as JSON/CSV and load back (validated). The measuring is specviz.labs.workloads."""

import streamlit as st

from specviz.labs import workloads
from specviz.teaching.charts import workloads as workload_charts
from specviz_app import keys, loading, params, render, session

RECORDED = "the recording shipped with specviz"


@st.cache_resource(max_entries=1, show_spinner=False)
def _recording() -> workloads.WorkloadsResult | None:
    return workloads.shipped()


def _start() -> None:
    st.session_state[keys.WORKLOADS_RUNNING] = True
    st.session_state[keys.WORKLOADS_STOP] = False


def _stop() -> None:
    st.session_state[keys.WORKLOADS_STOP] = True


def _run(drafts: list[str], prompts: int, max_new: int) -> None:
    settings = st.session_state[keys.SETTINGS]
    first = "Loading the target and warming up every drafter…"
    with session.progress_box(keys.WORKLOADS_ERROR, _stop, keys.WORKLOADS_STOP_BUTTON, first) as (bar, guard):
        target = loading.get_model(params.DEFAULTS.model_names()[0], settings.dtype)

        def progress(done: int, total: int, partial: workloads.WorkloadsResult) -> None:
            # Kept even when a Stop click interrupts this script: the page then shows what was measured.
            st.session_state[keys.WORKLOADS_RESULT] = partial
            st.session_state[keys.WORKLOADS_SOURCE] = "measured here, on this machine"
            last = partial.cells[-1]
            where = f"{workloads.kind_label(last['kind'])}, {last['label']}"
            bar.progress(done / total, text=f"Pair {done} of {total} timed ({where})")

        result = workloads.run_workloads(
            target=target, drafts=drafts, prompts_per_kind=prompts, gamma=settings.gamma,
            temperature=float(settings.temperature), seed=settings.seed, max_new_tokens=max_new,
            on_progress=progress, should_stop=lambda: bool(st.session_state.get(keys.WORKLOADS_STOP)),
        )  # fmt: skip
    if not guard.failed:
        st.session_state[keys.WORKLOADS_RESULT] = result
        st.session_state[keys.WORKLOADS_SOURCE] = "measured here, on this machine"


def _live() -> None:
    with st.expander("Run on this machine", icon=":material/play_arrow:"):
        cols = st.columns([2, 1, 1])
        drafts = cols[0].multiselect(
            "Drafters", workloads.OFFLINE_DRAFTS, default=list(workloads.OFFLINE_DRAFTS),
            format_func=workloads.draft_label, key=keys.WORKLOADS_DRAFTS,
        )  # fmt: skip
        prompts = cols[1].slider("Prompts per kind", 1, 3, 1, key=keys.WORKLOADS_PROMPTS)
        max_new = cols[2].number_input("New tokens per run", 4, 64, 24, key=keys.WORKLOADS_MAX_NEW)
        pairs = len(workloads.KINDS) * prompts * len(drafts)
        st.caption(
            f"{pairs} timed pairs (each a speculative run and the target alone, back to back) of {max_new} tokens, "
            "with the offline target and the sidebar's γ, temperature and seed: a few seconds a pair on a CPU."
        )
        st.button("Measure", icon=":material/play_arrow:", type="primary", on_click=_start, disabled=not drafts,
                  key=keys.WORKLOADS_RUN)  # fmt: skip
    if st.session_state.pop(keys.WORKLOADS_RUNNING, False):
        _run(list(drafts), prompts, int(max_new))
    if error := st.session_state.pop(keys.WORKLOADS_ERROR, None):
        st.error(f"{error}\n\nThe results shown before are still shown.")


def _show(result: workloads.WorkloadsResult, source: str) -> None:
    st.caption(render.md_escape(f"Showing {source}: {workloads.provenance(result)}"))
    if result.stopped or result.pairs_done < result.pairs_total:
        st.warning(f"Stopped after {result.pairs_done} of {result.pairs_total} pairs: the charts show what was timed.")
    speed = workload_charts.measure_figure(result, "speedup")
    st.plotly_chart(speed, key=keys.WORKLOADS_CHART_PREFIX + "speedup")
    st.caption(
        "Bars are measured here: tokens/s over the target alone's, the median of one timed pair per prompt. "
        "Diamonds are the paper's τ / (γc + v) from the same runs' α, c and v; it assumes γ drafts every "
        "iteration, so it runs ahead of a drafter that often drafts fewer (the n-gram without a match, the head's "
        "early stop). Speed numbers belong to the machine named above; α and tokens per pass are the models' own."
    )
    left, right = st.columns(2)
    for column, measure in ((left, "alpha"), (right, "tokens_per_iteration")):
        figure = workload_charts.measure_figure(result, measure)
        column.plotly_chart(figure, key=keys.WORKLOADS_CHART_PREFIX + measure)
    draft = st.selectbox(
        "Acceptance by position for", result.drafts(), format_func=workloads.draft_label,
        key=keys.WORKLOADS_POSITION_DRAFT,
    )  # fmt: skip
    if draft is not None:
        st.plotly_chart(workload_charts.position_figure(result, draft), key=keys.WORKLOADS_POSITIONS_CHART)
    number = st.column_config.NumberColumn(format="%.2f", width="small")
    table = workload_charts.workloads_table(result)
    st.dataframe(table, hide_index=True, column_config={k: number for k in table[0] if k not in ("kind", "drafter")})
    st.caption(
        "tokens/pass: tokens per iteration (one target pass), its prediction from α beside it; c: the draft's "
        "time per drafted token and v: a verify pass, both in target-alone steps; speedup × beside the predicted "
        "τ / (γc + v)."
    )


SAVED = render.SavedResults(
    "Workloads", workloads.read, keys.WORKLOADS_FILES, (keys.WORKLOADS_RESULT, keys.WORKLOADS_SOURCE),
    "JSON keeps the settings and the machine; CSV is one row per kind and drafter.",
)  # fmt: skip


def workloads_page() -> None:
    title, caption = render.PAGE_INTROS["workloads"]
    st.title(title)
    st.caption(caption)
    st.markdown(
        "Each kind of task below has its own prompts, decoded by the same target with every offline drafter. "
        "**Predictable** output (code, text the prompt already holds: rewriting, extracting) lets drafts pass "
        "several tokens at a time; **open-ended** output (a story) leaves more ways to go on, so fewer drafts pass "
        "and the gain shrinks or turns into a loss."
    )
    _live()
    result = st.session_state.get(keys.WORKLOADS_RESULT)
    source = st.session_state.get(keys.WORKLOADS_SOURCE, RECORDED)
    if result is None:
        result, source = _recording(), RECORDED
    if result is None or not result.cells:
        st.info("No measurements yet: open **Run on this machine** above, or load a saved file below.")
    else:
        _show(result, source)
    render.save_or_load(SAVED, result if result is not None and result.cells else None, "specviz-workloads")


workloads_page()
