"""Speculative decoding and the target-only baseline, both recording a Trace.

`speculative_iteration` is Algorithm 1 of Leviathan et al. (2023), one iteration, numbered as
in the trace:
    (1) draft gamma tokens with the drafter (it catches its own cache up first)
    (2) verify: one target forward over only the positions it has not seen, drafts included
    (3) accept/reject each draft with min(1, p/q) against a uniform draw r
    (4) resample from the residual at the first rejection, or draw a bonus token
    (5) roll the target's KV cache back to the accepted prefix (the drafter rolls its own back
        at its next proposal)

A drafter may propose a tree (specviz.drafters.draft_tree): several branches of gamma tokens that
start with different first tokens. Step (2) then verifies every branch in the same single pass (a
tree attention mask: a draft sees the text and its own branch's earlier drafts), and the iteration
keeps one branch by recursive rejection sampling over the first tokens
(specviz.verify.choose_branch): the first candidate that passes its test, each test made against
what the earlier rejections left of p. At T=0 that is the branch starting with the target's own
choice. From there it is the chain algorithm on that branch, with p from the same pass (its first
row the p its first token was tested against), so steps (3)-(5) and every recorded number keep
their meaning; the rejected first tokens and the other branches are recorded in `tree`. A chain is
a tree of one branch and runs exactly as before. The wrong-rule variants of the lab run chains.

`_decode_loop` owns everything around it: timing, stopping, progress and recording.

The baseline is the same loop with no drafter: each iteration is one target step, with the same
sampling, the same cache handling and the same random generator. Its one-token steps run the
kernels measured fastest for one row on this machine (specviz.kernels), so it is the fastest
target alone specviz knows, not a handicapped one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from specviz.config import DEFAULT_GAMMA, DecodeConfig, SamplingConfig, validate_prompt
from specviz.drafters import Drafter, draft_tree, resolve_drafter
from specviz.errors import ConfigError
from specviz.gate import device_gate
from specviz.models import DEFAULT_TARGET, LoadedModel, load_model
from specviz.prompting import prompt_token_ids
from specviz.recorder import IterationRecorder
from specviz.sampling import probabilities
from specviz.target import TargetState
from specviz.trace import Trace, reached_betas, summarize
from specviz.verify import RULES, FirstTest, Verdict, choose_branch, verify


@dataclass
class Progress:
    """Handed to `on_iteration` after each iteration, so a page can stream tokens as they come."""

    iteration: int
    new_tokens: int
    max_new_tokens: int
    record: dict | None  # the iteration as recorded in the trace (None when tracing is off)
    token_text: dict[str, str]


def speculative_generate(
    prompt: str | list[int],
    *,
    target: str | LoadedModel | None = None,
    draft: str | LoadedModel | Drafter | None = None,
    gamma: int = DEFAULT_GAMMA,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    max_new_tokens: int = 64,
    trace: bool = True,
    rule: str = "exact",
    chat_template: bool = True,
    device: str | None = None,
    dtype: str | None = None,
    on_iteration: Callable[[Progress], None] | None = None,
    on_wait: Callable[[int], None] | None = None,
) -> Trace:
    """Decode with speculative sampling and return its Trace (summary only when trace=False)."""
    if rule not in RULES:
        raise ConfigError(f"rule must be one of {', '.join(RULES)}; got {rule!r}.")
    sampling = SamplingConfig(temperature, top_k, top_p)
    target_name = target.name if isinstance(target, LoadedModel) else target
    draft_name = draft if isinstance(draft, str) or draft is None else draft.name
    cfg = DecodeConfig(target_name, draft_name, gamma, sampling, seed, max_new_tokens, chat_template)
    validate_prompt(prompt)
    target_model = _resolve_target(target, device, dtype)
    drafter = resolve_drafter(draft, target_model, device, dtype)
    return _decode(prompt, target_model, drafter, cfg, trace, rule, on_iteration, on_wait)


def autoregressive_generate(
    prompt: str | list[int],
    *,
    target: str | LoadedModel | None = None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    max_new_tokens: int = 64,
    trace: bool = True,
    chat_template: bool = True,
    device: str | None = None,
    dtype: str | None = None,
    on_iteration: Callable[[Progress], None] | None = None,
    on_wait: Callable[[int], None] | None = None,
) -> Trace:
    """The target alone, one token per step: the baseline every speedup is measured against."""
    sampling = SamplingConfig(temperature, top_k, top_p)
    target_name = target.name if isinstance(target, LoadedModel) else target
    cfg = DecodeConfig(target_name, None, 1, sampling, seed, max_new_tokens, chat_template)
    validate_prompt(prompt)
    target_model = _resolve_target(target, device, dtype)
    return _decode(prompt, target_model, None, cfg, trace, "exact", on_iteration, on_wait)


def _resolve_target(target, device, dtype) -> LoadedModel:
    if isinstance(target, LoadedModel):
        return target
    return load_model(target or DEFAULT_TARGET, device=device, dtype=dtype)


# ----- Algorithm 1 ------------------------------------------------------------------------------


@dataclass
class Step:
    """What one iteration of Algorithm 1 produced."""

    drafts: torch.Tensor  # [g] proposed tokens (g <= gamma; 0 for the baseline): the kept branch
    q: torch.Tensor  # [g, V] the distributions they were drawn from
    p: torch.Tensor  # [g + 1, V] the target's distributions at the same positions and one more
    verdict: Verdict
    correction: int | None  # resampled or bonus token; None when the text ended inside the drafts
    emitted: torch.Tensor  # [n + 1] (or [n]) tokens this iteration added to the text
    ended: bool  # the text reached end of sequence
    kept_branch: int = 0  # which of a draft tree's branches `drafts` is (0: the drafter's first choice)
    other_branches: torch.Tensor | None = None  # [k - 1, g] a draft tree's branches not kept
    rejected_first: list[FirstTest] | None = None  # a draft tree's first tokens rejected before the kept one


def speculative_iteration(
    state: TargetState, drafter, gamma: int, sampling: SamplingConfig, generator, rule: str, eos, lap
) -> Step:
    """Algorithm 1, one iteration. `lap(phase)` marks the end of the draft and verify phases."""
    device, vocab = state.device, state.target.vocab_size
    # (1) draft gamma tokens (perhaps a tree of several branches of them; the lab's variants: a chain).
    if drafter is not None and gamma > 0:
        tree, q_tree = draft_tree(drafter, state.seq, gamma, allow_tree=rule == "exact")  # [k, g], [k, g, V]
        tree, q_tree = tree.to(device), q_tree.to(device)
        if tree.shape[0] == 1:  # a chain: drop what follows an EOS before the pass, not after
            drafts, q = _cut_after_eos(tree[0], q_tree[0], eos)
            tree, q_tree = drafts[None], q[None]
    else:
        tree, q_tree = torch.empty(1, 0, dtype=torch.long, device=device), torch.empty(1, 0, vocab, device=device)
    lap("draft")

    # (2) verify: one target pass gives p at every draft position of every branch and the one after.
    reads_features = drafter is not None and drafter.reads_features
    logits, features = state.forward(tree, drafter.feature_layers if reads_features else None)
    p_all = probabilities(logits, sampling)  # [1 + k*g, V]
    # Keep one branch: recursive rejection sampling over the first drafts (at T=0: the one that is
    # the target's own choice, else the last). Drafts stop at an EOS: nothing follows it.
    width, depth = tree.shape
    branch, p_first, first_r, rejected = 0, p_all[0], None, []
    if width > 1 and depth > 0:
        branch, p_first, first_r, rejected = choose_branch(
            tree[:, 0], q_tree[:, 0], p_all[0], generator, sampling.greedy
        )
    rows = torch.arange(depth, device=device) * width + branch  # the kept branch's drafts among those fed
    drafts, q = _cut_after_eos(tree[branch], q_tree[branch], eos)
    rows = rows[: drafts.shape[0]]
    p = torch.cat([p_first[None], p_all[1 + rows]])  # [g + 1, V] row 0: what the first draft is tested against

    # (3) accept with min(1, p/q) against r; (4) resample from the residual, or the bonus.
    verdict = verify(drafts, q, p, generator, sampling.greedy, rule, first_r)
    n, g = verdict.accepted_count, drafts.shape[0]
    correction = verdict.correction_token
    ended = eos is not None and correction == eos
    if n == g > 0 and eos is not None and int(drafts[-1]) == eos:
        correction, ended = None, True  # the text ended inside the drafts: nothing follows end of sequence
    lap("verify")

    # (5) keep the accepted prefix plus the correction; roll the target's cache back.
    emitted = drafts[:n]
    if correction is not None:
        emitted = torch.cat([emitted, torch.tensor([correction], device=device)])
    first_fed = state.seen
    unseen = state.seq.shape[0] - first_fed
    state.accept(emitted, rows[:n], width)
    if reads_features:  # features of the positions still on the text: the context and accepted drafts
        kept = torch.cat([torch.arange(unseen, device=device), unseen + rows[:n]])
        drafter.observe(features[kept], first_fed)
    others = tree[[b for b in range(width) if b != branch]] if width > 1 else None
    return Step(drafts, q, p, verdict, correction, emitted, ended, branch, others, rejected if width > 1 else None)


def _cut_after_eos(drafts: torch.Tensor, q: torch.Tensor, eos: int | None):
    if eos is None:
        return drafts, q
    hits = (drafts == eos).nonzero()
    if hits.numel():
        end = int(hits[0, 0]) + 1
        return drafts[:end], q[:end]
    return drafts, q


# ----- the loop around it -----------------------------------------------------------------------


def _decode(
    prompt, target: LoadedModel, drafter, cfg: DecodeConfig, traced: bool, rule: str, on_iteration, on_wait
) -> Trace:
    # One decode per device at a time (see specviz.gate); on_wait(ahead) reports the queue.
    with device_gate(target.device).turn(on_wait), torch.inference_mode():
        return _decode_loop(prompt, target, drafter, cfg, traced, rule, on_iteration)


class _Clock:
    """Phase timings of one iteration; synchronises the GPU only when the trace needs them."""

    def __init__(self, device: torch.device, traced: bool):
        self.device, self.traced = device, traced
        self.marks: dict[str, float] = {}

    def start(self) -> float:
        self.marks = {"start": time.perf_counter()}
        return self.marks["start"]

    def lap(self, phase: str) -> None:
        if self.traced:
            sync_device(self.device)
        self.marks[phase] = time.perf_counter()

    def phase_ms(self) -> tuple[float, float]:
        m = self.marks
        return (m["draft"] - m["start"]) * 1e3, (m["verify"] - m["draft"]) * 1e3


def _decode_loop(prompt, target: LoadedModel, drafter, cfg: DecodeConfig, traced, rule, on_iteration) -> Trace:
    prompt_ids = _prompt_ids(prompt, target, cfg)
    generator = torch.Generator(device=target.device).manual_seed(cfg.seed)
    if drafter is not None:
        drafter.start(cfg.sampling, generator, target.vocab_size)
    state = TargetState(target, prompt_ids)
    recorder = IterationRecorder(target.tokenizer, speculative=drafter is not None)
    clock = _Clock(state.device, traced)
    records: list[dict] = []
    n_iter = drafted = accepted = new_tokens = 0
    draft_ms_total = verify_ms_total = 0.0
    stop_reason = "max_new_tokens"
    eos = target.eos_token_id

    sync_device(state.device)
    t_start = time.perf_counter()
    while new_tokens < cfg.max_new_tokens:
        # Leave room for the correction so the run never overshoots max_new_tokens.
        gamma = min(cfg.gamma, cfg.max_new_tokens - new_tokens - 1) if drafter is not None else 0
        position0 = new_tokens
        t0 = clock.start()
        step = speculative_iteration(state, drafter, gamma, cfg.sampling, generator, rule, eos, clock.lap)
        draft_ms, verify_ms = clock.phase_ms()
        n_iter += 1
        drafted += step.drafts.shape[0]
        accepted += step.verdict.accepted_count
        new_tokens += step.emitted.shape[0]
        draft_ms_total += draft_ms
        verify_ms_total += verify_ms
        record = None
        if traced:
            record = recorder.record(n_iter - 1, (t0 - t_start) * 1e3, draft_ms, verify_ms, step, position0)
            records.append(record)
        if on_iteration is not None:
            on_iteration(Progress(n_iter, new_tokens, cfg.max_new_tokens, record, recorder.token_text))
        if step.ended:
            stop_reason = "eos"
            break

    sync_device(state.device)
    wall_ms = (time.perf_counter() - t_start) * 1e3
    output_ids = state.seq[len(prompt_ids) :].tolist()
    betas = reached_betas(records) if traced else None
    summary = summarize(n_iter, drafted, accepted, len(output_ids), wall_ms, draft_ms_total, verify_ms_total, betas)
    return Trace(
        mode="speculative" if drafter is not None else "autoregressive",
        config=_config_dict(target, drafter, cfg, state.device, traced, rule),
        prompt=prompt if isinstance(prompt, str) else "",
        prompt_token_ids=prompt_ids,
        output_token_ids=output_ids,
        output_text=_decode_text(target.tokenizer, output_ids),
        stop_reason=stop_reason,
        iterations=records,
        summary=summary,
        extra={"token_text": recorder.token_text} if traced else {},
    )


def _prompt_ids(prompt, target: LoadedModel, cfg: DecodeConfig) -> list[int]:
    if not isinstance(prompt, str):
        ids = list(prompt)
    elif target.tokenizer is None:
        raise ConfigError("This target has no tokenizer; give the prompt as a list of token ids.")
    else:
        ids = prompt_token_ids(target.tokenizer, prompt, cfg.chat_template)
    if not ids:
        raise ConfigError("The prompt produced no tokens: type some text for the model to continue.")
    if max(ids) >= target.vocab_size:
        raise ConfigError(f"Prompt token id {max(ids)} is outside the target's vocabulary of {target.vocab_size}.")
    limit = target.max_positions
    if limit is not None and len(ids) + cfg.max_new_tokens > limit:
        raise ConfigError(
            f"The prompt is {len(ids)} tokens and {cfg.max_new_tokens} more are asked for, but the "
            f"model reads at most {limit} tokens. Shorten the prompt or lower max new tokens."
        )
    return ids


def _decode_text(tokenizer, ids: list[int]) -> str:
    if tokenizer is None:
        return " ".join(f"<{i}>" for i in ids)
    return tokenizer.decode(ids, skip_special_tokens=False)


def _config_dict(target: LoadedModel, drafter, cfg: DecodeConfig, device, traced: bool, rule: str) -> dict:
    s = cfg.sampling
    return {
        "target": target.name,
        "draft": drafter.name if drafter is not None else None,
        "gamma": cfg.gamma if drafter is not None else 0,
        # branches of the draft tree at the first draft position (1: a chain; the lab's variants run chains)
        "draft_tree": getattr(drafter, "branches", 1) if drafter is not None and rule == "exact" else 1,
        "temperature": s.temperature,
        "top_k": s.top_k,
        "top_p": s.top_p,
        "seed": cfg.seed,
        "max_new_tokens": cfg.max_new_tokens,
        "device": str(device),
        "dtype": target.dtype,
        "forward": target.forward,  # "lean" (specviz.lean_llama) or transformers' own, and why
        "kernels": target.kernels,  # specviz.kernels: the choice per group and shape, and its timings
        "draft_kernels": getattr(drafter, "kernels", None),
        "rule": rule,
        "traced": traced,
        "chat_template": cfg.chat_template,
    }


def sync_device(device) -> None:
    """Wait for queued GPU work so a timestamp means what it says (a no-op on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
