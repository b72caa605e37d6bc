"""specviz: the Streamlit app. Routes the pages and draws the frame they share; no logic here.

Run with `specviz app` (installed) or `./dev.sh app` (a checkout): specviz_app/launch.py holds
the server settings.
"""

import streamlit as st

from specviz_app import keys, sidebar, state

st.set_page_config(page_title="specviz: speculative decoding, made visible", page_icon="🔎", layout="wide")

PAGES = [
    st.Page("app_pages/playground.py", title="Playground", icon=":material/play_circle:", default=True),
    st.Page("app_pages/inspector.py", title="Step inspector", icon=":material/biotech:"),
    st.Page("app_pages/timeline.py", title="Timeline", icon=":material/timeline:"),
    st.Page("app_pages/acceptance.py", title="Acceptance", icon=":material/bar_chart:"),
    st.Page("app_pages/traces.py", title="Traces", icon=":material/folder_open:"),
    st.Page("app_pages/theory.py", title="Theory", icon=":material/functions:"),
    st.Page("app_pages/sweep.py", title="Sweep", icon=":material/grid_on:"),
    st.Page("app_pages/drafts.py", title="Drafters", icon=":material/sports_score:"),
    st.Page("app_pages/lab.py", title="Distribution lab", icon=":material/science:"),
    st.Page("app_pages/lesson.py", title="Lesson", icon=":material/school:"),
]
page = st.navigation(PAGES)

settings = sidebar.render()
st.session_state[keys.SETTINGS] = settings
state.open_first_visit(settings, may_decode=page.url_path != "lesson")  # a lesson link never decodes
if st.session_state.pop(keys.RUN_REQUESTED, False):
    state.run(settings)
if error := st.session_state.pop(keys.RUN_ERROR, None):
    st.error(f"{error}\n\nNothing was lost: the pages still show the previous trace, if there was one.")

page.run()
