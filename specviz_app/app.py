"""specviz: the Streamlit app. Routes the pages and draws the frame they share; no logic here.

Run with `specviz app` (installed), `./dev.sh app` or `streamlit run app.py` (a checkout):
specviz_app/launch.py holds the server settings.
"""

import streamlit as st

from specviz_app import background, keys, opening, running, sidebar
from specviz_app.render import PAGES_DIR

st.set_page_config(page_title="specviz: speculative decoding, made visible", page_icon="🔎", layout="wide")

PAGES = [
    st.Page(PAGES_DIR / "playground.py", title="Playground", icon=":material/play_circle:", default=True),
    st.Page(PAGES_DIR / "inspector.py", title="Step inspector", icon=":material/biotech:"),
    st.Page(PAGES_DIR / "timeline.py", title="Timeline", icon=":material/timeline:"),
    st.Page(PAGES_DIR / "acceptance.py", title="Acceptance", icon=":material/bar_chart:"),
    st.Page(PAGES_DIR / "traces.py", title="Traces", icon=":material/folder_open:"),
    st.Page(PAGES_DIR / "theory.py", title="Theory", icon=":material/functions:"),
    st.Page(PAGES_DIR / "sweep.py", title="Sweep", icon=":material/grid_on:"),
    st.Page(PAGES_DIR / "drafts.py", title="Drafters", icon=":material/sports_score:"),
    st.Page(PAGES_DIR / "workloads.py", title="Workloads", icon=":material/work:"),
    st.Page(PAGES_DIR / "serving.py", title="Serving", icon=":material/dns:"),
    st.Page(PAGES_DIR / "lab.py", title="Distribution lab", icon=":material/science:"),
    st.Page(PAGES_DIR / "lesson.py", title="Lesson", icon=":material/school:"),
]
# A script run in progress: the speedup's timing pairs wait for it and time again a pair it met
# (specviz_app/background.py), since it stalls the decode being timed.
with background.PAGE_ACTIVITY.drawing():
    page = st.navigation(PAGES)
    background.preload(running.preload_defaults)  # the first Run should find the default models loaded

    settings = sidebar.render()
    st.session_state[keys.SETTINGS] = settings
    opening.open_first_visit(settings, may_decode=page.url_path != "lesson")  # a lesson link never decodes
    if st.session_state.pop(keys.RUN_REQUESTED, False):
        running.run(settings)
    if error := st.session_state.pop(keys.RUN_ERROR, None):
        st.error(f"{error}\n\nNothing was lost: the pages still show the previous trace, if there was one.")

    page.run()
