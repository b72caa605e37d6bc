"""Shared fixtures: tiny random Llama models (fast) and the offline default target (slow).

Tests never reach the network: HF_HUB_OFFLINE is set before anything imports transformers.
SPECVIZ_KERNELS=packed fixes the CPU kernels (specviz.engine.kernels) for every test that does not set its own.
SPECVIZ_TIMING_SECONDS=0: the app's runs (AppTest's and the browser tests' servers) time no pair
beyond their own (one solo pair for a batched run), unless a test sets its own budget.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One kernel choice for the whole suite, so bit-identity checks hold on every CPU; the measured
# choice and mixed kernels have their own tests (tests/test_kernels.py).
os.environ.setdefault("SPECVIZ_KERNELS", "packed")
# The tests check what a run shows, not its timing: further pairs (specviz_app/serving/background.py)
# went on decoding in the background, beside the tests that came after, up to the default budget's
# many. The tests of the pairs set a budget of their own (tests/browser/test_trust.py).
os.environ.setdefault("SPECVIZ_TIMING_SECONDS", "0")

import pytest  # noqa: E402

from specviz.engine.toy import PEAKY, tiny_llama  # noqa: E402

# Files that run before the rest, in this order:
# - the fresh-app test first in the browser part, before the workers' own app servers are busy, then
#   the browser files that take longest;
# - then the compute files that take longest, longest first (their times: docs/benchmarks.md,
#   "The test suite's slowest files"). `./dev.sh test` hands files to its workers in collection order
#   (--no-loadscope-reorder), and these go first: xdist's own order (by test count) handed them out
#   last, and one of them kept a worker busy long after the other had finished.
RUN_FIRST = [
    "test_trust.py",
    "test_every_page_bilingual.py",  # the browser part's longest files, longest first
    "test_lesson_projector.py",
    "test_journeys.py",
    "test_offline_exactness.py",
    "test_head_offline.py",
    "test_install.py",
    "test_app_pages.py",
    "test_cli.py",
    "test_self_prompts.py",
    "test_concurrency.py",
    "test_notebook.py",
]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`./dev.sh test`'s compute part, with --dist loadgroup) a test file runs on
    one worker, so its module fixtures (a built wheel, a trained head) are made once. RUN_FIRST's
    files come first, the rest in their usual order."""
    for item in items:
        item.add_marker(pytest.mark.xdist_group(item.path.name))
    rank = {name: i for i, name in enumerate(RUN_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope="session")
def tiny_pair():
    """(target, draft): two different random tiny Llamas over one 16-token vocabulary."""
    return tiny_llama(seed=1, init_scale=PEAKY), tiny_llama(seed=2, init_scale=PEAKY, layers=1)


@pytest.fixture(scope="session")
def offline_target():
    from specviz.engine.models import load_model

    return load_model()


@pytest.fixture(scope="session")
def random_draft_for_offline(offline_target):
    """A random tiny draft sharing the offline target's tokenizer: it disagrees often, which
    exercises every rejection path of the decoder."""
    from specviz.engine.models import LoadedModel

    tiny = tiny_llama(vocab_size=offline_target.logits_width, seed=3, layers=1, init_scale=1.0, hidden=32)
    return LoadedModel(
        name="random-tiny-draft", model=tiny.model, tokenizer=offline_target.tokenizer, device="cpu", dtype="float32"
    )


@pytest.fixture(autouse=True)
def _no_shared_recordings():
    """Each test starts with no shared recordings: specviz_app.serving.shared_runs keeps them per process,
    so a run of one AppTest would otherwise serve the same settings in the next test."""
    from specviz_app.serving import shared_runs

    shared_runs.RUNS.clear()


@pytest.fixture(autouse=True)
def _no_preload_left_running():
    """A test that opened a page (AppTest) started the app's preload thread, which imports transformers
    and loads the default models. The next test in the same process importing transformers at the same
    time saw the package half initialised ("cannot import name 'LlamaConfig' from 'transformers'",
    test_draft_quality then test_draft_report). So a test ends when the preload it started has."""
    yield
    background = sys.modules.get("specviz_app.serving.background")
    if background is not None:
        background.wait_for_preload()


@pytest.fixture(scope="session", autouse=True)
def _background_threads_end_with_the_session():
    """The app's background threads (the model preload, a run's timing pairs) end before Python
    exits: one still inside a torch call at exit aborts the process (exit 134 after every test passed)."""
    yield
    from specviz_app.serving import background

    background.stop_all()


def tiny_target_folder(path, hidden: int = 64, layers: int = 1):
    """A random Llama of `layers` layers over the offline target's tokenizer, saved as a transformers
    folder: a target for the training recipes' tests, which test their logic, not their scale."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from specviz.engine.models import prepare_offline_target

    tokenizer = AutoTokenizer.from_pretrained(prepare_offline_target())
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def wait_for(condition, timeout_s: float = 60.0, poll_s: float = 0.005) -> bool:
    """Wait until `condition()` holds (True) or `timeout_s` passes (False): a test waits for the
    state it needs, not for a number of seconds; the timeout only bounds a hang. poll_s: how often
    to look again (a server's health check: less often, so the polls leave the CPU to the server).
    The one sleep of the suite's waits (tests/test_house_rules.py counts them)."""
    deadline = time.monotonic() + timeout_s
    while not (held := condition()) and time.monotonic() < deadline:
        time.sleep(poll_s)
    return bool(held)


def hold_gate(gate, share: object | None = None):
    """A thread holding a turn at a device gate (specviz.serving.gate) until the returned event is set:
    (release, thread)."""
    import threading

    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with gate.turn(share=share):
            holding.set()
            release.wait(120)  # bounds a hang only: the test releases it

    th = threading.Thread(target=holder)
    th.start()
    assert holding.wait(10)
    return release, th


def wait_until_serving(proc, url: str, log_path, timeout_s: float = 90.0) -> None:
    """Wait until the server `proc` (started to serve `url`, logging to `log_path`) answers its
    health check; fail at once if it exits first, and after `timeout_s` (a hang)."""
    from specviz_app.serving.replicas import healthy

    def up() -> bool:
        if proc.poll() is not None:
            tail = Path(log_path).read_text(errors="replace")[-3000:]
            pytest.fail(f"the server exited with code {proc.returncode}; see {log_path}:\n{tail}")
        return healthy(url)

    if not wait_for(up, timeout_s, poll_s=0.2):
        pytest.fail(f"the server did not answer {url}/_stcore/health within {timeout_s:.0f} s; see {log_path}")


class FakeClock:
    """A clock that moves only when the test moves it. Patched in as a module's `time`
    (monkeypatch.setattr(module, "time", fake_clock)), it stands in for work that takes time (a
    drafting turn, a kernel, a held gate): the test chooses the durations and asserts what the code
    does with them, exactly, whatever the machine's speed."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now

    perf_counter = monotonic

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()
