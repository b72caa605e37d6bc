"""Distribution lab: sample the first few tokens many times with speculative decoding (under the
correct rule or a wrong variant) and with the target alone, against the target's exact
probabilities, with a goodness-of-fit test. (The learned drafts' training lives on Drafters.)"""

import contextlib

import streamlit as st

from specviz.decoding.prompting import prompt_token_ids
from specviz.decoding.verify import RULE_LABELS, RULE_NAMES, RULES, WRONG_RULES
from specviz.engine import toy
from specviz.errors import SpecvizError
from specviz.labs import lab_time
from specviz.teaching.charts import lab as lab_charts
from specviz.teaching.charts.tokens import display_token
from specviz_app import keys, loading, params, render, session

MODELS = {
    "toy": "Toy pair: two tiny random models (seconds; tokens shown as #id)",
    "sidebar": "The sidebar's target and draft (real text; minutes on a CPU)",
}


@st.cache_resource(max_entries=1, show_spinner=False)
def _toy_pair():
    return toy.toy_pair(**toy.LAB_TOY)


def _models(choice: str):
    if choice == "toy":
        target, draft = _toy_pair()
        return toy.LAB_TOY_PROMPT, target, draft
    settings = st.session_state[keys.SETTINGS]
    target, draft = loading.sidebar_pair(settings)
    if not settings.prompt.strip():
        raise SpecvizError("The sidebar prompt is empty: type a prompt for the model to continue.")
    return prompt_token_ids(target.tokenizer, settings.prompt), target, draft


def _labels(result: dict, target) -> list[str]:
    def one(tid: int) -> str:
        if target is None or target.tokenizer is None:
            return f"#{tid}"
        return display_token(target.tokenizer.decode([tid]))

    return [" · ".join(one(t) for t in outcome) for outcome in result["outcomes"]]


def _start(which: str) -> None:
    st.session_state[keys.LAB_REQUEST] = which
    st.session_state[keys.LAB_STOP] = False


def _stop() -> None:
    st.session_state[keys.LAB_STOP] = True
    st.session_state.pop(keys.LAB_REQUEST, None)


def _run(rules: list[str], choice: str, k: int, n: int, gamma: int, temperature: float, seed: int) -> None:
    from specviz.labs.lab import compare_rules

    area = st.empty()  # the progress box disappears when the run ends
    box = area.container(border=True)
    box.button("Stop", icon=":material/stop:", on_click=_stop, key=keys.LAB_STOP_BUTTON)
    bar = box.progress(0.0, text="Loading the models…")
    with session.ErrorGuard(keys.LAB_ERROR, area) as guard:
        prompt_ids, target, draft = _models(choice)
        bar.progress(0.0, text="Computing the target's exact distribution…")
        with toy.one_thread() if choice == "toy" else contextlib.nullcontext():
            results, costs = compare_rules(
                prompt_ids, target=target, draft=draft, rules=rules, k=k, n=n, gamma=gamma, temperature=temperature,
                seed=seed, cost_runs=lab_time.COST_RUNS[choice], cost_tokens=lab_time.COST_TOKENS[choice],
                on_progress=lab_time.reporter(n, len(rules), bar.progress),
                should_stop=lambda: bool(st.session_state.get(keys.LAB_STOP)),
            )  # fmt: skip
    if guard.failed:
        return
    area.empty()
    labels = _labels(next(iter(results.values())), None if choice == "toy" else target) if results else []
    st.session_state[keys.LAB_RESULTS] = {"results": results, "costs": costs, "labels": labels, "models": choice}


def _show_results(stored: dict) -> None:
    results, costs, labels = stored["results"], stored["costs"], stored["labels"]
    if not results:
        st.info("The run stopped before any sample was drawn.")
        return
    names = list(results)
    if len(names) > 1:
        st.subheader("Every rule, side by side")
        st.plotly_chart(lab_charts.rules_figure(results, WRONG_RULES), key=keys.LAB_RULES_CHART)
        # A static table wraps its text: a data grid cut "what it does" to "…then resample fro".
        st.table(lab_charts.rules_rows(results, costs, as_text=True))
        if "exact" in costs and "no_bonus" in costs:
            st.caption(
                f"Skipping the bonus keeps the distribution (its p-value is not small) but emits fewer tokens per "
                f"iteration: {costs['no_bonus']:.2f} against {costs['exact']:.2f} with the bonus, so it needs more "
                "iterations (target passes) for the same text."
            )
        shown = st.selectbox("Show the distribution of", names, format_func=RULE_NAMES.get, key=keys.LAB_SHOW)
    else:
        shown = names[0]
    result = results[shown]
    st.subheader(RULE_NAMES[shown])
    st.caption(render.md_escape(RULE_LABELS[shown]))
    for level, text in lab_charts.verdict_messages(shown, result, WRONG_RULES):
        getattr(st, level)(text)  # st.warning / st.info / st.error / st.success
    st.plotly_chart(lab_charts.distribution_figure(result, labels), key=f"{keys.LAB_DISTRIBUTION_PREFIX}{shown}")
    from specviz.labs.lab import control_verdict  # torch is loaded already: a result exists

    control = control_verdict(result.get("target_test"), result["n_target"], lab_charts.SIGNIFICANCE)
    if control is not None:
        level, text = control
        getattr(st, level)(text)  # st.caption, or st.warning for a false alarm
    st.caption(lab_charts.significance_note((result.get("spec_test") or {}).get("simulated", 0)))
    if shown in costs:
        st.caption(f"Tokens per iteration under this rule: {costs[shown]:.2f} (γ = {result['gamma']}).")
    with st.expander("The numbers behind the chart"):
        st.dataframe(lab_charts.distribution_rows(result, labels, top=30), hide_index=True)


def _inputs(choice: str) -> tuple[int, int, int, float, int]:
    """The run's k, n, γ, temperature and seed, starting at lab_charts.DEFAULTS for these models."""
    start = lab_charts.DEFAULTS[choice]
    cols = st.columns(5)
    k = cols[0].number_input("k (tokens per sample)", 1, 3, start["k"], key=keys.LAB_K)
    n = cols[1].number_input(
        "n (samples)", 20, 5000, start["n"], step=20, key=f"{keys.LAB_SAMPLES_PREFIX}{choice}",
        help="more samples: a sharper test, a longer run",
    )  # fmt: skip
    gamma = cols[2].number_input(
        "γ", 1, 4, start["gamma"], key=keys.LAB_GAMMA, help="k > γ puts the bonus among the counted tokens"
    )
    temperature = cols[3].number_input(
        "Temperature", 0.1, 2.0, start["temperature"], step=0.1, key=keys.LAB_TEMPERATURE
    )
    seed = cols[4].number_input("Seed", 0, 2**31 - 1, 0, key=keys.LAB_SEED)
    return k, n, gamma, temperature, seed


# ----- the page -----------------------------------------------------------------------------------


def lab_page() -> None:
    st.title("Distribution lab")
    st.caption(
        "Speculative decoding claims to sample exactly from the target p, whatever the draft. Test it: draw the "
        "first k tokens many times with speculative decoding and with the target alone, and compare both with "
        "the target's exact probabilities. Then try the rules a student might invent instead."
    )
    choice = st.radio("Models", list(MODELS), format_func=MODELS.get, key=keys.LAB_MODELS, horizontal=True)
    rule = st.selectbox(
        "Verification rule", RULES, format_func=RULE_NAMES.get, key=keys.LAB_RULE,
        help="the correct rule, or a variant a student might invent",
    )  # fmt: skip
    st.caption(render.md_escape(RULE_LABELS[rule]))
    real = choice == "sidebar"
    k, n, gamma, temperature, seed = _inputs(choice)
    if real:
        settings = st.session_state[keys.SETTINGS]
        st.caption(
            render.md_escape(
                f"Pair: {params.pairs()[settings.pair].label} · prompt: {settings.prompt[:80]} (from the sidebar). "
                "Each sample is a short decode of the real target: keep n small on a CPU."
            )
        )
    # The buttons as wide as their labels, side by side: in a fifth of the page at 1280 px, columns
    # cut the second to "Compare all four ru…".
    buttons = st.container(horizontal=True, vertical_alignment="center")
    buttons.button("Run this rule", type="primary", on_click=_start, args=("one",), key=keys.LAB_RUN_ONE)
    buttons.button("Compare all four rules", on_click=_start, args=("all",), key=keys.LAB_RUN_ALL)
    if not real:
        one, four = lab_time.toy_seconds(int(n), 1), lab_time.toy_seconds(int(n), len(RULES))
        buttons.caption(
            f"Toy pair at n = {int(n)}: about {one:.0f} s for one rule, {four:.0f} s for all four on a busy "
            f"2-core CPU (the first run also loads the models, about {lab_time.TOY_LOAD_S} s more)."
        )
    request = st.session_state.pop(keys.LAB_REQUEST, None)
    if request:
        rules = [rule] if request == "one" else list(RULES)
        _run(rules, choice, int(k), int(n), int(gamma), float(temperature), int(seed))
    if error := st.session_state.pop(keys.LAB_ERROR, None):
        st.error(f"{error}\n\nThe previous result, if any, is still shown.")
    stored = st.session_state.get(keys.LAB_RESULTS)
    if stored is None:
        st.info(
            "Press **Run this rule** (or compare all four). The bar shows how far the run is and about how long "
            "is left; the toy pair takes seconds, the sidebar's pair minutes."
        )
    else:
        _show_results(stored)


lab_page()
