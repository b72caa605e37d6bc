"""The Streamlit app: app.py routes the pages (app_pages/), sharing the sidebar (sidebar.py, its
settings in params.py), the trace on show (session.py), the pieces pages draw (render.py), the
language (language.py) and every session-state key (keys.py). runs/ is where the trace on show
comes from, controls/ a page's own state, serving/ the server around the pages.

Kept outside `specviz/` because it imports streamlit and the library must not. `params` is the
exception: it is pure Python (settings and URL validation), so it is tested without streamlit.
"""
