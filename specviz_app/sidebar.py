"""The sidebar every page shares: run settings, mirrored into the URL, and the Run button.

Widgets keep their values in st.session_state under "s_<field>". The first run of a session
reads the URL (validated by specviz_app.params); every run writes the settings back to the URL so
a copied link reproduces the demo, seed included.
"""

from __future__ import annotations

import os

import streamlit as st

from specviz.engine import models
from specviz.teaching import catalogue
from specviz.traces import trace_store
from specviz_app import keys, language, params
from specviz_app.params import Settings
from specviz_app.serving import background


def _write_widget_state(settings: Settings) -> None:
    for name in params.field_names():
        st.session_state[keys.setting(name)] = getattr(settings, name)


def _current() -> Settings:
    return Settings(**{name: st.session_state[keys.setting(name)] for name in params.field_names()})


def _use_example_prompt() -> None:
    choice = st.session_state.get(keys.EXAMPLE_PROMPT)
    if choice:
        st.session_state[keys.setting("prompt")] = choice
    st.session_state[keys.EXAMPLE_PROMPT] = None


def _request_run() -> None:
    st.session_state[keys.RUN_REQUESTED] = True


# What Check the pair found is drawn under its button, at the sidebar's foot: a long error ran past the
# bottom of the window, unseen until the sidebar was scrolled (issue 48, E6). Once drawn, the box is
# scrolled into the sidebar's view, its top first when it is taller than the window.
_INTO_VIEW = f"""<script>
(() => {{
  let tries = 0;
  const look = () => {{
    const box = document.querySelector('.st-key-{keys.CHECK_PAIR_RESULT}');
    const said = box && box.querySelector('[data-testid="stAlert"]');
    if (!said) {{ if (++tries < 100) requestAnimationFrame(look); return; }}
    const r = box.getBoundingClientRect(), h = window.innerHeight;
    if (r.top < 0 || r.bottom > h) box.scrollIntoView({{block: r.height > h ? 'start' : 'end'}});
  }};
  look();
}})();
</script>"""


def _check_pair(where, target: str, draft: str) -> None:
    """Check the pair's result in a box of its own under the button, scrolled into view (_INTO_VIEW)."""
    with where.container(key=keys.CHECK_PAIR_RESULT):
        _check_pair_in(st, target, draft)
        st.html(_INTO_VIEW, unsafe_allow_javascript=True)  # our own script: no user text in it


def _check_pair_in(where, target: str, draft: str) -> None:
    """Load a custom pair and compare the vocabularies, with the library's own messages."""
    from specviz.drafters import needs_no_model
    from specviz.engine import models
    from specviz.errors import SpecvizError
    from specviz_app.runs import loading

    w = language.words("sidebar")
    target, draft = target.strip(), draft.strip() or "ngram"
    if not target:
        where.error(w["type_target_first"])
        return
    try:
        with where.spinner(w["loading_models"]):
            loaded = loading.get_model(target)
            if needs_no_model(draft):  # a strategy or a head: it drafts in the target's own vocabulary
                where.success(w["own_vocabulary"].format(draft=draft, n=loaded.vocab_size))
                return
            models.check_vocabulary(loaded, loading.get_model(draft))
        where.success(w["same_vocabulary"].format(n=loaded.vocab_size))
    except SpecvizError as exc:
        where.error(str(exc))


def _algorithm(sb, pair: params.Pair) -> None:
    """The drafting preset beside the fastest default: the paper's Algorithm 1, one click away."""
    from specviz.config import ALGORITHMS
    from specviz.teaching import glossary

    lang = language.current()
    names = {"fastest": glossary.term("algorithm_fastest", lang), "paper": glossary.term("algorithm_paper", lang)}
    if st.session_state[keys.setting("algorithm")] not in ALGORITHMS:
        st.session_state[keys.setting("algorithm")] = ALGORITHMS[0]
    sb.radio(
        language.words("sidebar")["algorithm"],
        ALGORITHMS,
        format_func=lambda a: names[a].label,
        key=keys.setting("algorithm"),
        horizontal=True,
        help=" ".join(f"{t.label}: {t.definition}." for t in names.values()),
    )
    chosen = names[st.session_state[keys.setting("algorithm")]]
    target, draft = pair.target, pair.draft
    if pair.key == "custom":
        target = st.session_state[keys.setting("target")].strip() or None
        draft = st.session_state[keys.setting("draft")].strip() or None
    if params.paper_applies(target, draft):
        sb.caption(
            language.words("sidebar")["sentence"].format(text=chosen.definition[0].upper() + chosen.definition[1:])
        )
    else:
        sb.caption(language.words("sidebar")["algorithm_one_chain"])


def init_from_url() -> None:
    """On the first run of a session: settings from the URL (validated), messages for what was refused."""
    if keys.INITIALISED in st.session_state:
        return
    st.session_state[keys.INITIALISED] = True
    query = {k: st.query_params.get_all(k) for k in st.query_params.keys()}
    st.session_state[keys.URL_QUERY] = query  # the link as opened: pages with their own parameters read it (lesson)
    settings, messages = params.from_query(query)
    if message := language.from_link(query.get("lang")):  # the app's language, for every page
        messages.append(message)
    # Only run settings make a link "a demo to reproduce"; a page's own parameters (the lesson's
    # ?step=) must not start a decode on the first visit.
    st.session_state[keys.URL_GIVEN] = bool(set(query) & set(params.field_names()))
    st.session_state[keys.URL_MESSAGES] = messages
    _write_widget_state(settings)


def render() -> Settings:
    """Draw the settings; return them. Clicking Run sets st.session_state[keys.RUN_REQUESTED]."""
    _restore_widget_state()
    sb = st.sidebar
    w = language.words("sidebar")
    for msg in st.session_state.get(keys.URL_MESSAGES, []):
        sb.warning(w["from_link"].format(message=msg))
    language.control(sb, keys.LANG_SIDEBAR)  # first: a class that reads Chinese finds it at once
    sb.header(w["header"])
    # At the top, so it is in sight without scrolling on every page (the prompt sits at the bottom).
    sb.button(
        w["run"], icon=":material/play_arrow:", type="primary", on_click=_request_run, width="stretch",
        key=keys.RUN_BUTTON,
    )  # fmt: skip
    sb.caption(w["run_help"])
    _algorithm(sb, _pair(sb))
    _decoding(sb)
    _prompt(sb)
    settings = _current()
    _write_url(sb, settings)
    return settings


def _restore_widget_state() -> None:
    """The widgets' values: the link's on the first run, settings a page applied, else as they were."""
    init_from_url()
    if keys.APPLY_SETTINGS in st.session_state:
        _write_widget_state(st.session_state.pop(keys.APPLY_SETTINGS))
    for name in params.field_names():  # a page switch may drop widget state: restore the defaults
        st.session_state.setdefault(keys.setting(name), getattr(params.DEFAULTS, name))


def _pair(sb) -> params.Pair:
    """The model pair picker, with the custom pair's names and check, or where the pair runs."""
    options = params.pairs()
    w = language.words("sidebar")
    if st.session_state[keys.setting("pair")] not in options:
        st.session_state[keys.setting("pair")] = "offline"
    # The pairs' keys are the options (a label changes with the language, a key never does).
    lang = language.current()  # read now: a format_func may be called outside this script run
    sb.selectbox(
        w["pair"], list(options), format_func=lambda k: pair_label(options[k], w, lang), key=keys.setting("pair")
    )
    pair = options[st.session_state[keys.setting("pair")]]
    if pair.key == "custom":
        sb.text_input(w["target_name"], key=keys.setting("target"), placeholder="owner/name")
        sb.text_input(w["draft_name"], key=keys.setting("draft"), placeholder=w["draft_placeholder"])
        sb.caption(w["same_tokenizer"])
        if sb.button(w["check_pair_button"], icon=":material/fact_check:", key=keys.CHECK_PAIR):
            _check_pair(sb, st.session_state[keys.setting("target")], st.session_state[keys.setting("draft")])
    elif pair.online:
        sb.caption(w["needs_internet"].format(target=pair.target, draft=pair.draft))
    else:
        sb.caption(w["offline_target"])
        if pair.key == "offline-self":
            sb.caption(w["self_draft"])
    return pair


def pair_label(pair: params.Pair, w: dict[str, str], lang: str | None = None) -> str:
    """A pair's name in `lang` (default: the language on show; params.pairs names it in English)."""
    lang = lang or language.current()
    if pair.online:
        return w["pair_online"].format(label=pair.label.removeprefix("Online: "))
    if pair.key == "offline":
        return w["pair_offline"].format(draft=catalogue.drafter_words(models.DEFAULT_DRAFT, lang)[0])
    if pair.key in ("custom", "offline-self"):
        return w[f"pair_{pair.key}"]
    return w["pair_offline_with"].format(draft=catalogue.drafter_words(pair.draft, lang)[0])


def _decoding(sb) -> None:
    """γ, the sampling settings, the length, the seed, the precision and the baseline, each explained."""
    w = language.words("sidebar")
    sb.slider(w["gamma"], params.GAMMA_MIN, params.GAMMA_MAX, key=keys.setting("gamma"))
    sb.caption(w["gamma_help"])
    sb.slider(w["temperature"], *params.TEMPERATURE_RANGE, step=0.05, key=keys.setting("temperature"))
    sb.caption(w["temperature_help"])
    sb.number_input(w["top_k"], *params.TOP_K_RANGE, step=1, key=keys.setting("top_k"))
    sb.caption(w["top_k_help"].format(off=params.TOP_K_OFF))
    sb.slider(w["top_p"], *params.TOP_P_RANGE, step=0.05, key=keys.setting("top_p"))
    sb.caption(w["top_p_help"].format(off=params.TOP_P_OFF))
    sb.slider(w["max_new"], *params.MAX_NEW_RANGE, key=keys.setting("max_new"))
    sb.caption(w["max_new_help"])
    sb.number_input(w["seed"], *params.SEED_RANGE, step=1, key=keys.setting("seed"))
    sb.caption(w["seed_help"])
    sb.selectbox(w["precision"], params.DTYPE_CHOICES, key=keys.setting("dtype"))
    sb.caption(w["precision_help"])
    sb.selectbox(
        w["weights"], params.WEIGHTS_CHOICES, format_func=lambda v: w[f"weights_{v}"], key=keys.setting("weights")
    )
    sb.caption(w["weights_help"])
    sb.checkbox(w["baseline"], key=keys.setting("baseline"))
    sb.caption(w["baseline_help"])


def _prompt(sb) -> None:
    """The example prompts, the prompt, and Run again under it."""
    w = language.words("sidebar")
    sb.selectbox(
        w["example_prompts"],
        params.EXAMPLE_PROMPTS,  # prompts are the user's text: never translated
        index=None,
        placeholder=w["example_placeholder"],  # short enough for the sidebar at 1280 px
        key=keys.EXAMPLE_PROMPT,
        on_change=_use_example_prompt,
    )
    # No max_chars: with it the browser drops a paste that is too long without a word. A longer prompt is
    # cut here instead, and the sidebar says so, as it does for a link's (params.from_query).
    sb.text_area(w["prompt"], key=keys.setting("prompt"), height=100, on_change=_cut_long_prompt)
    if st.session_state.pop(keys.PROMPT_CUT, False):
        sb.warning(language.words("params")["prompt_too_long"].format(n=params.PROMPT_MAX_CHARS))
    sb.caption(w["prompt_help"])
    # The same Run again, where the prompt was just edited: the one at the top is out of sight by then.
    sb.button(
        w["run_with_prompt"], icon=":material/play_arrow:", on_click=_request_run, width="stretch",
        key=keys.RUN_BUTTON_UNDER_PROMPT,
    )  # fmt: skip


def _cut_long_prompt() -> None:
    """A prompt typed or pasted past params.PROMPT_MAX_CHARS is cut to it (said once, under the box)."""
    key = keys.setting("prompt")
    prompt = st.session_state.get(key)
    if isinstance(prompt, str) and len(prompt) > params.PROMPT_MAX_CHARS:
        st.session_state[key] = prompt[: params.PROMPT_MAX_CHARS]
        st.session_state[keys.PROMPT_CUT] = True


def _write_url(sb, settings: Settings) -> None:
    """The URL becomes these settings (and the stored trace on show) on every run: a copied link
    reproduces the demo. The link as opened stays in keys.URL_QUERY for the pages that read it."""
    query = settings.to_query()
    if language.current() != "en":  # a copied link opens in the language on show
        query["lang"] = language.current()
    loaded = st.session_state.get(keys.LOADED)
    if loaded is not None and loaded.trace_id:  # a run in the replicas' trace store: a reconnect reopens it
        query["trace"] = loaded.trace_id
    if os.environ.get(trace_store.ENV):  # running as replicas (specviz_app/serving/replicas.py)
        with sb:
            _reconnect_beacon()
    st.query_params.from_dict(query)


@st.fragment(run_every=60)
@background.page_drawing
def _reconnect_beacon() -> None:
    """Draws nothing. On reconnecting, Streamlit's page asks the server for a full rerun only if it
    holds a fragment that reruns by itself (else it assumes its session was resumed). Behind the
    replicas' proxy a reconnect can land on another replica, in a new session: that rerun is what
    reopens the stored trace from the URL's ?trace= (specviz_app/serving/replicas.py)."""
