"""Starting the app: the `specviz` console command and `python -m specviz_app`.

`specviz app [streamlit options]` starts the Streamlit app from any folder, with the app's server
settings (this module is their one home: an installed package has no `.streamlit/config.toml`
beside it). Every other `specviz` subcommand (generate, validate, bench, train-draft, train-head)
is the library's command line, `specviz.cli`. Nothing here imports streamlit: the command replaces
itself with `python -m streamlit run`, so a notebook install without the `app` extra still gets
the other commands.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

# The st.App that serves the page script specviz_app/app.py with the server's routes (/metrics).
APP_SCRIPT = Path(__file__).resolve().parent / "asgi.py"
SOURCE_ROOT = APP_SCRIPT.parents[2]  # a source checkout, when it holds pyproject.toml

SERVER_SETTINGS = {
    "browser.gatherUsageStats": "false",  # no telemetry: the app must work offline
    "theme.base": "light",  # the token colours are chosen for a light background
    "client.toolbarMode": "minimal",
    # Watching files for edits floods the log from a virtual environment ("Inotify queue
    # overflowed", thousands of lines: docs/benchmarks.md, "Figures once kept in code comments",
    # "The app's server"); the app is run, not edited.
    "server.fileWatcherType": "none",
    # MB, for every upload: more than a trace may be (20 MB, specviz.traces.validation), so that a trace too
    # large reaches the Traces page and is refused there with the limit and what to do (issue 48, E3)
    "server.maxUploadSize": "50",
    "server.headless": "true",  # print the address instead of trying to open a browser
    # Streamlit forces a full garbage collection after every script run, fragments included: with the
    # models loaded that holds the GIL long, once a second while a run's pairs are timed
    # (render.timing_status), and it stalled the very decodes being timed, so identical runs read
    # speedups far apart (docs/benchmarks.md, "Figures once kept in code comments", "The app's
    # server"). Python's own collector still runs as usual.
    "runner.postScriptGC": "false",
    # Magic (drawing a bare expression) parses each page into an AST object and compiles that. On
    # Python 3.11 the AST converter's recursion count is shared by threads, and a page's first visit
    # failed with "SystemError: AST constructor recursion depth mismatch" while other threads worked
    # (python/cpython#106905). No page uses magic; compiling the source text makes no AST objects.
    "runner.magicEnabled": "false",
}

USAGE = """usage: specviz app [streamlit options, e.g. --server.port 8502]
       specviz generate|validate|bench|train-draft|train-head ...   (specviz <command> --help)"""


def app_command(extra: list[str] | None = None) -> list[str]:
    """The command that serves the app; options in `extra` override the defaults above."""
    cmd = [sys.executable, "-m", "streamlit", "run", str(APP_SCRIPT)]
    for key, value in SERVER_SETTINGS.items():
        cmd += [f"--{key}", value]
    return cmd + list(extra or [])


def app_environment() -> dict[str, str]:
    """The child's environment: from a source checkout, the checkout must be importable."""
    env = dict(os.environ)
    if (SOURCE_ROOT / "pyproject.toml").is_file():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SOURCE_ROOT), env.get("PYTHONPATH")]))
    return env


def start_app(extra: list[str]) -> int:
    if importlib.util.find_spec("streamlit") is None:
        print("specviz app needs Streamlit, which this install lacks: pip install 'specviz[app]'", file=sys.stderr)
        return 2
    cmd = app_command(extra)
    # Become the server (exec, not a child process): a stop signal then reaches Streamlit itself
    # instead of leaving it running without its parent.
    os.execve(cmd[0], cmd, app_environment())
    return 0  # not reached


def main(argv: list[str] | None = None) -> int:
    """The `specviz` console command."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] == "app":
        return start_app(argv[1:])
    from specviz.cli import main as cli_main

    return cli_main(argv)
