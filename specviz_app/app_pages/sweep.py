"""Sweep: speculative decoding over γ × temperature on the current pair and prompt, against the target
alone at each temperature; a speedup heatmap, tokens per iteration against the formula, the
measured c. Stoppable between runs; results export as CSV/JSON and load back (validated).
Its words: the catalogue's section "sweep", its charts' the section "charts" (keys "sweep_...")."""

import contextlib

import streamlit as st

from specviz.config import slug
from specviz.engine import toy
from specviz.errors import SpecvizError
from specviz.labs import sweep
from specviz.teaching import glossary
from specviz.teaching.charts import sweep as sweep_charts
from specviz_app import keys, language, params, render, session
from specviz_app.runs import loading, opening
from specviz_app.sidebar import pair_label

TEMPERATURE_CHOICES = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0]
MODELS = ("sidebar", "toy")  # the choices of models; their words: the catalogue's "models_<choice>"
RUN_HERE = "run here"  # where the result on show came from (keys.SWEEP_SOURCE), when not a file


@st.cache_resource(max_entries=1, show_spinner=False)
def _toy_pair():
    return toy.toy_pair()


def _start() -> None:
    st.session_state[keys.SWEEP_RUNNING] = True
    st.session_state[keys.SWEEP_STOP] = False
    st.session_state[keys.SWEEP_SOURCE] = RUN_HERE


def _stop() -> None:
    st.session_state[keys.SWEEP_STOP] = True
    st.session_state[keys.SWEEP_RUNNING] = False


def _models(choice: str, settings: params.Settings):
    """(prompt, target, draft, description) for the chosen pair."""
    if choice == "toy":
        target, draft = _toy_pair()
        return toy.TOY_PROMPT, target, draft, "toy pair"
    target, draft = loading.sidebar_pair(settings)
    return settings.prompt, target, draft, params.pairs()[settings.pair].label


def _run(choice: str, gammas: list[int], temperatures: list[float], max_new: int) -> None:
    settings, w = st.session_state[keys.SETTINGS], language.words("sweep")
    box = session.progress_box(keys.SWEEP_ERROR, _stop, keys.SWEEP_STOP_BUTTON, w["loading"])
    with box as (bar, guard):
        prompt, target, draft, _ = _models(choice, settings)
        total = len(temperatures) * (len(gammas) + 1)
        # A new sweep replaces the shown one at once: a Stop click interrupts this script, and what
        # on_progress stored by then is what the page shows afterwards ("stopped after n of total").
        st.session_state[keys.SWEEP_RESULT] = sweep.SweepResult(config={}, runs_total=total)
        bar.progress(0.0, text=w["warming"].format(total=total))

        def progress(done: int, total: int, partial: sweep.SweepResult) -> None:
            st.session_state[keys.SWEEP_RESULT] = partial  # kept even if a click interrupts this script
            last = partial.cells[-1] if partial.cells and done > 1 else None
            cell = last and w["where_cell"].format(gamma=last["gamma"], temperature=f"{last['temperature']:g}")
            bar.progress(
                done / total, text=w["progress"].format(done=done, total=total, where=cell or w["where_alone"])
            )

        with toy.one_thread() if choice == "toy" else contextlib.nullcontext():
            result = sweep.run_sweep(
                prompt, target=target, draft=draft, gammas=gammas, temperatures=temperatures,
                max_new_tokens=max_new, seed=settings.seed, **settings.filters(),
                on_progress=progress, should_stop=lambda: bool(st.session_state.get(keys.SWEEP_STOP)),
            )  # fmt: skip
    if not guard.failed:
        st.session_state[keys.SWEEP_RESULT] = result


def _show(result: sweep.SweepResult) -> None:
    w, lang = language.words("sweep"), language.current()
    if result.stopped or result.runs_done < result.runs_total:
        st.warning(w["stopped"].format(done=result.runs_done, total=result.runs_total))
    if not result.cells:
        st.info(w["none_finished"])
        return
    best = result.best()
    c, term = result.measured_c(), glossary.term("c", lang)
    cols = st.columns(4)
    cols[0].metric(
        w["best"],
        f"{best['speedup']:.2f}×",
        help=w["best_help"].format(gamma=best["gamma"], temperature=f"{best['temperature']:g}"),
    )
    cols[1].metric(w["best_at"], f"γ {best['gamma']}, T {best['temperature']:g}")
    cols[2].metric(
        term.label, w["na"] if c is None else f"{c:.3f}", help=w["c_help"].format(definition=term.definition)
    )
    base = ", ".join(
        f"T {float(t):g}: {v:.1f}" for t, v in sorted(result.baselines.items(), key=lambda kv: float(kv[0]))
    )
    n_base = len(result.baselines)
    # A short value: a metric cuts what does not fit its quarter of the page ("3 temperatu…").
    cols[3].metric(w["alone_runs"], f"{n_base}", help=w["alone_runs_help"].format(base=base))
    st.plotly_chart(sweep_charts.speedup_heatmap(result, lang), key=keys.SWEEP_HEATMAP)
    left, right = st.columns(2)
    left.plotly_chart(sweep_charts.tokens_per_iteration_sweep_figure(result, lang), key=keys.SWEEP_TOKENS_CHART)
    right.plotly_chart(sweep_charts.speedup_sweep_figure(result, lang), key=keys.SWEEP_SPEEDUP_CHART)
    st.caption(w["formula_caption"].format(playground=language.words("app")["page_playground"], base=base))
    formats = {k: st.column_config.NumberColumn(format=f) for k, f in sweep_charts.sweep_table_formats(lang).items()}
    st.dataframe(sweep_charts.sweep_table(result, lang), hide_index=True, column_config=formats)


def _read(name: str, data: bytes) -> sweep.SweepResult:
    """sweep.read, its refusal said in the language on show (the library's reason inside)."""
    try:
        return sweep.read(name, data)
    except SpecvizError as exc:
        raise sweep.SweepError(language.words("sweep")["bad_file"].format(error=exc)) from exc


def _saved() -> render.SavedResults:
    w = language.words("sweep")
    return render.SavedResults(
        w["saved_what"], _read, keys.SWEEP_FILES, (keys.SWEEP_RESULT, keys.SWEEP_SOURCE), w["saved_formats"]
    )


def sweep_page() -> None:
    w = language.words("sweep")
    st.title(language.words("app")["page_sweep"])
    st.caption(w["intro"])
    settings = st.session_state[keys.SETTINGS]
    language.keep(keys.SWEEP_MODELS)
    choice = st.radio(
        w["models"], MODELS, format_func=lambda m: w[f"models_{m}"], key=keys.SWEEP_MODELS, horizontal=True
    )
    cols = st.columns([1.3, 1.3, 1])
    lo, hi = cols[0].slider(w["gammas"], 1, 8, (1, 8), key=keys.SWEEP_GAMMAS, help=w["gammas_help"])
    temperatures = cols[1].multiselect(
        w["temperatures"], TEMPERATURE_CHOICES, default=[0.0, 0.5, 1.0], key=keys.SWEEP_TEMPERATURES,
        format_func=lambda t: f"{t:g}", help=w["temperatures_help"],
    )  # fmt: skip
    max_new = cols[2].number_input(w["max_new"], 4, 128, 24, key=keys.SWEEP_MAX_NEW)
    gammas = list(range(lo, hi + 1))
    said = {"seed": settings.seed, "runs": len(temperatures) * (len(gammas) + 1), "max_new": max_new}
    if choice == "sidebar":
        pair = pair_label(params.pairs()[settings.pair], language.words("sidebar"))
        st.caption(render.md_escape(w["pair_caption"].format(pair=pair, prompt=settings.prompt[:80], **said)))
    else:
        st.caption(w["toy_caption"].format(ids=toy.TOY_PROMPT, **said))
    st.button(
        w["run"], icon=":material/play_arrow:", type="primary", on_click=_start, disabled=not temperatures,
        key=keys.SWEEP_RUN,
    )  # fmt: skip
    if not temperatures:
        st.info(w["pick_temperature"])
    if st.session_state.get(keys.SWEEP_RUNNING):
        st.session_state[keys.SWEEP_RUNNING] = False  # one sweep per click; a Stop click also clears it
        _run(choice, gammas, sorted(temperatures), int(max_new))
    if error := st.session_state.pop(keys.SWEEP_ERROR, None):
        st.error(w["error"].format(error=error))

    result = st.session_state.get(keys.SWEEP_RESULT)
    if result is not None:
        source = opening.source_words(st.session_state.get(keys.SWEEP_SOURCE, RUN_HERE), language.current())
        st.caption(render.md_escape(w["showing"].format(source=source)))
        _show(result)
    else:
        st.info(w["no_sweep"])
    stem = "specviz-sweep-" + (slug(str(result.config.get("target", "")), 30) or "x") if result is not None else ""
    render.save_or_load(_saved(), result if result is not None and result.cells else None, stem)


sweep_page()
