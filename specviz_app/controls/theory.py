"""The Theory page's controls: the sliders for α, γ, c and v, the button that sets them to the
trace on show, and the note (with its button) on whether that trace drafted as the formula assumes.

The page reads what the sliders hold from sliders(); the trace's unrounded values stay behind the
sliders (keys.THEORY_EXACT) so the metrics and the chart's trace point compute from the same numbers.
"""

from dataclasses import replace

import streamlit as st

from specviz.config import GAMMA_MAX
from specviz.engine import models
from specviz.labs import theory
from specviz.teaching import glossary
from specviz.teaching.charts import theory_text
from specviz_app import keys, language, params, session
from specviz_app.params import Settings

SLIDERS = {"alpha": keys.THEORY_ALPHA, "c": keys.THEORY_C, "v": keys.THEORY_V}


def _ranges(m: dict | None) -> dict[str, tuple[float, float]]:
    """Each slider's (low, high): theory.SLIDER_RANGES widened to hold the trace's measured value, so
    that "Use the current trace's …" sets the slider to it instead of to the nearest end."""
    return {name: theory.slider_range(name, None if m is None else m.get(name)) for name in SLIDERS}


def measured() -> dict | None:
    """The trace on show as theory.measured_point sees it, with where it came from (None: none to use)."""
    loaded = session.current()
    point = None if loaded is None else theory.measured_point(loaded.trace, loaded.baseline)
    return None if point is None else {"source": loaded.source, **point}


def usable(m: dict | None) -> bool:
    """The trace measured α, c and v all three (c and v need its target-alone run)."""
    return m is not None and all(m[k] is not None for k in ("alpha", "c", "v"))


def _use_measured(m: dict) -> None:
    exact = {}
    for name, (low, high) in _ranges(m).items():
        key = SLIDERS[name]
        exact[key] = min(max(m[name], low), high)  # the range holds it (theory.slider_range); α stays in [0, 1]
        st.session_state[key] = round(exact[key], 2)  # the sliders' 0.01 grid
    st.session_state[keys.THEORY_EXACT] = exact
    if m["gamma"]:
        st.session_state[keys.THEORY_GAMMA] = min(int(m["gamma"]), GAMMA_MAX)


def _exact(key: str, shown: float) -> float:
    """The trace's own value behind a slider that 'Use the current trace's values' set, for as long
    as the slider still shows it rounded; else the slider's value. The metrics then compute from
    the same α, c and v as the chart's trace point (rounded inputs printed "0.99×" beside its "0.98×")."""
    exact = st.session_state.get(keys.THEORY_EXACT, {}).get(key)
    return exact if exact is not None and round(exact, 2) == shown else shown


def on_trace(m: dict | None, alpha: float, gamma: int, c: float, v: float) -> bool:
    """The sliders show the current trace's own α, γ, c and v."""
    exact = st.session_state.get(keys.THEORY_EXACT, {})
    same = [exact.get(k) == value for k, value in ((keys.THEORY_ALPHA, alpha), (keys.THEORY_C, c), (keys.THEORY_V, v))]
    return usable(m) and all(same) and gamma == min(int(m["gamma"] or 0), GAMMA_MAX)


def sliders(m: dict | None) -> tuple[float, int, float, float]:
    """The four sliders and the button that sets them from the trace `m`; their α, γ, c and v
    (the trace's unrounded values where the button set them)."""
    st.session_state.setdefault(keys.THEORY_ALPHA, 0.75)
    st.session_state.setdefault(keys.THEORY_GAMMA, 7)
    st.session_state.setdefault(keys.THEORY_C, 0.05)
    st.session_state.setdefault(keys.THEORY_V, 1.0)
    ranges = _ranges(m)
    for name, (low, high) in ranges.items():
        # A value set from an earlier trace may lie outside this trace's range: a slider refuses it.
        st.session_state[SLIDERS[name]] = min(max(st.session_state[SLIDERS[name]], low), high)
    w, lang = language.words("theory"), language.current()
    cols = st.columns([1, 1, 1, 1, 1.5], vertical_alignment="bottom")  # the button's label in full at 1280 px
    alpha = cols[0].slider(
        glossary.term("alpha", lang).label, *ranges["alpha"], step=0.01, key=keys.THEORY_ALPHA, help=w["alpha_help"]
    )
    gamma = cols[1].slider(w["gamma"], 1, GAMMA_MAX, key=keys.THEORY_GAMMA, help=w["gamma_help"])
    c_help = glossary.term("c", lang).definition
    c = cols[2].slider(w["c"], *ranges["c"], step=0.01, key=keys.THEORY_C, help=c_help)
    v = cols[3].slider(
        w["v"], *ranges["v"], step=0.01, key=keys.THEORY_V,
        help=w["v_help"].format(definition=glossary.term("verify_cost", lang).definition),
    )  # fmt: skip
    cols[4].button(
        w["use"], on_click=_use_measured, args=(m,), disabled=not usable(m), help=w["use_help"], width="stretch"
    )
    return (_exact(keys.THEORY_ALPHA, alpha), gamma, _exact(keys.THEORY_C, c), _exact(keys.THEORY_V, v))


def _paper_settings(loaded: session.Loaded) -> tuple[Settings, bool] | None:
    """The settings that re-run the trace on show as the paper's Algorithm 1, with its target-alone run
    (for c and v), and whether the draft changes to the draft head; None where the paper's preset
    cannot apply (a target other than the offline one, whose model draft drafts one chain of γ anyway)."""
    trace = loaded.trace
    if trace.config.get("target") != models.OFFLINE_TARGET:
        return None
    settings, _ = params.from_trace_config(trace.config, trace.prompt, True)
    swapped = not params.paper_applies(*settings.model_names())
    if swapped:  # the n-gram or the self draft: the default pair, whose draft the preset makes the head
        settings = replace(settings, pair=params.DEFAULTS.pair, target="", draft="")
    return replace(settings, algorithm="paper"), swapped


def _run_paper(settings: Settings) -> None:
    """What the sidebar's Run does, on these settings: the sidebar takes them on the next script run,
    before app.py decodes."""
    session.apply_settings(settings)
    st.session_state[keys.RUN_REQUESTED] = True


def drafting_note(loaded: session.Loaded | None) -> None:
    """Beside the button that copies the trace's α, γ, c and v: whether the trace drafted as the formula
    assumes (one chain of exactly γ), and, where it did not, the paper's algorithm one click away."""
    lang, w = language.current(), language.words("theory")
    said = None if loaded is None else theory_text.drafting_against_formula(loaded.trace, lang)
    if said is None:
        return
    kind, sentence = said
    if kind == "paper":
        st.success(sentence, icon=":material/check:")
        return
    (st.warning if kind == "most" else st.info)(sentence, icon=":material/info:")
    paper = _paper_settings(loaded)
    if paper is not None:  # under the note, its label in full (a column beside it cut it at 1280 px)
        settings, swapped = paper
        st.button(
            w["paper_button"],
            on_click=_run_paper,
            args=(settings,),
            help=w["paper_help"].format(
                definition=glossary.term("algorithm_paper", lang).definition,
                swapped=w["paper_swapped"] if swapped else "",
            ),
            icon=":material/play_arrow:",
        )
