"""Sweep: speculative decoding over γ × temperature on the current pair and prompt, against the target
alone at each temperature; a speedup heatmap, tokens per iteration against the formula, the
measured c. Stoppable between runs; results export as CSV/JSON and load back (validated)."""

import contextlib

import streamlit as st

from specviz.config import slug
from specviz.engine import toy
from specviz.labs import sweep
from specviz.teaching import glossary
from specviz.teaching.charts import sweep as sweep_charts
from specviz_app import keys, loading, params, render, session

TEMPERATURE_CHOICES = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0]
MODELS = {
    "sidebar": "The sidebar's pair and prompt (real models; about a minute on a CPU)",
    "toy": "Toy pair: two tiny random models (seconds; token ids, timings mean nothing)",
}


@st.cache_resource(max_entries=1, show_spinner=False)
def _toy_pair():
    return toy.toy_pair()


def _start() -> None:
    st.session_state[keys.SWEEP_RUNNING] = True
    st.session_state[keys.SWEEP_STOP] = False
    st.session_state[keys.SWEEP_SOURCE] = "run here"


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
    settings = st.session_state[keys.SETTINGS]
    box = session.progress_box(keys.SWEEP_ERROR, _stop, keys.SWEEP_STOP_BUTTON, "Loading the models…")
    with box as (bar, guard):
        prompt, target, draft, _ = _models(choice, settings)
        total = len(temperatures) * (len(gammas) + 1)
        # A new sweep replaces the shown one at once: a Stop click interrupts this script, and what
        # on_progress stored by then is what the page shows afterwards ("stopped after n of total").
        st.session_state[keys.SWEEP_RESULT] = sweep.SweepResult(config={}, runs_total=total)
        bar.progress(0.0, text=f"Warming up, then {total} runs…")

        def progress(done: int, total: int, partial: sweep.SweepResult) -> None:
            st.session_state[keys.SWEEP_RESULT] = partial  # kept even if a click interrupts this script
            last = partial.cells[-1] if partial.cells and done > 1 else None
            where = f"γ {last['gamma']} at temperature {last['temperature']:g}" if last else "target alone"
            bar.progress(done / total, text=f"Run {done} of {total} done ({where})")

        with toy.one_thread() if choice == "toy" else contextlib.nullcontext():
            result = sweep.run_sweep(
                prompt, target=target, draft=draft, gammas=gammas, temperatures=temperatures,
                max_new_tokens=max_new, seed=settings.seed, **settings.filters(),
                on_progress=progress, should_stop=lambda: bool(st.session_state.get(keys.SWEEP_STOP)),
            )  # fmt: skip
    if not guard.failed:
        st.session_state[keys.SWEEP_RESULT] = result


def _show(result: sweep.SweepResult) -> None:
    if result.stopped or result.runs_done < result.runs_total:
        st.warning(
            f"Stopped after {result.runs_done} of {result.runs_total} runs: the charts show what was measured; "
            "the empty cells were not reached."
        )
    if not result.cells:
        st.info("No speculative run finished before the sweep stopped. Press **Run the sweep** again.")
        return
    best = result.best()
    c = result.measured_c()
    cols = st.columns(4)
    cols[0].metric(
        "Best measured speedup",
        f"{best['speedup']:.2f}×",
        help=f"at γ {best['gamma']}, temperature {best['temperature']:g}",
    )
    cols[1].metric("Best at", f"γ {best['gamma']}, T {best['temperature']:g}")
    cols[2].metric(
        glossary.C.label, "n/a" if c is None else f"{c:.3f}", help=f"median over the runs: {glossary.C.definition}"
    )
    base = ", ".join(
        f"T {float(t):g}: {v:.1f}" for t, v in sorted(result.baselines.items(), key=lambda kv: float(kv[0]))
    )
    n_base = len(result.baselines)
    # A short value: a metric cuts what does not fit its quarter of the page ("3 temperatu…").
    cols[3].metric("Target-alone runs", f"{n_base}", help=f"one per temperature; tokens/s: {base}")
    st.plotly_chart(sweep_charts.speedup_heatmap(result), key=keys.SWEEP_HEATMAP)
    left, right = st.columns(2)
    left.plotly_chart(sweep_charts.tokens_per_iteration_sweep_figure(result), key=keys.SWEEP_TOKENS_CHART)
    right.plotly_chart(sweep_charts.speedup_sweep_figure(result), key=keys.SWEEP_SPEEDUP_CHART)
    st.caption(
        "Markers are measured; dashed lines are the formulas from the measured α, c and v (v: a verify pass over "
        "γ + 1 tokens in target steps; the paper assumes 1, on a CPU it is more). Each cell is one timed pair, the "
        "run and its temperature's target alone, so short runs are noisy; the Playground times several pairs. "
        f"Baseline tokens/s per temperature: {base}."
    )
    table = sweep_charts.sweep_table(result)
    fraction, rate = st.column_config.NumberColumn(format="%.3f"), st.column_config.NumberColumn(format="%.1f")
    formats = {k: rate if "tokens/s" in k else fraction for k in table[0] if k not in ("γ", "temperature")}
    st.dataframe(table, hide_index=True, column_config=formats)


SAVED = render.SavedResults(
    "Sweep", sweep.read, keys.SWEEP_FILES, (keys.SWEEP_RESULT, keys.SWEEP_SOURCE),
    "JSON keeps the settings; CSV is one row per (γ, temperature).",
)  # fmt: skip


def sweep_page() -> None:
    st.title("Sweep")
    st.caption(
        "Run every γ at several temperatures on one prompt, each against the target alone at the same temperature. "
        "Where is speculative decoding fastest, and does the paper's formula follow the measurements?"
    )
    settings = st.session_state[keys.SETTINGS]
    choice = st.radio("Models", list(MODELS), format_func=MODELS.get, key=keys.SWEEP_MODELS, horizontal=True)
    cols = st.columns([1.3, 1.3, 1])
    lo, hi = cols[0].slider(
        "γ from … to …", 1, 8, (1, 8), key=keys.SWEEP_GAMMAS, help="each γ is one run per temperature"
    )
    temperatures = cols[1].multiselect(
        "Temperatures", TEMPERATURE_CHOICES, default=[0.0, 0.5, 1.0], key=keys.SWEEP_TEMPERATURES,
        format_func=lambda t: f"{t:g}", help="0 is greedy; p and q are both sharpened or flattened",
    )  # fmt: skip
    max_new = cols[2].number_input("Max new tokens per run", 4, 128, 24, key=keys.SWEEP_MAX_NEW)
    gammas = list(range(lo, hi + 1))
    runs = len(temperatures) * (len(gammas) + 1)
    if choice == "sidebar":
        st.caption(
            render.md_escape(
                f"Pair: {params.pairs()[settings.pair].label} · prompt: {settings.prompt[:80]} · seed {settings.seed} "
                f"(change them in the sidebar). {runs} runs of {max_new} tokens."
            )
        )
    else:
        st.caption(f"Prompt: token ids {toy.TOY_PROMPT} · seed {settings.seed}. {runs} runs of {max_new} tokens.")
    st.button(
        "Run the sweep", icon=":material/play_arrow:", type="primary", on_click=_start, disabled=not temperatures,
        key=keys.SWEEP_RUN,
    )  # fmt: skip
    if not temperatures:
        st.info("Pick at least one temperature.")
    if st.session_state.get(keys.SWEEP_RUNNING):
        st.session_state[keys.SWEEP_RUNNING] = False  # one sweep per click; a Stop click also clears it
        _run(choice, gammas, sorted(temperatures), int(max_new))
    if error := st.session_state.pop(keys.SWEEP_ERROR, None):
        st.error(f"{error}\n\nThe previous sweep, if any, is still shown.")

    result = st.session_state.get(keys.SWEEP_RESULT)
    if result is not None:
        st.caption(render.md_escape(f"Showing: {st.session_state.get(keys.SWEEP_SOURCE, 'run here')}"))
        _show(result)
    else:
        st.info("No sweep yet. Pick the grid and press **Run the sweep**, or load a saved one below.")
    stem = "specviz-sweep-" + (slug(str(result.config.get("target", "")), 30) or "x") if result is not None else ""
    render.save_or_load(SAVED, result if result is not None and result.cells else None, stem)


sweep_page()
