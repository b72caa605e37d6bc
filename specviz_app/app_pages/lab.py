"""Distribution lab: sample the first few tokens many times with speculative decoding (under the
correct rule or a wrong variant) and with the target alone, against the target's exact
probabilities, with a goodness-of-fit test. (The learned drafts' training lives on Drafters.)
Its words: the catalogue's section "lab", its charts' the section "charts" (keys "lab_...")."""

import contextlib

import streamlit as st

from specviz.decoding.prompting import prompt_token_ids
from specviz.decoding.verify import RULE_LABELS, RULES, WRONG_RULES
from specviz.engine import toy
from specviz.errors import SpecvizError
from specviz.labs import lab_time
from specviz.teaching.charts import lab as lab_charts
from specviz.teaching.charts.tokens import display_token
from specviz_app import keys, language, params, render, session
from specviz_app.controls import machine_check
from specviz_app.runs import loading
from specviz_app.sidebar import pair_label

MODELS = ("toy", "sidebar")  # the choices of models; their words: the catalogue's "models_<choice>"


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
        raise SpecvizError(language.words("lab")["prompt_empty"])
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

    w, lang = language.words("lab"), language.current()
    names = None if lang == "en" else {r: lab_charts.rule_title(r, lang) for r in rules}  # English: code names
    area = st.empty()  # the progress box disappears when the run ends
    box = area.container(border=True)
    box.button(w["stop"], icon=":material/stop:", on_click=_stop, key=keys.LAB_STOP_BUTTON)
    bar = box.progress(0.0, text=w["loading"])
    with session.ErrorGuard(keys.LAB_ERROR, area) as guard:
        prompt_ids, target, draft = _models(choice)
        bar.progress(0.0, text=w["computing"])
        with toy.one_thread() if choice == "toy" else contextlib.nullcontext():
            results, costs = compare_rules(
                prompt_ids, target=target, draft=draft, rules=rules, k=k, n=n, gamma=gamma, temperature=temperature,
                seed=seed, cost_runs=lab_time.COST_RUNS[choice], cost_tokens=lab_time.COST_TOKENS[choice],
                on_progress=lab_time.reporter(n, len(rules), bar.progress, w, names),
                should_stop=lambda: bool(st.session_state.get(keys.LAB_STOP)),
            )  # fmt: skip
    if guard.failed:
        return
    area.empty()
    labels = _labels(next(iter(results.values())), None if choice == "toy" else target) if results else []
    st.session_state[keys.LAB_RESULTS] = {"results": results, "costs": costs, "labels": labels, "models": choice}


def _show_results(stored: dict) -> None:
    results, costs, labels = stored["results"], stored["costs"], stored["labels"]
    w, lang = language.words("lab"), language.current()
    if not results:
        st.info(w["stopped_early"])
        return
    names = list(results)
    if len(names) > 1:
        st.subheader(w["side_by_side"])
        st.plotly_chart(lab_charts.rules_figure(results, WRONG_RULES, lang), key=keys.LAB_RULES_CHART)
        # A static table wraps its text: a data grid cut "what it does" to "…then resample fro".
        st.table(lab_charts.rules_rows(results, costs, as_text=True, lang=lang))
        if "exact" in costs and "no_bonus" in costs:
            st.caption(w["bonus_caption"].format(no_bonus=f"{costs['no_bonus']:.2f}", exact=f"{costs['exact']:.2f}"))
        language.keep(keys.LAB_SHOW)
        shown = st.selectbox(
            w["show_distribution"], names, format_func=lambda r: lab_charts.rule_title(r, lang), key=keys.LAB_SHOW
        )
    else:
        shown = names[0]
    result = results[shown]
    st.subheader(lab_charts.rule_title(shown, lang))
    st.caption(render.md_escape(lab_charts.rule_label(shown, lang, RULE_LABELS[shown])))
    for level, text in lab_charts.verdict_messages(shown, result, WRONG_RULES, lang):
        getattr(st, level)(text)  # st.warning / st.info / st.error / st.success
    figure = lab_charts.distribution_figure(result, labels, lang=lang)
    st.plotly_chart(figure, key=f"{keys.LAB_DISTRIBUTION_PREFIX}{shown}")
    control = lab_charts.control_verdict(result.get("target_test"), result["n_target"], lang=lang)
    if control is not None:
        level, text = control
        getattr(st, level)(text)  # st.caption, or st.warning for a false alarm
    st.caption(lab_charts.significance_note((result.get("spec_test") or {}).get("simulated", 0), lang))
    if shown in costs:
        st.caption(w["tokens_per_iteration"].format(tokens=f"{costs[shown]:.2f}", gamma=result["gamma"]))
    with st.expander(w["numbers_behind"]):
        st.dataframe(lab_charts.distribution_rows(result, labels, top=30, lang=lang), hide_index=True)


def _inputs(choice: str) -> tuple[int, int, int, float, int]:
    """The run's k, n, γ, temperature and seed, starting at lab_charts.DEFAULTS for these models."""
    start, w = lab_charts.DEFAULTS[choice], language.words("lab")
    cols = st.columns(5)
    k = cols[0].number_input(w["k"], 1, 3, start["k"], key=keys.LAB_K)
    n = cols[1].number_input(
        w["n"], 20, 5000, start["n"], step=20, key=f"{keys.LAB_SAMPLES_PREFIX}{choice}", help=w["n_help"]
    )
    gamma = cols[2].number_input("γ", 1, 4, start["gamma"], key=keys.LAB_GAMMA, help=w["gamma_help"])
    temperature = cols[3].number_input(
        w["temperature"], 0.1, 2.0, start["temperature"], step=0.1, key=keys.LAB_TEMPERATURE
    )
    seed = cols[4].number_input(w["seed"], 0, 2**31 - 1, 0, key=keys.LAB_SEED)
    return k, n, gamma, temperature, seed


# ----- the page -----------------------------------------------------------------------------------


def lab_page() -> None:
    w, lang = language.words("lab"), language.current()
    st.title(language.words("app")["page_lab"])
    st.caption(w["intro"])
    language.keep(keys.LAB_MODELS)
    language.keep(keys.LAB_RULE)
    choice = st.radio(w["models"], MODELS, format_func=lambda m: w[f"models_{m}"], key=keys.LAB_MODELS, horizontal=True)
    rule = st.selectbox(
        w["rule"], RULES, format_func=lambda r: lab_charts.rule_title(r, lang), key=keys.LAB_RULE,
        help=w["rule_help"],
    )  # fmt: skip
    st.caption(render.md_escape(lab_charts.rule_label(rule, lang, RULE_LABELS[rule])))
    real = choice == "sidebar"
    k, n, gamma, temperature, seed = _inputs(choice)
    if real:
        settings = st.session_state[keys.SETTINGS]
        pair = pair_label(params.pairs()[settings.pair], language.words("sidebar"))
        st.caption(render.md_escape(w["pair_caption"].format(pair=pair, prompt=settings.prompt[:80])))
    # The buttons as wide as their labels, side by side: in a fifth of the page at 1280 px, columns
    # cut the second to "Compare all ru…".
    buttons = st.container(horizontal=True, vertical_alignment="center")
    buttons.button(w["run_one"], type="primary", on_click=_start, args=("one",), key=keys.LAB_RUN_ONE)
    buttons.button(w["run_all"], on_click=_start, args=("all",), key=keys.LAB_RUN_ALL)
    if not real:
        one, every = lab_time.toy_seconds(int(n), 1), lab_time.toy_seconds(int(n), len(RULES))
        load = lab_time.TOY_LOAD_S
        buttons.caption(w["toy_time"].format(n=int(n), one=f"{one:.0f}", every=f"{every:.0f}", load=load))
    request = st.session_state.pop(keys.LAB_REQUEST, None)
    if request:
        rules = [rule] if request == "one" else list(RULES)
        _run(rules, choice, int(k), int(n), int(gamma), float(temperature), int(seed))
    if error := st.session_state.pop(keys.LAB_ERROR, None):
        st.error(w["error"].format(error=error))
    stored = st.session_state.get(keys.LAB_RESULTS)
    if stored is None:
        st.info(w["start_info"])
    else:
        _show_results(stored)
    machine_check.section()  # this machine's last `specviz check`, and the quick one at a click


lab_page()
