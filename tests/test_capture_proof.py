"""The captured CUDA step proves itself before it serves (specviz.engine.capture_proof), tested on the CPU:
a stand-in capture planted through the same code (models.proven_static, the StaticLlama it proves) is
kept when it computes what the eager static step computes, and a faulty one, or one that fails, is
refused: the load falls back to transformers' eager forward, counted for /metrics, named in the trace's
config and on the page, in both languages."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specviz.config import DecodeOptions
from specviz.engine import capture_proof
from specviz.engine.models import proven_static
from specviz.engine.static_llama import static_step
from specviz.engine.toy import tiny_llama


class _Replay:
    """What cuda_steps.CapturedGraph gives: run(ids, positions, local) -> (logits, features)."""

    def __init__(self, lean, cache, t, feature_layers, shift: float):
        self.args, self.shift = (lean, cache, t, feature_layers), shift

    def run(self, ids, positions, local):
        lean, cache, t, feature_layers = self.args
        logits, features = static_step(lean, cache, ids, positions, local, t, feature_layers)
        if self.shift:  # a faulty graph: one logit of the last row far off (a stale buffer, another row's cache)
            logits = logits.clone()
            logits[-1, int(logits[-1].argmin())] += self.shift
        return logits, features


def stand_in(shift: float = 0.0, fails: bool = False):
    """A capture (as cuda_steps.captured_step) that runs anywhere: the eager step itself, or a faulty one."""

    def capture(lean, cache, t, feature_layers):
        if fails:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return _Replay(lean, cache, t, feature_layers, shift)

    capture.runs_anywhere = True
    return capture


@pytest.fixture(scope="module")
def model():
    return tiny_llama(vocab_size=64, seed=7, layers=2, init_scale=10.0, hidden=32).model


def test_a_capture_that_computes_the_eager_step_is_kept(model, monkeypatch):
    monkeypatch.delenv("SPECVIZ_CUDA_STEP", raising=False)
    static, note = proven_static(model, stand_in())
    assert static is not None and note == ""


@pytest.mark.parametrize(
    ("capture", "said"),
    [(stand_in(shift=100.0), "argmax differs"), (stand_in(shift=2.0), "differ from the eager step's by 2"),
     (stand_in(fails=True), "failed: RuntimeError: CUDA error")],
)  # fmt: skip
def test_a_faulty_capture_falls_back_to_the_eager_forward(model, monkeypatch, capture, said):
    monkeypatch.delenv("SPECVIZ_CUDA_STEP", raising=False)
    before = len(capture_proof.FALLBACKS)
    static, note = proven_static(model, capture)
    assert static is None and said in note, note
    assert capture_proof.FALLBACKS[before:] == [note]  # /metrics' cuda_step_fallbacks counts it


def test_the_environment_forces_either_path(model, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CUDA_STEP", "captured")
    static, note = proven_static(model, stand_in(shift=100.0))  # no proof: served as it is
    assert static is not None and note == ""
    monkeypatch.setenv("SPECVIZ_CUDA_STEP", "eager")
    assert proven_static(model, stand_in()) == (None, "SPECVIZ_CUDA_STEP=eager")
    monkeypatch.setenv("SPECVIZ_CUDA_STEP", "sometimes")
    from specviz.errors import ConfigError

    with pytest.raises(ConfigError, match="SPECVIZ_CUDA_STEP='sometimes': use one of proven, captured, eager"):
        proven_static(model, stand_in())


def test_the_fallback_is_named_in_the_trace_and_on_the_page(tiny_pair, monkeypatch):
    from specviz.decoding.decoder import speculative_generate

    monkeypatch.delenv("SPECVIZ_CUDA_STEP", raising=False)
    target, draft = tiny_pair
    static, note = proven_static(target.model, stand_in(shift=100.0))
    fallen = dataclasses.replace(target, capture_note=note, forward=f"transformers ({note})")
    trace = speculative_generate([3, 1, 4, 1, 5], target=fallen, draft=draft, options=DecodeOptions(max_new_tokens=8))
    assert static is None and trace.config["capture_note"] == note
    plain = speculative_generate([3, 1, 4, 1, 5], target=target, draft=draft, options=DecodeOptions(max_new_tokens=8))
    assert "capture_note" not in plain.config  # said only where it happened

    from specviz.teaching import catalogue
    from tests.test_app import goto, new_app

    for lang, said in (("en", "not its captured CUDA step"), ("zh", "而不是捕获的 CUDA 步骤")):
        at = goto(new_app({"lang": lang}), "app_pages/traces.py")
        at.file_uploader[0].set_value([("fallen.json", trace.to_json().encode(), "application/json")]).run()
        opened = catalogue.words("traces", lang)["open_upload"]
        at.button[[b.label for b in at.button].index(opened)].click().run()
        goto(at, "app_pages/playground.py")
        assert any(said in w.value and note in w.value for w in at.warning), [w.value for w in at.warning]


def test_the_proof_runs_the_shapes_a_run_repeats():
    assert capture_proof.PROOF_ROWS[0] > 1 and 1 in capture_proof.PROOF_ROWS
    assert torch.tensor(capture_proof.PROOF_PROMPT).numel() > max(capture_proof.PROOF_ROWS)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (scripts/gpu_check.sh runs it there)")
def test_the_real_captured_step_passes_its_proof_on_cuda():
    from specviz.engine.cuda_steps import captured_step

    cuda_model = tiny_llama(vocab_size=64, seed=7, layers=2, init_scale=10.0, hidden=32).model.to("cuda")
    static, note = proven_static(cuda_model, captured_step)
    assert static is not None and note == "", note
