"""The sidebar every page shares: run settings, mirrored into the URL, and the Run button.

Widgets keep their values in st.session_state under "s_<field>". The first run of a session
reads the URL (validated by specviz_app.params); every run writes the settings back to the URL so
a copied link reproduces the demo, seed included.
"""

from __future__ import annotations

import os

import streamlit as st

from specviz.traces import trace_store
from specviz_app import background, keys, params
from specviz_app.params import Settings


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


def _check_pair(where, target: str, draft: str) -> None:
    """Load a custom pair and compare the vocabularies, with the library's own messages."""
    from specviz.drafters import needs_no_model
    from specviz.engine import models
    from specviz.errors import SpecvizError
    from specviz_app import loading

    target, draft = target.strip(), draft.strip() or models.NGRAM_DRAFT
    if not target:
        where.error("Type a target model name first.")
        return
    try:
        with where.spinner("Loading the models…"):
            loaded = loading.get_model(target)
            if needs_no_model(draft):  # a strategy or a head: it drafts in the target's own vocabulary
                where.success(f"The {draft} draft uses the target's own vocabulary ({loaded.vocab_size} tokens).")
                return
            models.check_vocabulary(loaded, loading.get_model(draft))
        where.success(f"Same vocabulary: {loaded.vocab_size} tokens. This pair can decode.")
    except SpecvizError as exc:
        where.error(str(exc))


def _algorithm(sb, pair: params.Pair) -> None:
    """The drafting preset beside the fastest default: the paper's Algorithm 1, one click away."""
    from specviz.config import ALGORITHMS
    from specviz.teaching import glossary

    names = {"fastest": glossary.ALGORITHM_FASTEST, "paper": glossary.ALGORITHM_PAPER}
    if st.session_state[keys.setting("algorithm")] not in ALGORITHMS:
        st.session_state[keys.setting("algorithm")] = ALGORITHMS[0]
    sb.radio(
        "Algorithm",
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
        sb.caption(f"{chosen.definition[0].upper()}{chosen.definition[1:]}.")
    else:
        sb.caption("This draft already drafts one chain (no tree, no early stop), whichever algorithm is chosen.")


def init_from_url() -> None:
    """On the first run of a session: settings from the URL (validated), messages for what was refused."""
    if keys.INITIALISED in st.session_state:
        return
    st.session_state[keys.INITIALISED] = True
    query = {k: st.query_params.get_all(k) for k in st.query_params.keys()}
    st.session_state[keys.URL_QUERY] = query  # the link as opened: pages with their own parameters read it (lesson)
    settings, messages = params.from_query(query)
    # Only run settings make a link "a demo to reproduce"; a page's own parameters (the lesson's
    # ?step=) must not start a decode on the first visit.
    st.session_state[keys.URL_GIVEN] = bool(set(query) & set(params.field_names()))
    st.session_state[keys.URL_MESSAGES] = messages
    _write_widget_state(settings)


def render() -> Settings:
    """Draw the settings; return them. Clicking Run sets st.session_state[keys.RUN_REQUESTED]."""
    _restore_widget_state()
    sb = st.sidebar
    for msg in st.session_state.get(keys.URL_MESSAGES, []):
        sb.warning(f"From the link: {msg}")
    sb.header("Run settings")
    # At the top, so it is in sight without scrolling on every page (the prompt sits at the bottom).
    sb.button(
        "Run", icon=":material/play_arrow:", type="primary", on_click=_request_run, width="stretch", key=keys.RUN_BUTTON
    )
    sb.caption("Decodes the prompt below with these settings, then the target alone for the speedup.")
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
    if st.session_state[keys.setting("pair")] not in options:
        st.session_state[keys.setting("pair")] = "offline"
    sb.selectbox(
        "Model pair (target / draft)", list(options), format_func=lambda k: options[k].label, key=keys.setting("pair")
    )
    pair = options[st.session_state[keys.setting("pair")]]
    if pair.key == "custom":
        sb.text_input("Target model (Hugging Face name)", key=keys.setting("target"), placeholder="owner/name")
        sb.text_input(
            "Draft model, or ngram / self", key=keys.setting("draft"), placeholder="owner/name, ngram or self"
        )
        sb.caption("Both must share one tokenizer; Run checks the vocabularies first.")
        if sb.button("Check the pair", icon=":material/fact_check:", key=keys.CHECK_PAIR):
            _check_pair(sb, st.session_state[keys.setting("target")], st.session_state[keys.setting("draft")])
    elif pair.online:
        sb.caption(f"Needs internet: downloads {pair.target} and {pair.draft} on first use.")
    else:
        sb.caption("Target SmolLM2-135M-Instruct, run on this machine: no internet needed.")
        if pair.key == "offline-self":
            sb.caption("The target drafts for itself: q = p, so every draft passes, yet nothing is saved.")
    return pair


def _decoding(sb) -> None:
    """γ, the sampling settings, the length, the seed, the precision and the baseline, each explained."""
    sb.slider("γ (draft tokens per iteration)", params.GAMMA_MIN, params.GAMMA_MAX, key=keys.setting("gamma"))
    sb.caption("More drafts win more when the draft is good and waste more when it is not.")
    sb.slider("Temperature", *params.TEMPERATURE_RANGE, step=0.05, key=keys.setting("temperature"))
    sb.caption("0 is greedy (always the most likely token); higher is more random. Applied to p and q alike.")
    sb.number_input("Top-k", *params.TOP_K_RANGE, step=1, key=keys.setting("top_k"))
    sb.caption(f"Keep only the k most likely tokens before sampling ({params.TOP_K_OFF} = off).")
    sb.slider("Top-p", *params.TOP_P_RANGE, step=0.05, key=keys.setting("top_p"))
    sb.caption(f"Keep the fewest tokens whose probability adds up to top-p ({params.TOP_P_OFF} = off).")
    sb.slider("Max new tokens", *params.MAX_NEW_RANGE, key=keys.setting("max_new"))
    sb.caption("Length of the answer; the offline target needs about 0.05 s per token on a 2-core CPU.")
    sb.number_input("Seed", *params.SEED_RANGE, step=1, key=keys.setting("seed"))
    sb.caption("The same seed and settings give the same trace, token for token.")
    sb.selectbox("Precision", params.DTYPE_CHOICES, key=keys.setting("dtype"))
    sb.caption(
        "float32: greedy output identical to the target alone, token for token. bfloat16: the target's weights in "
        "half the bytes, so a slightly different target: faster on some CPUs (not always than float32), and where "
        "the two best tokens nearly tie it may pick the other one (the run says where)."
    )
    sb.checkbox("Also run the target alone (baseline)", key=keys.setting("baseline"))
    sb.caption("Needed for the speedup and the timeline comparison; doubles the run time.")


def _prompt(sb) -> None:
    """The example prompts, the prompt, and Run again under it."""
    sb.selectbox(
        "Example prompts",
        params.EXAMPLE_PROMPTS,
        index=None,
        placeholder="Pick one to fill the prompt",  # short enough for the sidebar at 1280 px
        key=keys.EXAMPLE_PROMPT,
        on_change=_use_example_prompt,
    )
    sb.text_area("Prompt", key=keys.setting("prompt"), max_chars=params.PROMPT_MAX_CHARS, height=100)
    sb.caption("Sent to the target as a chat message; shown everywhere as plain text.")
    # The same Run again, where the prompt was just edited: the one at the top is out of sight by then.
    sb.button(
        "Run with this prompt", icon=":material/play_arrow:", on_click=_request_run, width="stretch",
        key=keys.RUN_BUTTON_UNDER_PROMPT,
    )  # fmt: skip


def _write_url(sb, settings: Settings) -> None:
    """The URL becomes these settings (and the stored trace on show) on every run: a copied link
    reproduces the demo. The link as opened stays in keys.URL_QUERY for the pages that read it."""
    query = settings.to_query()
    loaded = st.session_state.get(keys.LOADED)
    if loaded is not None and loaded.trace_id:  # a run in the replicas' trace store: a reconnect reopens it
        query["trace"] = loaded.trace_id
    if os.environ.get(trace_store.ENV):  # running as replicas (specviz_app/replicas.py)
        with sb:
            _reconnect_beacon()
    st.query_params.from_dict(query)


@st.fragment(run_every=60)
@background.page_drawing
def _reconnect_beacon() -> None:
    """Draws nothing. On reconnecting, Streamlit's page asks the server for a full rerun only if it
    holds a fragment that reruns by itself (else it assumes its session was resumed). Behind the
    replicas' proxy a reconnect can land on another replica, in a new session: that rerun is what
    reopens the stored trace from the URL's ?trace= (specviz_app/replicas.py)."""
