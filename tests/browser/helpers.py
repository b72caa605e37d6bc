"""Helpers the browser tests share: waiting for the app, reading it, screenshots."""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
# One app server per test process (`./dev.sh test` runs the browser files on two pytest-xdist
# workers), each with its own log: app.log, or app-gw1.log for worker gw1 when run with -n.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
APP_LOG = ARTIFACTS / (f"app-{_WORKER}.log" if _WORKER else "app.log")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
RUN_TIMEOUT_MS = 300_000  # one decode on a busy 2-core CPU, models loaded on first use included
EXCEPTION_BOX = '[data-testid="stException"]'

# The classroom's load tests (a queue that must form behind one long run, a replica stopped mid-class)
# depend on how fast this machine decodes beside three to five browsers: on a 2-core CI machine
# running the rest of the suite they passed and failed by turns. They run on their own, with
# nothing else on the machine, by the two commands docs/reliability.md gives (SPECVIZ_CLASSROOM_TESTS=1).
classroom = pytest.mark.skipif(
    os.environ.get("SPECVIZ_CLASSROOM_TESTS") != "1",
    reason="a classroom load test: SPECVIZ_CLASSROOM_TESTS=1 ./dev.sh test -m classroom, on a quiet machine",
)


def wait_idle(page, timeout_ms: int = RUN_TIMEOUT_MS, sidebar: bool = True) -> None:
    """Wait until the app drew its page and finished the current script run (the 'running' badge is
    gone and no element is left stale from the run before). sidebar=False: a page that hides it (the
    lesson's presenter view)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    if sidebar:
        page.wait_for_selector('[data-testid="stSidebar"]', timeout=timeout_ms)
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=timeout_ms)  # the page itself has drawn
    app = page.locator('[data-testid="stApp"]')
    deadline = time.monotonic() + timeout_ms / 1000
    quiet = 0
    while quiet < 3:  # three calm polls in a row: a rerun that follows a run has had time to start
        calm = app.get_attribute("data-test-script-state") == "notRunning"
        quiet = quiet + 1 if calm and not page.locator('[data-stale="true"]').count() else 0
        if time.monotonic() > deadline:
            raise AssertionError(f"the app was still running after {timeout_ms / 1000:.0f} s")
        page.wait_for_timeout(200)


def wait_presenter_styled(page, timeout_ms: int = RUN_TIMEOUT_MS) -> None:
    """Wait until the lesson's presenter view is styled for the projector. Its CSS comes in an st.html
    element, which the browser draws with a script of its own, loaded on first use: on a slow machine
    the rest of the step was drawn before it, at Streamlit's own paddings (957 px tall instead of 720,
    a clean-clone CI run). The CSS's first rule hides the app's header: wait for that."""
    page.wait_for_function(
        """() => { const header = document.querySelector('header[data-testid="stHeader"]');
                   return !header || getComputedStyle(header).display === 'none'; }""",
        timeout=timeout_ms,
    )


# Every message the app's server sends a page, counted as it arrives: a context whose pages run this
# first (`watch_server`) lets `act` see that the server answered an action, even when the script
# run it started was too quick for the page ever to draw its "running" state.
COUNT_SERVER_MESSAGES = """(() => {
    const Native = window.WebSocket;
    window.__svMessages = 0;
    window.WebSocket = class extends Native {
        constructor(...args) {
            super(...args);
            this.addEventListener('message', () => { window.__svMessages += 1; });
        }
    };
})();"""


def watch_server(context):
    """Count the server's messages in every page of `context` (see COUNT_SERVER_MESSAGES); returns it."""
    context.add_init_script(COUNT_SERVER_MESSAGES)
    return context


# Counts the script runs the page has seen start, from the moment it is installed: a MutationObserver
# on the app's script-state attribute (Streamlit sets it to "running" while the script runs).
_WATCH_RUNS = """() => {
    if (window.__svWatch === undefined) {
        window.__svStarted = 0;
        window.__svWatch = new MutationObserver(records => {
            // A record holds the value before the change; the value after it is the next record's
            // old value, or the attribute as it is now for the last one.
            records.forEach((r, i) => {
                const after = i + 1 < records.length ? records[i + 1].oldValue
                    : r.target.getAttribute('data-test-script-state');
                if (after === 'running') window.__svStarted += 1;
            });
        });
        window.__svWatch.observe(document.documentElement, {
            subtree: true, attributes: true, attributeOldValue: true,
            attributeFilter: ['data-test-script-state'],
        });
    }
    return [window.__svStarted, window.__svMessages ?? 0];
}"""
RERUN_START_MS = 15_000  # an action that changes nothing starts no run: past this, stop waiting for one


def act(page, action, timeout_ms: int = RUN_TIMEOUT_MS, start_ms: int = RERUN_START_MS) -> None:
    """Do `action()` (a click, a key, a filled field) and wait for the script run it starts to finish.

    Waits for the run itself, not for luck: a run must have started after the action (the page drew
    the running state, or the server sent a message) before the calm state counts, so a slow server
    only makes the test slower, never red. An action that starts no run (a value set to what it
    was, the page already open) waits `start_ms`, then goes on: helpers avoid those."""
    started, messages = page.evaluate(_WATCH_RUNS)
    action()
    answered = f"() => window.__svStarted > {started} || (window.__svMessages ?? 0) > {messages}"
    try:
        page.wait_for_function(answered, timeout=start_ms, polling=50)
    except Exception:  # noqa: BLE001 - playwright's TimeoutError: nothing ran, nothing to wait for
        pass
    wait_idle(page, timeout_ms)


def assert_no_traceback(page) -> None:
    """No raw traceback or Streamlit exception box on the page."""
    assert page.locator(EXCEPTION_BOX).count() == 0, page.locator(EXCEPTION_BOX).first.inner_text()
    text = page.locator("body").inner_text()
    assert "Traceback" not in text, text[:2000]


# Full-page screenshots of every step the tests walk through, for a person to read: about a hundred
# PNGs of tall pages, whose encoding is CPU the suite's two cores need, so only when asked
# (SPECVIZ_SCREENSHOTS=1 ./dev.sh test -m browser). A failed test's pages are always saved
# (tests/browser/conftest.py, new_page), so a red CI log comes with what the page showed.
SCREENSHOTS_WANTED = os.environ.get("SPECVIZ_SCREENSHOTS") == "1"


def shot(page, name: str, always: bool = False) -> Path | None:
    """Save a full-page screenshot as a test artefact, when SPECVIZ_SCREENSHOTS=1 (or `always`)."""
    if not (SCREENSHOTS_WANTED or always):
        return None
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{re.sub(r'[^a-z0-9_-]+', '-', name.lower())}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def sidebar_text(page) -> str:
    return page.locator('[data-testid="stSidebar"]').inner_text()


def goto_page(page, title: str) -> None:
    """Open a page through the sidebar navigation (keeps the session, unlike loading its URL)."""
    link = page.locator('[data-testid="stSidebarNav"] a', has_text=title).first
    if link.get_attribute("aria-current") == "page":  # already open: a click starts no run
        wait_idle(page)
    else:
        act(page, link.click)
    assert_no_traceback(page)


# The pages that run the sidebar's settings: on each the Run button must be in sight at 1400×1000 (issue 24).
RUN_PAGES = ["Playground", "Step inspector", "Timeline", "Acceptance", "Traces", "Theory", "Sweep", "Drafters"]


def run_button_in_sight(page, height: int) -> bool:
    """Whether the sidebar's Run button lies wholly inside a viewport `height` pixels tall, unscrolled.
    Read once the page has finished drawing: a page still being drawn can have no button yet, or one
    that a stale element above it pushes down for a moment."""
    wait_idle(page)
    button = page.locator('[data-testid="stSidebar"] button', has_text="Run").first
    button.wait_for(state="visible", timeout=RUN_TIMEOUT_MS)
    box = button.bounding_box()
    return bool(box) and box["y"] >= 0 and box["y"] + box["height"] <= height


def click_run(page, timeout_ms: int = RUN_TIMEOUT_MS) -> None:
    act(page, page.locator('[data-testid="stSidebar"] button', has_text="Run").first.click, timeout_ms)
    assert_no_traceback(page)


def showing(page) -> str:
    """The 'Showing: ...' line above every page: which trace is on show."""
    loc = page.locator('[data-testid="stCaptionContainer"]', has_text="Showing:").first
    try:
        return loc.inner_text(timeout=10_000)  # waits for the line to be drawn
    except Exception:  # noqa: BLE001 - playwright's TimeoutError: a page with nothing on show
        return ""


def slider_input(page, label: str):
    return page.locator(f'[data-testid="stSidebar"] input[type="range"][aria-label="{label}"]')


def slider_value(page, label: str) -> float:
    return float(slider_input(page, label).get_attribute("aria-valuetext") or "nan")


def nudge_slider(page, label: str, key: str, times: int = 1) -> None:
    """Move a sidebar slider with the keyboard, as a user can (ArrowRight, ArrowLeft, Home, End)."""
    thumb = slider_input(page, label)
    thumb.focus()
    for _ in range(times):
        page.keyboard.press(key)
    act(page, lambda: page.keyboard.press("Tab"))  # the value is sent when the thumb lets go


def choose(page, label: str, option: str) -> None:
    """Pick an option of a sidebar selectbox by its visible text."""
    box = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]', has_text=label)
    box.locator("input").first.click()
    page.keyboard.type(option)  # the list is virtual: filter it, then take the first match
    act(page, page.locator('[role="option"]', has_text=option).first.click)


def type_into(page, label: str, text: str) -> None:
    """Replace the text of a sidebar text input or text area and commit it (as leaving the field does)."""
    field = page.locator('[data-testid="stSidebar"]').get_by_label(label, exact=True)
    field.fill(text)
    act(page, lambda: field.press("Tab"))


def download(page, label: str) -> bytes:
    """Click a download button on the main page and return the file it sends."""
    button = page.locator('[data-testid="stDownloadButton"] button', has_text=label).first
    with page.expect_download(timeout=60_000) as info:
        button.click()
    path = info.value.path()
    data = Path(path).read_bytes()
    wait_idle(page)
    return data


def upload(page, files: list[tuple[str, bytes]], refused: bool = False) -> None:
    """Put files into the Traces page's uploader and press 'Open the uploaded trace' if it appears.
    refused=True: the browser itself refuses the files (too large), so no script run follows."""
    # From files on disk, as a user picks them: Chromium reads them itself (they stay until the page
    # has sent them). Handed over as buffers, each went base64-encoded through Playwright's driver,
    # which spent 11 CPU-s on the 25 MB file of the bad-upload test.
    with tempfile.TemporaryDirectory(prefix="specviz-upload-") as folder:
        paths = [Path(folder) / name for name, _ in files]
        for path, (_, data) in zip(paths, files, strict=True):
            path.write_bytes(data)
        dropzone = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
        if refused:
            dropzone.set_input_files(paths)
            page.locator('[data-testid="stFileChipIconError"]').first.wait_for()  # the refused file's chip
            return
        act(page, lambda: dropzone.set_input_files(paths), start_ms=60_000)  # large files take a while to send
    button = page.locator('[data-testid="stMain"] button', has_text="Open the uploaded trace")
    if button.count():
        act(page, button.first.click)
    assert_no_traceback(page)


def clear_uploads(page, runs: bool = True) -> None:
    """Remove the files the uploader holds (each has a delete button). runs=False: files the
    browser refused, whose removal starts no script run."""
    for _ in range(10):
        buttons = page.locator('[data-testid="stFileChipDeleteBtn"] button')
        if not buttons.count():
            break
        if runs:
            act(page, buttons.first.click)
        else:
            left = buttons.count()
            buttons.first.click()
            page.wait_for_function(  # the chip is gone: nothing else happens
                f"() => document.querySelectorAll('[data-testid=\"stFileChipDeleteBtn\"] button').length < {left}"
            )


def errors(page) -> list[str]:
    return [e.inner_text() for e in page.locator('[data-testid="stAlertContentError"]').all()]


def warnings(page) -> list[str]:
    return [e.inner_text() for e in page.locator('[data-testid="stAlertContentWarning"]').all()]


def nav_titles(page) -> list[str]:
    return [a.inner_text().split("\n")[-1].strip() for a in page.locator('[data-testid="stSidebarNavLink"]').all()]


def stream_text(page) -> str:
    """The coloured token stream of the page (fails with the page text when there is none)."""
    stream = page.locator(".sv-stream").first
    try:
        stream.wait_for(timeout=60_000)  # drawn by the script run that may still be sending it
    except Exception as e:  # noqa: BLE001 - playwright's TimeoutError, said with the page's text
        raise AssertionError(f"no token stream on the page:\n{main_text(page)[:3000]}") from e
    return stream.inner_text()


def save_foreign_vocab_model(folder: Path) -> Path:
    """Save a tiny causal LM whose tokenizer is not the default target's (a 40-word vocabulary).

    Used as a custom draft: loading it works offline (it is a local folder), the vocabulary check
    must then refuse it.
    """
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<unk>", "<eos>"] + [f"w{i}" for i in range(38)]
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>")
    config = LlamaConfig(
        vocab_size=len(words),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        eos_token_id=1,
        bos_token_id=None,
        pad_token_id=None,
    )
    folder.mkdir(parents=True, exist_ok=True)
    LlamaForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder
