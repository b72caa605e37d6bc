"""`python -m specviz_app [streamlit options]`: start the app (what `./dev.sh app` runs)."""

import sys

from specviz_app.serving.launch import start_app

raise SystemExit(start_app(sys.argv[1:]))
