"""specviz: the Streamlit app. Routes the pages and draws the frame they share; no logic here.

Run with `specviz app` (installed), `./dev.sh app` or `streamlit run app.py` (a checkout):
specviz_app/serving/launch.py holds the server settings.
"""

import streamlit as st

from specviz_app import keys, language, render, sidebar
from specviz_app.render import PAGES_DIR
from specviz_app.runs import opening, running
from specviz_app.serving import background, reconnect

sidebar.init_from_url()  # the link's settings and language, before anything is drawn in a language
reconnect.note_reconnection()  # a browser back from a lost replica's session: /metrics counts it
st.set_page_config(page_title=language.words("app")["page_title"], page_icon="🔎", layout="wide")

# Each page's file and icon; its title is the catalogue's "page_<file>" in the language on show.
PAGES = [
    ("playground", ":material/play_circle:"),
    ("inspector", ":material/biotech:"),
    ("timeline", ":material/timeline:"),
    ("acceptance", ":material/bar_chart:"),
    ("traces", ":material/folder_open:"),
    ("theory", ":material/functions:"),
    ("sweep", ":material/grid_on:"),
    ("drafts", ":material/sports_score:"),
    ("workloads", ":material/work:"),
    ("serving", ":material/dns:"),
    ("lab", ":material/science:"),
    ("lesson", ":material/school:"),
]
# A script run in progress: the speedup's timing pairs wait for it and time again a pair it met
# (specviz_app/serving/background.py), since it stalls the decode being timed.
with background.PAGE_ACTIVITY.drawing():
    w = language.words("app")  # the language as it stands before the sidebar's control is drawn
    pages = [
        st.Page(
            PAGES_DIR / f"{name}.py", title=w[f"page_{name}"], icon=icon, default=name == "playground",
            url_path="home" if name == "playground" else None,  # served at "/"; its own name is the page below
        )
        for name, icon in PAGES
    ]  # fmt: skip
    # The default page is served at "/", so /playground (a name /healthz lists, and a link may use) would be
    # "Page not found": a hidden page there opens the Playground, the link's settings already read.
    playground = pages[0]
    to_playground = st.Page(
        lambda: st.switch_page(playground), title=w["page_playground"], url_path="playground", visibility="hidden"
    )
    pages.append(to_playground)
    page = st.navigation(pages)
    background.preload(running.preload_defaults)  # the first Run should find the default models loaded

    settings = sidebar.render()
    render.uploaders_in_language()
    render.cards_in_view()
    st.session_state[keys.SETTINGS] = settings
    opening.open_first_visit(settings, may_decode=page.url_path != "lesson")  # a lesson link never decodes
    if st.session_state.pop(keys.RUN_REQUESTED, False):
        running.run(settings)
    if error := st.session_state.pop(keys.RUN_ERROR, None):
        st.error(language.words("app")["run_failed"].format(error=error))

    page.run()
