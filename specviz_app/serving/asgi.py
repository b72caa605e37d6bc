"""The app as `specviz app` serves it: the page script specviz_app/app.py with the server's routes
(specviz_app/serving/server.py: /metrics; specviz_app/serving/health.py: /healthz, and 404 for a path that is no
page), as an `st.App`.

`streamlit run` finds `app = st.App(...)` in the file it is given and serves it with uvicorn, so
launch.APP_SCRIPT is this file; the root app.py is the same for `streamlit run app.py` in a checkout.
The page script's path is relative to this file: specviz_app/app.py, one folder up.
"""

import streamlit as st
from starlette.middleware import Middleware

from specviz_app.serving import health
from specviz_app.serving.malloc import limit_arenas
from specviz_app.serving.server import ROUTES

limit_arenas()  # before the sessions' threads allocate: a class's memory (specviz_app/serving/malloc.py)
app = st.App("../app.py", routes=[*ROUTES, *health.ROUTES], middleware=[Middleware(health.UnknownPathIs404)])
