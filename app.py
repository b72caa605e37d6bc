"""`streamlit run app.py` from the repository root serves the specviz app (specviz_app/app.py).

This file only runs that script, on every rerun, as Streamlit runs a main script. The packaged
command `specviz app` (specviz_app/launch.py) serves the same script with the same server
settings; for this way Streamlit reads them from .streamlit/config.toml beside this file, which a
test keeps equal to launch.SERVER_SETTINGS.
"""

import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).resolve().parent / "specviz_app" / "app.py"), run_name="__main__")
