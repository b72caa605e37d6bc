"""`streamlit run app.py` from the repository root serves the specviz app (specviz_app/app.py), with
the server's routes beside its pages (specviz_app/server.py: /metrics; specviz_app/health.py:
/healthz, and 404 for a path that is no page).

`streamlit run` finds `app = st.App(...)` here and serves it (Streamlit's Starlette server, with
uvicorn); Streamlit then runs specviz_app/app.py on every rerun, as a main script. The packaged
command `specviz app` (specviz_app/launch.py) serves the same st.App (specviz_app/asgi.py) with the
same server settings; for this way Streamlit reads them from .streamlit/config.toml beside this file,
which a test keeps equal to launch.SERVER_SETTINGS.
"""

import streamlit as st
from starlette.middleware import Middleware

from specviz_app import health
from specviz_app.malloc import limit_arenas
from specviz_app.server import ROUTES

limit_arenas()  # before the sessions' threads allocate: a class's memory (specviz_app/malloc.py)
app = st.App("specviz_app/app.py", routes=[*ROUTES, *health.ROUTES], middleware=[Middleware(health.UnknownPathIs404)])
