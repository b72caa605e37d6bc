"""Distribution lab: sample the first few tokens many times with speculative decoding (under the
correct rule or a wrong variant) and with the target alone, against the target's exact
probabilities, with a goodness-of-fit test. Plus the draft-quality view: α of the shipped draft
along its training and the speedup that follows."""

import contextlib
import json
import math
from pathlib import Path

import streamlit as st

from specviz import sweep, theory
from specviz.charts import lab as lab_charts
from specviz.charts import theory as theory_charts
from specviz.charts.tokens import display_token
from specviz.errors import SpecvizError
from specviz.prompting import prompt_token_ids
from specviz.verify import RULE_LABELS, RULES, WRONG_RULES
from specviz_app import params, render, state

ROOT = Path(__file__).resolve().parent.parent
DRAFT_TRAINING = ROOT / "assets" / "draft_training.json"
MODELS = {
    "toy": "Toy pair: two tiny random models (seconds; tokens shown as #id)",
    "sidebar": "The sidebar's target and draft (real text; minutes on a CPU)",
}
RULE_NAMES = {
    "exact": "Correct rule (Algorithm 1)",
    "accept_if_equal": "Wrong: accept only if equal to a sample from p",
    "resample_from_p": "Wrong: resample from p, not the residual",
    "no_bonus": "Correct but slower: skip the bonus token",
}
COST_RUNS = {"toy": 60, "sidebar": 6}  # decodes used to measure tokens per iteration of a rule
COST_TOKENS = {"toy": 16, "sidebar": 8}


@st.cache_resource(max_entries=1, show_spinner=False)
def _toy_pair():
    return sweep.toy_pair(**sweep.LAB_TOY)


def _models(choice: str):
    if choice == "toy":
        target, draft = _toy_pair()
        return sweep.LAB_TOY_PROMPT, target, draft
    settings = st.session_state["settings"]
    target_name, draft_name = settings.model_names()
    if not target_name:
        raise SpecvizError("Name a target model in the sidebar (custom pair), or pick another pair.")
    target = state.get_model(target_name, settings.dtype)
    draft = state.resolve_draft(target, draft_name)
    if not settings.prompt.strip():
        raise SpecvizError("The sidebar prompt is empty: type a prompt for the model to continue.")
    return prompt_token_ids(target.tokenizer, settings.prompt), target, draft


def _labels(result: dict, target) -> list[str]:
    def one(tid: int) -> str:
        if target is None or target.tokenizer is None:
            return f"#{tid}"
        return display_token(target.tokenizer.decode([tid]))

    return [" · ".join(one(t) for t in outcome) for outcome in result["outcomes"]]


def _tokens_per_iteration(rule, prompt_ids, target, draft, gamma, temperature, seed, choice) -> float:
    """Mean tokens emitted per iteration under a rule, over a few short decodes (the cost of a rule)."""
    from specviz.decoder import speculative_generate

    tokens = iterations = 0
    for i in range(COST_RUNS[choice]):
        run = speculative_generate(
            prompt_ids, target=target, draft=draft, gamma=gamma, temperature=temperature, seed=seed + 10_000 + i,
            max_new_tokens=COST_TOKENS[choice], rule=rule, trace=False,
        )  # fmt: skip
        tokens += run.summary["new_tokens"]
        iterations += run.summary["iterations"]
    return tokens / max(iterations, 1)


def _start(which: str) -> None:
    st.session_state["lab_request"] = which
    st.session_state["lab_stop"] = False


def _stop() -> None:
    st.session_state["lab_stop"] = True
    st.session_state.pop("lab_request", None)


def _run(rules: list[str], choice: str, k: int, n: int, gamma: int, temperature: float, seed: int) -> None:
    from specviz.lab import exact_distribution, run_lab

    area = st.empty()  # the progress box disappears when the run ends
    box = area.container(border=True)
    box.button("Stop", icon=":material/stop:", on_click=_stop, key="lab_stop_button")
    bar = box.progress(0.0, text="Loading the models…")
    results: dict[str, dict] = {}
    costs: dict[str, float] = {}
    try:
        prompt_ids, target, draft = _models(choice)
        with sweep.one_thread() if choice == "toy" else contextlib.nullcontext():
            from specviz.config import SamplingConfig

            bar.progress(0.0, text="Computing the target's exact distribution…")
            exact = exact_distribution(target, prompt_ids, k, SamplingConfig(temperature, None, None))
            for j, rule in enumerate(rules):

                def progress(done: int, total: int, j=j, rule=rule) -> None:
                    if done % max(1, total // 50) and done != total:
                        return  # about 50 updates per rule: each one is a message to the browser
                    bar.progress(
                        (j + done / total) / len(rules),
                        text=f"Rule {j + 1} of {len(rules)} ({rule}): sample {done} of {total}",
                    )

                result = run_lab(
                    prompt_ids, target=target, draft=draft, rule=rule, k=k, n=n, gamma=gamma,
                    temperature=temperature, seed=seed, exact=exact, with_target=j == 0,
                    on_progress=progress, should_stop=lambda: bool(st.session_state.get("lab_stop")),
                ).to_dict()  # fmt: skip
                if j > 0:  # the target-alone samples do not depend on the rule: share the first ones
                    first = results[rules[0]]
                    result.update(
                        target_counts=first["target_counts"], n_target=first["n_target"],
                        target_test=first["target_test"], impossible_target=first["impossible_target"],
                    )  # fmt: skip
                results[rule] = result
                if result["stopped"]:
                    break
                bar.progress((j + 1) / len(rules), text=f"Rule {rule}: measuring tokens per iteration…")
                costs[rule] = _tokens_per_iteration(rule, prompt_ids, target, draft, gamma, temperature, seed, choice)
    except SpecvizError as exc:
        area.empty()
        st.session_state["lab_error"] = str(exc)
        return
    except Exception as exc:  # a bug, not a user error: say so without a traceback
        area.empty()
        st.session_state["lab_error"] = (
            f"Something unexpected went wrong ({type(exc).__name__}: {exc}). Try other settings; please report "
            "this if it repeats."
        )
        return
    area.empty()
    labels = _labels(next(iter(results.values())), None if choice == "toy" else target) if results else []
    st.session_state["lab_results"] = {"results": results, "costs": costs, "labels": labels, "models": choice}


def _verdict_box(rule: str, result: dict) -> None:
    test = result["spec_test"]
    p = test["p_value"]
    if result["stopped"]:
        st.warning(f"Stopped after {result['n_spec']} of {result['n_requested']} samples; the test uses those.")
    if p is None:
        st.info("Not enough distinct outcomes to test: raise the temperature or the number of tokens k.")
        return
    impossible = result.get("impossible_spec", 0)
    stat = (
        "no statistic: an impossible sample decides" if test["statistic"] is None else f"χ² = {test['statistic']:.1f}"
    )
    facts = f"{stat}, {test['dof']} degrees of freedom, p-value = {p:.3g} ({result['n_spec']} samples)"
    if impossible:
        facts += f"; {impossible} sample(s) had exact probability 0 under the target"
    if p < lab_charts.SIGNIFICANCE:
        kind = "as expected: this rule is wrong" if rule in WRONG_RULES else "unexpected for a correct rule"
        st.error(f"**Rejected** ({kind}): these samples are not distributed as p. {facts}.")
    else:
        extra = ""
        if rule in WRONG_RULES:
            extra = " This wrong rule was not caught at this sample size: raise n or k, or lower γ."
        st.success(
            f"**Not rejected**: the samples are consistent with p. {facts}.{extra} "
            "(A test never proves equality; it finds no evidence of a difference.)"
        )


def _show_results(stored: dict) -> None:
    results, costs, labels = stored["results"], stored["costs"], stored["labels"]
    if not results:
        st.info("The run stopped before any sample was drawn.")
        return
    names = list(results)
    if len(names) > 1:
        st.subheader("Every rule, side by side")
        st.plotly_chart(lab_charts.rules_figure(results, WRONG_RULES), key="lab-rules")
        st.dataframe(
            lab_charts.rules_rows(results, costs),
            hide_index=True,
            column_config={
                "p-value": st.column_config.NumberColumn(format="%.3g"),
                "statistic": st.column_config.NumberColumn(format="%.1f"),
                "tokens per iteration": st.column_config.NumberColumn(format="%.2f"),
            },
        )
        if "exact" in costs and "no_bonus" in costs:
            st.caption(
                f"Skipping the bonus keeps the distribution (its p-value is not small) but emits fewer tokens per "
                f"iteration: {costs['no_bonus']:.2f} against {costs['exact']:.2f} with the bonus, so it needs more "
                "iterations (target passes) for the same text."
            )
        shown = st.selectbox("Show the distribution of", names, format_func=RULE_NAMES.get, key="lab_show")
    else:
        shown = names[0]
    result = results[shown]
    st.subheader(RULE_NAMES[shown])
    st.caption(render.md_escape(RULE_LABELS[shown]))
    _verdict_box(shown, result)
    st.plotly_chart(lab_charts.distribution_figure(result, labels), key=f"lab-dist-{shown}")
    target_test = result.get("target_test")
    if target_test and target_test.get("p_value") is not None:
        st.caption(
            f"Target alone ({result['n_target']} samples): p-value {target_test['p_value']:.3g}, the control: "
            "sampling from p itself should not be rejected (about 1 run in 100 is, by chance, at the 0.01 level)."
        )
    if shown in costs:
        st.caption(f"Tokens per iteration under this rule: {costs[shown]:.2f} (γ = {result['gamma']}).")
    with st.expander("The numbers behind the chart"):
        st.dataframe(lab_charts.distribution_rows(result, labels, top=30), hide_index=True)


# ----- draft quality ------------------------------------------------------------------------------


def _read_training(path: Path) -> dict:
    """The draft's training record, checked enough to plot. Raises SpecvizError with a clear message."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecvizError(f"Cannot read {path.name}: {exc}.") from None
    except json.JSONDecodeError as exc:
        raise SpecvizError(f"{path.name} is not valid JSON ({exc.msg} at line {exc.lineno}).") from None
    if not isinstance(data, dict) or not isinstance(data.get("history"), list) or not data["history"]:
        raise SpecvizError(f"{path.name} has no 'history' list of training points.")
    for i, point in enumerate(data["history"]):
        ok = isinstance(point, dict) and all(
            isinstance(point.get(key), int | float) and not isinstance(point.get(key), bool)
            for key in ("step", "alpha")
        )
        if not ok or not (0 <= point["alpha"] <= 1 and math.isfinite(point["step"])):
            raise SpecvizError(f"{path.name}: training point {i + 1} needs a numeric 'step' and an 'alpha' in 0..1.")
        g = point.get("greedy_agreement")
        if g is not None and (not isinstance(g, int | float) or not 0 <= g <= 1):
            point["greedy_agreement"] = None
    return data


def _draft_quality() -> None:
    st.caption(
        "The offline pair's draft is a small model distilled from the target (`python -m specviz train-draft`). "
        "Its α was measured on held-out text every few training steps; the paper's formula turns each α into "
        "the speedup it would give at the best γ."
    )
    path = Path(st.session_state.get("_draft_training_path", DRAFT_TRAINING))
    if not path.is_file():
        st.info(
            f"No training record yet: `{path.name}` is not in this copy of specviz (it is written by "
            "`python -m specviz train-draft`). The chart appears here once the draft has been trained."
        )
        return
    try:
        data = _read_training(path)
    except SpecvizError as exc:
        st.error(f"{exc} Re-run `python -m specviz train-draft` to write it again.")
        return
    history = data["history"]
    measured_c = None
    loaded = state.current()
    if (
        loaded is not None
        and loaded.trace.mode == "speculative"
        and loaded.trace.config.get("draft") == data.get("draft")
    ):
        measured_c = theory.estimate_c(loaded.trace)
    default_c = round(min(max(measured_c, 0.0), 1.0), 2) if measured_c is not None else 0.1
    c = st.slider(
        "c (draft step ÷ target step) for the prediction", 0.0, 1.0, default_c, step=0.01, key="dq_c",
        help="measured from the current trace when it used this draft; otherwise a guess you can move",
    )  # fmt: skip
    if measured_c is not None:
        st.caption(f"The current trace used this draft and measured c = {measured_c:.3f}.")
    st.plotly_chart(theory_charts.draft_training_figure(history, c), key="dq-figure")
    last = history[-1]
    cols = st.columns(4)
    g1 = theory.best_gamma(last["alpha"], c)
    cols[0].metric("α after training (T = 1)", f"{last['alpha']:.3f}", help=f"at step {last['step']}")
    cols[1].metric(
        "Predicted speedup at T = 1",
        f"{theory.walltime_improvement(last['alpha'], g1, c):.2f}×",
        help=f"Thm 3.8 at the best γ = {g1}",
    )
    greedy = last.get("greedy_agreement")
    if greedy is not None:
        g0 = theory.best_gamma(greedy, c)
        cols[2].metric("Greedy agreement (T = 0)", f"{greedy:.3f}", help="argmax q = argmax p: α of greedy decoding")
        cols[3].metric(
            "Predicted speedup at T = 0",
            f"{theory.walltime_improvement(greedy, g0, c):.2f}×",
            help=f"Thm 3.8 at the best γ = {g0}",
        )
    facts = [f"draft {data.get('draft', '?')}", f"target {data.get('target', '?')}"]
    if isinstance(data.get("training_seconds"), int | float):
        facts.append(f"trained for {data['training_seconds'] / 60:.0f} min")
    hw = data.get("hardware")
    if isinstance(hw, dict) and hw.get("cpu"):
        facts.append(f"on {hw['cpu']}")
    st.caption(render.md_escape(" · ".join(str(f) for f in facts)))


# ----- the page -----------------------------------------------------------------------------------


def lab_page() -> None:
    st.title("Distribution lab")
    st.caption(
        "Speculative decoding claims to sample exactly from the target p, whatever the draft. Test it: draw the "
        "first k tokens many times with speculative decoding and with the target alone, and compare both with "
        "the target's exact probabilities. Then try the rules a student might invent instead."
    )
    tab_lab, tab_quality = st.tabs(["Is the output distributed as p?", "Draft quality along training"])
    with tab_lab:
        choice = st.radio("Models", list(MODELS), format_func=MODELS.get, key="lab_models", horizontal=True)
        rule = st.selectbox(
            "Verification rule", RULES, format_func=RULE_NAMES.get, key="lab_rule",
            help="the correct rule, or a variant a student might invent",
        )  # fmt: skip
        st.caption(render.md_escape(RULE_LABELS[rule]))
        real = choice == "sidebar"
        cols = st.columns(5)
        k = cols[0].number_input("k (tokens per sample)", 1, 3, 1 if real else 2, key="lab_k")
        n = cols[1].number_input(
            "n (samples)", 20, 5000, 60 if real else 500, step=20, key=f"lab_n_{choice}",
            help="more samples: a sharper test, a longer run",
        )  # fmt: skip
        gamma = cols[2].number_input(
            "γ", 1, 4, 1, key="lab_gamma", help="k > γ puts the bonus among the counted tokens"
        )
        temperature = cols[3].number_input("Temperature", 0.1, 2.0, 1.0, step=0.1, key="lab_temperature")
        seed = cols[4].number_input("Seed", 0, 2**31 - 1, 0, key="lab_seed")
        if real:
            settings = st.session_state["settings"]
            st.caption(
                render.md_escape(
                    f"Pair: {params.pairs()[settings.pair].label} · prompt: {settings.prompt[:80]} (from the sidebar). "
                    "Each sample is a short decode of the real target: keep n small on a CPU."
                )
            )
        b = st.columns([1, 1, 3])
        b[0].button("Run this rule", type="primary", on_click=_start, args=("one",), key="lab_run_one")
        b[1].button("Compare all four rules", on_click=_start, args=("all",), key="lab_run_all")
        request = st.session_state.pop("lab_request", None)
        if request:
            rules = [rule] if request == "one" else list(RULES)
            _run(rules, choice, int(k), int(n), int(gamma), float(temperature), int(seed))
        if error := st.session_state.pop("lab_error", None):
            st.error(f"{error}\n\nThe previous result, if any, is still shown.")
        stored = st.session_state.get("lab_results")
        if stored is None:
            st.info("Press **Run this rule** (or compare all four). With the toy pair it takes a few seconds.")
        else:
            _show_results(stored)
    with tab_quality:
        _draft_quality()


lab_page()
