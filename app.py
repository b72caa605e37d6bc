"""`streamlit run app.py` from the repository root serves the specviz app (specviz_app/app.py), with
the server's routes beside its pages (specviz_app/serving/server.py: /metrics; specviz_app/serving/health.py:
/healthz, and 404 for a path that is no page).

`streamlit run` finds `app = st.App(...)` here and serves it (Streamlit's Starlette server, with
uvicorn); Streamlit then runs specviz_app/app.py on every rerun, as a main script. The packaged
command `specviz app` (specviz_app/serving/launch.py) serves the same st.App (specviz_app/serving/asgi.py) with the
same server settings; for this way Streamlit reads them from .streamlit/config.toml beside this file,
which a test keeps equal to launch.SERVER_SETTINGS.
"""

import streamlit as st
from starlette.middleware import Middleware

from specviz_app.serving import health
from specviz_app.serving.malloc import limit_arenas
from specviz_app.serving.server import ROUTES

limit_arenas()  # before the sessions' threads allocate: a class's memory (specviz_app/serving/malloc.py)
app = st.App("specviz_app/app.py", routes=[*ROUTES, *health.ROUTES], middleware=[Middleware(health.UnknownPathIs404)])
