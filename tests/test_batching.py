"""Batched decoding across sessions (specviz.serving.batching): several decodes' target passes in one forward.

- `LeanLlama.forward_many` gives every request what `forward` gives it alone (logits, features,
  the cache it leaves), for requests of different lengths, trees and feature layers;
- decodes running at once in threads, batched, each equal their solo run with the same seed: the
  output and every recorded decision (drafts, accepted counts, r, accept/reject, corrections,
  a tree's branches), greedy and sampled, with a model draft, the draft head's tree and the
  baseline; and their passes were really shared;
- the gate lets batched decodes of one target hold it together, first come first served, and a
  solo decode still holds it alone;
- a batched trace is marked, and no speedup is figured from its timing once a pass was shared (a
  batched decode that met no other is timed as the solo run it was);
- the distribution lab's samples, decoded batched, count as they do one at a time;
- on the offline target (slow): short greedy decodes batched equal their solo runs.

Tokens and decisions must be identical. Probabilities are compared within 1e-5 for a target
with eager linears: a float32 matmul over several sessions' rows may round differently in the last
bits than over one session's (it chooses its blocking by row count). With packed kernels
(specviz.engine.packing, what the offline target runs in the tests) a row's numbers do not depend on the
rows beside it, so there every number must be identical.
"""

from __future__ import annotations

import copy
import dataclasses
import threading

import pytest
import torch

from specviz.config import DecodeOptions
from specviz.decoding.decoder import autoregressive_generate, speculative_generate
from specviz.drafters import HeadDrafter
from specviz.engine.draft_head import DraftHead, head_config_for, init_from_target
from specviz.engine.lean_llama import LeanLlama, LeanRequest
from specviz.engine.packing import PACKED, kernel_linears
from specviz.engine.target import tree_layout
from specviz.engine.toy import PEAKY, tiny_llama
from specviz.serving.batching import batcher_for
from specviz.serving.hooks import ServingHooks
from specviz.traces.trace import Trace, validate

PROB_TOL = 1e-5  # see the module docstring: batched matmuls may round the last bits differently
RAW_TOL = {"atol": 1e-4, "rtol": 1e-4}  # logits and features of these peaky models reach tens: float32's last bits
TIMING_KEYS = ("start_ms", "draft_ms", "verify_ms")


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the tests share 2 cores; the batcher runs torch in one thread at a time
    yield
    torch.set_num_threads(before)


def lean_pair(kernels: str):
    """(target with the lean forward, a one-layer draft): tiny random Llamas over 16 tokens; the
    target's linears eager, or all packed (specviz.engine.packing)."""
    target = tiny_llama(seed=1, init_scale=PEAKY, name=f"batch-target-{kernels}")
    if kernels == "packed":
        linears, why_not = kernel_linears(target.model)
        assert why_not is None, why_not
        for linear in linears:
            linear.use(PACKED, PACKED)
    target = dataclasses.replace(target, lean=LeanLlama(target.model), forward="lean", kernels={"body": kernels})
    return target, tiny_llama(seed=2, init_scale=PEAKY, layers=1, name="batch-draft")


@pytest.fixture(scope="module", params=["eager", "packed"])
def pair(request):
    return lean_pair(request.param)


@pytest.fixture(scope="module")
def packed_pair():
    return lean_pair("packed")


def prob_tol(target) -> float:
    """How far a batched run's probabilities may be from its solo run's (the module docstring)."""
    return 0.0 if target.kernels == {"body": "packed"} else PROB_TOL


def random_head(target, seed: int = 0) -> DraftHead:
    """A random draft head for the tiny target, reading its layer 0 and final features. Built
    before any thread starts: it draws from torch's global generator."""
    subset = torch.tensor([t for t in range(16) if t not in (13, 14)])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = DraftHead(head_config_for(target.model, len(subset), target.name, (0,)), subset)
        init_from_target(head, target.model)
        with torch.no_grad():
            for p in head.parameters():
                if p.requires_grad:
                    p.add_(torch.randn_like(p) * 0.3 * p.std().clamp(min=0.05))
    return head.attach(target.model).eval()


# ----- the ragged forward ------------------------------------------------------------------------


def test_forward_many_gives_each_request_what_forward_gives_it_alone(pair):
    target, _ = pair
    tol = RAW_TOL if prob_tol(target) else {"atol": 0.0, "rtol": 0.0}
    lean = target.lean
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 16, (n,), generator=gen) for n in (9, 4, 6, 2)]
    with torch.inference_mode():
        solo_caches, batch_caches = [], []
        for ids in prompts:  # each run has its own history in its own cache
            solo, batch = lean.new_cache(), lean.new_cache()
            lean.forward(ids, solo, 1)
            lean.forward(ids, batch, 1)
            solo_caches.append(solo)
            batch_caches.append(batch)
        feeds = [
            (torch.tensor([3, 7, 1, 2]), 4, (0, 1), None),  # a chain of drafts, features of two layers
            (torch.tensor([5]), 1, None, None),  # one row, no features
            (torch.tensor([6, 2, 9, 4, 4]), 5, (), "tree"),  # a tree of 2 branches x 2 drafts
            (torch.tensor([8, 0]), 1, (1,), None),
        ]
        requests_solo, requests_batch = [], []
        for (ids, keep, layers, tree), solo, batch in zip(feeds, solo_caches, batch_caches, strict=True):
            layout = tree_layout(solo.length, 1, 2, 2, "cpu", torch.float32) if tree else None
            requests_solo.append(LeanRequest(ids, solo, keep, layers, layout))
            requests_batch.append(LeanRequest(ids, batch, keep, layers, layout))
        want = [lean.forward(*r) for r in requests_solo]
        got = lean.forward_many(requests_batch)
    for (w_logits, w_features), (g_logits, g_features), solo, batch in zip(
        want, got, solo_caches, batch_caches, strict=True
    ):
        torch.testing.assert_close(g_logits, w_logits, **tol)
        assert (g_features is None) == (w_features is None)
        if w_features is not None:
            torch.testing.assert_close(g_features, w_features, **tol)
        assert batch.length == solo.length
        torch.testing.assert_close(batch.keys[:, :, : batch.length], solo.keys[:, :, : solo.length], **tol)
        torch.testing.assert_close(batch.values[:, :, : batch.length], solo.values[:, :, : solo.length], **tol)


def test_forward_many_refuses_two_requests_on_one_cache(pair):
    lean = pair[0].lean
    cache = lean.new_cache()
    with pytest.raises(ValueError, match="own cache"), torch.inference_mode():
        lean.forward_many([LeanRequest(torch.tensor([1]), cache, 1), LeanRequest(torch.tensor([2]), cache, 1)])


# ----- batched decodes equal solo ones -------------------------------------------------------------


def without_timing(trace: Trace) -> dict:
    """The trace as data, less what a batched run measures differently: its times and its mark."""
    d = copy.deepcopy(trace.to_dict())  # to_dict shares the trace's own dicts
    for it in d["iterations"]:
        for key in TIMING_KEYS:
            it.pop(key)
    for key in ("wall_ms", "tokens_per_s", "draft_ms", "verify_ms"):
        d["summary"].pop(key)
    d["config"].pop("batched")
    d["extra"].pop("batch", None)
    return d


def assert_same(got, want, tol: float, where: str = "trace") -> None:
    """Equal data: every int, string, bool and None exact, and the r draws; other floats (the
    probabilities) within tol."""
    assert type(got) is type(want), f"{where}: {got!r} vs {want!r}"
    if isinstance(want, dict):
        assert got.keys() == want.keys(), where
        for key in want:
            assert_same(got[key], want[key], tol, f"{where}.{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, tol, f"{where}[{i}]")
    elif isinstance(want, float) and not where.endswith(".r"):
        assert abs(got - want) <= tol, f"{where}: {got!r} vs {want!r}"
    else:
        assert got == want, where


def run_together(jobs) -> list[Trace]:
    """Each job (a function of batched -> Trace) in its own thread, all started at once, batched."""
    return at_once([lambda job=job: job(True) for job in jobs], timeout_s=120)


def at_once(calls, timeout_s: float) -> list:
    """Each call in its own thread, all released together (a barrier); their results in order.
    An exception in any of them fails the test."""
    results: list = [None] * len(calls)
    errors: list[BaseException] = []
    start = threading.Barrier(len(calls))

    def worker(i: int) -> None:
        try:
            start.wait(10)
            results[i] = calls[i]()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(calls))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout_s)
    assert not errors, errors
    return results


def check_batched_equal_solo(jobs, tol: float) -> list[Trace]:
    solo = [job(False) for job in jobs]
    batched = run_together(jobs)
    for i, (b, s) in enumerate(zip(batched, solo, strict=True)):
        validate(b.to_dict())
        assert b.config["batched"] is True and s.config["batched"] is False
        assert b.output_token_ids == s.output_token_ids, i
        assert_same(without_timing(b), without_timing(s), tol, f"job {i}")
    assert max(b.extra["batch"]["most_sessions"] for b in batched) >= 2  # they did share passes
    return batched


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_batched_model_draft_decodes_equal_their_solo_runs(pair, temperature):
    target, draft = pair
    settings = [([3, 1, 4], 11, 2), ([5, 6, 7, 8, 9], 12, 4), ([2], 13, 1), ([9, 9, 2, 6], 14, 3)]

    def job(prompt, seed, gamma):
        return lambda batched: speculative_generate(
            prompt,
            target=target,
            draft=draft,
            options=DecodeOptions(gamma=gamma, temperature=temperature, seed=seed, max_new_tokens=30),
            hooks=ServingHooks(batched=batched),
        )

    batched = check_batched_equal_solo([job(*s) for s in settings], prob_tol(target))
    if temperature > 0:  # the sampled runs met rejections, resamples and bonuses: every path compared
        kinds = {it["correction"]["kind"] for b in batched for it in b.iterations}
        assert {"resample", "bonus"} <= kinds


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_batched_tree_and_baseline_decodes_equal_their_solo_runs(packed_pair, temperature):
    """Draft-head trees (features from the shared pass, a tree mask per decode) beside a baseline,
    on the packed target only: the head reads the target's raw features (tens, in these peaky
    models) and turned eager kernels' last-bit differences into q 3e-5 apart, though every
    decision stayed the same; packed, every number must be identical."""
    target, _ = packed_pair
    head = random_head(target)

    def tree_job(prompt, seed, gamma):
        def job(batched):
            drafter = HeadDrafter(head, "head", branches=2, min_confidence=0.0)  # one per run: it keeps its caches
            return speculative_generate(
                prompt,
                target=target,
                draft=drafter,
                options=DecodeOptions(gamma=gamma, temperature=temperature, seed=seed, max_new_tokens=24),
                hooks=ServingHooks(batched=batched),
            )

        return job

    def baseline(batched):
        return autoregressive_generate(
            [4, 4, 1],
            target=target,
            options=DecodeOptions(temperature=temperature, seed=5, max_new_tokens=20),
            hooks=ServingHooks(batched=batched),
        )

    jobs = [tree_job([3, 1, 4, 1], 21, 3), tree_job([7, 2], 22, 2), baseline]
    batched = check_batched_equal_solo(jobs, prob_tol(target))
    trees = [it["tree"] for b in batched[:2] for it in b.iterations if "tree" in it]
    assert trees and all(len(t["other_branches"]) == 1 for t in trees)  # two-branch trees were verified


def test_a_target_without_the_lean_forward_decodes_alone(pair):
    _, draft = pair
    plain = tiny_llama(seed=1, init_scale=PEAKY, name="plain-target")  # transformers' forward: no batcher
    assert batcher_for(plain) is None
    trace = speculative_generate(
        [3, 1, 4],
        target=plain,
        draft=draft,
        options=DecodeOptions(seed=1, max_new_tokens=10),
        hooks=ServingHooks(batched=True),
    )
    assert trace.config["batched"] is False and "batch" not in trace.extra


def test_a_pass_that_leaks_between_sessions_is_caught(packed_pair, monkeypatch):
    """The comparison can fail: a forward_many whose later requests' logits pick up a trace of the
    first request's (a row or cache mix-up, small) makes the batched runs differ from solo."""
    target, draft = packed_pair
    real = LeanLlama.forward_many

    def leaky(self, requests, reuse_prefixes=False):
        out = real(self, requests, reuse_prefixes)
        first_row = out[0][0][-1]  # [V]
        return [out[0], *((logits + 1e-3 * first_row, features) for logits, features in out[1:])]

    def job(prompt, seed):
        return lambda batched: speculative_generate(
            prompt,
            target=target,
            draft=draft,
            options=DecodeOptions(gamma=2, temperature=1.0, seed=seed, max_new_tokens=20),
            hooks=ServingHooks(batched=batched),
        )

    solo = [job([3, 1, 4], 1)(False), job([5, 6, 7], 2)(False)]
    monkeypatch.setattr(LeanLlama, "forward_many", leaky)
    batched = run_together([job([3, 1, 4], 1), job([5, 6, 7], 2)])
    with pytest.raises(AssertionError):
        for b, s in zip(batched, solo, strict=True):
            assert_same(without_timing(b), without_timing(s), PROB_TOL)
