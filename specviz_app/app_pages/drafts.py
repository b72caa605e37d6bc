"""Drafters: what makes a draft good. The race of every offline drafter on one prompt, and the
learned drafts' acceptance along their training."""

import json

import streamlit as st

from specviz.errors import SpecvizError
from specviz.labs import race, theory
from specviz.teaching import glossary
from specviz.teaching.charts import race as race_charts
from specviz.teaching.charts import theory as theory_charts
from specviz.training.training_record import read_training_record
from specviz_app import gallery, keys, loading, params, render, session


def _number(short: str, help: str, width: int = 96) -> st.column_config.NumberColumn:
    return st.column_config.NumberColumn(short, help=help, format="%.2f", width=width)


# The race table's columns: short headers, each with its full name and definition on hover, so all of
# them fit the page at 1400 px (the long headers pushed c, verify cost and both speedups off the right).
RACE_COLUMNS = {
    "drafter": st.column_config.TextColumn("drafter", width=150),
    glossary.MEAN_ACCEPTED_LENGTH.label: _number(
        glossary.MEAN_ACCEPTED_LENGTH.label, glossary.MEAN_ACCEPTED_LENGTH.definition, 150
    ),
    glossary.ALPHA.label: _number("α", f"{glossary.ALPHA.label}: {glossary.ALPHA.definition}", 72),
    glossary.C.label: _number("c", f"{glossary.C.label}: {glossary.C.definition}", 72),
    glossary.VERIFY_COST.label: _number(
        "verify cost", f"{glossary.VERIFY_COST.label}: {glossary.VERIFY_COST.definition}"
    ),
    "measured speedup": _number("speedup", "measured speedup: tokens/s over the target alone's, on the same prompt"),
    "predicted speedup": _number("predicted", "predicted speedup: τ / (γc + v) from the row's α, c and v"),
}


def _start_race() -> None:
    st.session_state[keys.RACE_REQUEST] = True


def _run_race() -> None:
    settings = st.session_state[keys.SETTINGS]
    area = st.empty()
    box = area.container(border=True)
    bar = box.progress(0.0, text="Loading the target…")
    with session.ErrorGuard(keys.RACE_ERROR, area) as guard:
        target = loading.get_model(params.DEFAULTS.model_names()[0], settings.dtype)

        def progress(done: int, total: int, name: str) -> None:
            bar.progress(done / total, text=f"Drafter {done + 1} of {total}: {race.LABELS.get(name, name)}")

        result = race.run_race(
            settings.prompt, target=target, gamma=settings.gamma, temperature=float(settings.temperature),
            seed=settings.seed, max_new_tokens=settings.max_new, on_progress=progress,
        )  # fmt: skip
    if guard.failed:
        return
    area.empty()
    st.session_state[keys.RACE_RESULT] = result


def _show_race(result: dict, source: str) -> None:
    cfg = result["config"]
    st.caption(
        render.md_escape(
            f"{source} · prompt: {result['prompt'][:90]} · γ {cfg['gamma']} · temperature {cfg['temperature']:g} · "
            f"{cfg['max_new_tokens']} new tokens · {cfg['dtype']} ({cfg['kernels']}) · target alone "
            f"{result['baseline']['tokens_per_s']:.1f} tokens/s"
        )
    )
    st.plotly_chart(race_charts.race_speed_figure(result), key=keys.RACE_SPEED_CHART)
    st.plotly_chart(race_charts.race_position_figure(result), key=keys.RACE_POSITIONS_CHART)
    rows = [
        {
            "drafter": r["label"],
            glossary.MEAN_ACCEPTED_LENGTH.label: r["tokens_per_iteration"],
            glossary.ALPHA.label: r["alpha"],
            glossary.C.label: r["c"],
            glossary.VERIFY_COST.label: r["verify_cost"],
            "measured speedup": r["speedup"],
            "predicted speedup": r["predicted_speedup"],
        }
        for r in result["rows"]
    ]
    st.dataframe(rows, hide_index=True, column_config=RACE_COLUMNS, width="content")
    with st.expander("What each drafter is"):
        st.markdown(
            "\n".join(
                f"- **{render.md_escape(r['label'])}**: {render.md_escape(race.EXPLAINED.get(r['draft'], ''))}"
                for r in result["rows"]
            )
        )
    st.caption(
        f"{glossary.C.label}: {glossary.C.definition}. "
        f"{glossary.VERIFY_COST.label}: {glossary.VERIFY_COST.definition}. "
        "A draft pays when it is right often (high α, deep acceptance) and cheap (small c). The prediction "
        "τ / (γc + v) charges each row its measured verify cost v (the paper assumes 1). The head and the hybrid "
        "draft a tree (two first guesses, one checked after the other) and stop early when unsure, which the "
        "formula for γ guesses in a row does not model, so their prediction can miss either way; the Theory page "
        "names where a run parts from it."
    )
    cols = st.columns(2)
    cols[0].download_button("Download JSON", json.dumps(result, indent=1), "race.json", key=keys.RACE_JSON)
    cols[1].download_button("Download CSV", race.race_to_csv(result), "race.csv", key=keys.RACE_CSV)


def _race_tab() -> None:
    st.caption(
        "One prompt, every offline drafter, the same target: how many tokens each iteration yields, how deep "
        "the drafts hold, what drafting costs, and the speedup measured beside the one the formula predicts."
    )
    st.button("Race them on the sidebar's prompt", type="primary", on_click=_start_race, key=keys.RACE_RUN)
    st.caption("Uses the sidebar's prompt, γ, temperature, seed and max new tokens; about a minute on a CPU.")
    if st.session_state.pop(keys.RACE_REQUEST, False):
        _run_race()
    if error := st.session_state.pop(keys.RACE_ERROR, None):
        st.error(f"{error}\n\nThe previous race, if any, is still shown.")
    result, source = st.session_state.get(keys.RACE_RESULT), "raced here"
    if result is None:
        result, source = gallery.shipped_race(), "recorded race (shipped with specviz)"
    if result is None:
        st.info("No race yet: press the button above.")
        return
    _show_race(result, source)


def _training_tab() -> None:
    st.caption(
        "The learned drafts measured along their training on held-out text: α at temperature 1 and greedy "
        "agreement at temperature 0, and the speedup the paper's formula predicts from them."
    )
    c = st.slider(
        "c (draft step ÷ target step) for the prediction", 0.0, 1.0, 0.1, step=0.01, key=keys.DRAFTS_C,
        help="the draft's cost on your hardware; the race above measures it",
    )  # fmt: skip
    for kind, path in gallery.TRAINING_RECORDS.items():
        st.subheader(kind)
        if not path.is_file():
            st.info(f"No training record yet: `{path.name}` is not in this copy of specviz.")
            continue
        try:
            data = read_training_record(path)
        except SpecvizError as exc:
            st.error(f"{exc} Re-run the recipe to write it again.")
            continue
        history = data["history"]
        st.plotly_chart(theory_charts.draft_training_figure(history, c), key=f"{keys.DRAFT_QUALITY_PREFIX}{path.stem}")
        if all(p.get("alpha_bench_prompts") is not None for p in history):
            st.caption("The dashed line: α on the benchmark's free-text prompts, never trained on.")
        last = history[-1]
        cols = st.columns(3)
        cols[0].metric("α after training (T = 1)", f"{last['alpha']:.3f}", help=f"at step {last['step']}")
        g1 = theory.best_gamma(last["alpha"], c)
        cols[1].metric("Predicted speedup at T = 1", f"{theory.walltime_improvement(last['alpha'], g1, c):.2f}×")
        if last.get("greedy_agreement") is not None:
            cols[2].metric("Greedy agreement (T = 0)", f"{last['greedy_agreement']:.3f}")
        if last.get("alpha_by_position"):  # four numbers: a row of their own (a quarter row cut them short)
            depth = " · ".join(f"{a:.2f}" for a in last["alpha_by_position"])
            st.metric("α at draft positions 1..4", depth, help="the head feeding on its own predicted features")


def drafts_page() -> None:
    st.title("Drafters")
    st.caption("What makes a draft good: right often, right for several tokens in a row, and cheap.")
    race_tab, training_tab = st.tabs(["Race of drafters", "Learned drafts along training"])
    with race_tab:
        _race_tab()
    with training_tab:
        _training_tab()


drafts_page()
