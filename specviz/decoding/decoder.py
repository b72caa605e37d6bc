"""Speculative decoding and the target-only baseline, both recording a Trace.

`speculative_iteration` is Algorithm 1 of Leviathan et al. (2023), one iteration, numbered as
in the trace:
    (1) draft gamma tokens with the drafter (it catches its own cache up first)
    (2) verify: one target forward over only the positions it has not seen, drafts included
    (3) accept/reject each draft with min(1, p/q) against a uniform draw r
    (4) resample from the residual at the first rejection, or draw a bonus token
    (5) roll the target's KV cache back to the accepted prefix (the drafter rolls its own back
        at its next proposal); the trace's `cache` records both caches' lengths (`_cache_rows`)

Step (1) drafts one chain of gamma, the paper's case, or, where the drafter drafts one, a draft
tree (specviz.drafters.draft_tree): k branches that start with different first tokens. The tree is
a visible extension of the chain, kept in specviz.decoding.branches: step (2) verifies every
branch in the same single pass, and `kept_drafts` hands steps (3)-(5) one branch as a chain (the
chain keeps itself), so they and every recorded number keep their meaning. The wrong-rule variants
of the lab run chains, and so does block verification (options.rule "block", specviz.decoding.block:
steps (3)-(4) judge the chain's drafts together): with it a tree-drafting drafter drafts one chain.

End of sequence: nothing follows it. A drafted end of sequence ends its branch (`until_eos`: a
chain before the pass, a tree's kept branch after it, since a tree's branches share one
rectangular pass), and `_end_of_text` alone decides whether the text ended, and on which token.

The baseline (`target_step`) is one target step per iteration: with no drafts, verification is a
single draw from p (verify's bonus), with the same sampling, the same cache handling and the same
random generator. Its one-token steps run the kernels measured fastest for one row on this machine
(specviz.engine.kernels), so it is the fastest target alone specviz knows, not a handicapped one.

`_decode_loop` owns everything around the iteration: timing, stopping, progress and recording.
How the decode shares the device is the `hooks` object's business (specviz.serving.hooks): the
decoder holds `hooks.decoding(target)` for the whole run and hands what it yields to the target's
passes. A batched decode's passes run in one forward with other sessions' (specviz.serving.batching):
the same tokens and decisions as alone, its trace marked config.batched.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from specviz.config import DecodeOptions, SamplingConfig, validate_prompt
from specviz.decoding.block import verify_block
from specviz.decoding.branches import kept_drafts, until_eos
from specviz.decoding.prompting import prompt_token_ids
from specviz.decoding.recorder import IterationRecorder
from specviz.decoding.tree_walk import TreeWalk, walk_tree
from specviz.decoding.verify import RULES, FirstTest, Verdict, verify
from specviz.drafters import Drafter, DraftReport, TreeDrafter, draft_tree, resolve_drafter
from specviz.drafters.token_tree import TokenTree
from specviz.engine.models import DEFAULT_TARGET, LoadedModel, load_model
from specviz.engine.sampling import probabilities
from specviz.engine.target import TargetState
from specviz.errors import ConfigError
from specviz.serving.hooks import ALONE, ServingHooks
from specviz.traces.trace import Trace, reached_betas, summarize

DEFAULT_OPTIONS = DecodeOptions()


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
    options: DecodeOptions = DEFAULT_OPTIONS,
    trace: bool = True,
    device: str | None = None,
    dtype: str | None = None,
    on_iteration: Callable[[Progress], None] | None = None,
    hooks: ServingHooks = ALONE,
    weights: str | None = None,
) -> Trace:
    """Decode with speculative sampling and return its Trace (summary only when trace=False).
    options: gamma, the sampling, the seed, the length, the rule and the tree (specviz.config.DecodeOptions).
    weights: the target's, when it is loaded by name (specviz.engine.models.WEIGHT_FORMATS; None: the default).
    hooks: how the decode shares the device with others (specviz.serving.hooks; the default decodes alone)."""
    if options.rule not in RULES:
        raise ConfigError(f"rule must be one of {', '.join(RULES)}; got {options.rule!r}.")
    target_model = _target_for(prompt, target, device, dtype, weights)
    drafter = resolve_drafter(draft, target_model, device, dtype)
    run = Run(_name(target), _name(draft), options)
    return _decode(prompt, target_model, drafter, run, trace, on_iteration, hooks)


def autoregressive_generate(
    prompt: str | list[int],
    *,
    target: str | LoadedModel | None = None,
    options: DecodeOptions = DEFAULT_OPTIONS,
    trace: bool = True,
    device: str | None = None,
    dtype: str | None = None,
    on_iteration: Callable[[Progress], None] | None = None,
    hooks: ServingHooks = ALONE,
    weights: str | None = None,
) -> Trace:
    """The target alone, one token per step: the baseline every speedup is measured against. Of
    `options` it reads the sampling, the seed, the length and the chat template (no gamma, no rule)."""
    target_model = _target_for(prompt, target, device, dtype, weights)
    return _decode(prompt, target_model, None, Run(_name(target), None, options), trace, on_iteration, hooks)


@dataclass(frozen=True)
class Run:
    """One decode's names and options, as its trace's config records them."""

    target: str | None
    draft: str | None
    options: DecodeOptions


def _name(model: str | LoadedModel | Drafter | None) -> str | None:
    """What the config records of a model given by name or as an object."""
    return model if model is None or isinstance(model, str) else model.name


def _target_for(prompt, target: str | LoadedModel | None, device, dtype, weights=None) -> LoadedModel:
    """The set-up both entry points share once the settings are valid: the prompt, then the target."""
    validate_prompt(prompt)
    if isinstance(target, LoadedModel):
        return target
    return load_model(target or DEFAULT_TARGET, device=device, dtype=dtype, weights=weights)


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
    gamma: int = 0  # the most drafts this iteration could make (the run's gamma, less near max_new_tokens)
    report: DraftReport | None = None  # the drafter's account of its proposal (None: a drafter without one)
    cache: dict | None = None  # the caches' lengths through the iteration (_cache_rows; None: the baseline)
    walk: TreeWalk | None = None  # a dynamic tree's walk: its nodes, the accepted path, every level's tests


def speculative_iteration(
    state: TargetState, drafter: Drafter, gamma: int, options: DecodeOptions, generator, eos, lap
) -> Step:
    """Algorithm 1, one iteration, drafting at most `gamma` (the run's, less near max_new_tokens).
    `lap(phase)` marks the end of the draft and verify phases."""
    # (1) draft gamma tokens with q: a chain [1, g] (the paper), or a draft tree where the drafter
    # drafts one and the rule is the exact one (the lab's wrong rules draft chains): branches [k, g],
    # or EAGLE-2's dynamic tree (a TokenTree, options.tree "dynamic").
    draft_rows = getattr(drafter, "cache_rows", None)  # None: a drafter with no cache (the n-gram)
    drafted = _draft(state, drafter, gamma, options.tree_mode if options.rule == "exact" else "off", eos)
    lap("draft")

    # (2)-(4) one target pass gives p at every draft and after each; then accept, resample or bonus.
    feature_layers = drafter.feature_layers if drafter.reads_features else None
    target_rows = [state.cache.get_seq_length()]  # the cache's length: before, after the pass, after (5)
    kept, verdict, features, fed, walk = _verify(state, drafted, feature_layers, options, generator, eos)
    target_rows.append(state.cache.get_seq_length())
    correction, ended = _end_of_text(verdict, kept.drafts, eos)
    lap("verify")

    # (5) keep the accepted prefix plus the correction; roll the target's cache back.
    n = verdict.accepted_count
    emitted = _emitted(kept.drafts[:n], correction)
    first_fed, unseen = state.seen, state.seq.shape[0] - state.seen
    state.accept(emitted, kept.rows[:n], fed)
    cache = _cache_rows(target_rows + [state.cache.get_seq_length()], drafter, draft_rows, gamma)
    if drafter.reads_features:  # features of the positions still on the text: the context and accepted drafts
        on_text = torch.cat([torch.arange(unseen, device=state.device), unseen + kept.rows[:n]])
        drafter.observe(features[on_text], first_fed)
    return Step(
        drafts=kept.drafts, q=kept.q, p=kept.p, verdict=verdict, correction=correction, emitted=emitted,
        ended=ended, kept_branch=kept.index, other_branches=kept.others, rejected_first=kept.rejected,
        gamma=gamma, report=getattr(drafter, "report", None), cache=cache, walk=walk,
    )  # fmt: skip


def _verify(state: TargetState, drafted, feature_layers, options: DecodeOptions, generator, eos):
    """(2) the target's one pass over what was drafted, (3)-(4) its verdict -> (the kept chain, the
    verdict, the pass's features, how many drafts were fed per level (k) or in all (a dynamic tree's
    nodes), the walk of a dynamic tree or None)."""
    sampling = options.sampling
    if isinstance(drafted, TokenTree):  # EAGLE-2's dynamic tree: the exact walk (specviz.decoding.tree_walk)
        logits, features = state.forward_nodes(drafted.tokens, drafted.parents, feature_layers)  # [1 + N, V]
        kept, verdict, walk = walk_tree(drafted, probabilities(logits, sampling), generator, sampling.greedy)
        return kept, verdict, features, drafted.size, walk
    tree, q_tree = drafted  # [k, g], [k, g, V]
    logits, features = state.forward(tree, feature_layers)  # [1 + k*g, V], [T, (n+1)D] or None
    kept = kept_drafts(tree, q_tree, probabilities(logits, sampling), generator, sampling.greedy, eos)
    if options.rule == "block":  # block verification: the chain's drafts judged together (a chain: no first_r)
        verdict = verify_block(kept.drafts, kept.q, kept.p, generator, sampling.greedy)
    else:
        verdict = verify(kept.drafts, kept.q, kept.p, generator, sampling.greedy, options.rule, kept.first_r)
    return kept, verdict, features, tree.shape[0], None


def _cache_rows(target_rows: list[int], drafter, draft_before: int | None, gamma: int) -> dict:
    """The trace's `cache` (specviz.traces.trace): the caches' lengths as the engine left them. The
    target's before its pass, after it and after (5)'s roll-back; the draft's before it drafted, after
    its roll-back (drafters roll back lazily, at the start of their next proposal) and after drafting."""
    draft = None
    if draft_before is not None:  # a drafter asked for nothing (gamma 0) was not called: nothing moved
        kept = drafter.cache_kept if gamma > 0 else draft_before
        draft = {"before": draft_before, "after_rollback": kept, "after_draft": drafter.cache_rows}
    before, after_pass, after_rollback = target_rows
    return {"target": {"before": before, "after_pass": after_pass, "after_rollback": after_rollback}, "draft": draft}


def target_step(state: TargetState, sampling: SamplingConfig, generator, eos, lap) -> Step:
    """The baseline's iteration: one target step. With no drafts, verify is one draw from p (its
    bonus), so the baseline samples exactly as a speculative run's corrections do."""
    none, q = _no_drafts(state)  # [1, 0], [1, 0, V]
    lap("draft")  # nothing is drafted: the draft phase stays empty
    logits, _ = state.forward(none, None)  # [1, V]: the next position only
    p = probabilities(logits, sampling)  # [1, V]
    verdict = verify(none[0], q[0], p, generator, sampling.greedy)
    correction, ended = _end_of_text(verdict, none[0], eos)
    lap("verify")
    emitted = _emitted(none[0], correction)
    state.accept(emitted, none[0], 1)
    return Step(drafts=none[0], q=q[0], p=p, verdict=verdict, correction=correction, emitted=emitted, ended=ended)


def _draft(state: TargetState, drafter: Drafter, gamma: int, tree_mode: str, eos):
    """(1) The drafter's proposal on the target's device: tokens [k, g] and q [k, g, V], or a dynamic
    tree (a TokenTree). Nothing is fed that follows a drafted end of sequence: a chain ends there
    before the pass, a dynamic tree loses what lies below it."""
    if gamma <= 0:
        return _no_drafts(state)
    drafted = draft_tree(drafter, state.seq, gamma, tree_mode)
    if isinstance(drafted, TokenTree):
        return drafted.without_descendants_of(eos).to(state.device)
    tree, q_tree = drafted[0].to(state.device), drafted[1].to(state.device)
    if tree.shape[0] == 1:
        drafts, q = until_eos(tree[0], q_tree[0], eos)
        tree, q_tree = drafts[None], q[None]
    return tree, q_tree


def _no_drafts(state: TargetState) -> tuple[torch.Tensor, torch.Tensor]:
    """An empty chain: tokens [1, 0], q [1, 0, V]."""
    device = state.device
    return torch.empty(1, 0, dtype=torch.long, device=device), torch.empty(1, 0, state.target.vocab_size, device=device)


def _end_of_text(verdict: Verdict, drafts: torch.Tensor, eos: int | None) -> tuple[int | None, bool]:
    """(the correction, whether the text ended). It ends at an end-of-sequence correction, or at an
    accepted end-of-sequence draft: then nothing follows it, and verify's bonus is dropped."""
    correction = verdict.correction_token
    if eos is None:
        return correction, False
    if verdict.accepted_count == drafts.shape[0] > 0 and int(drafts[-1]) == eos:
        return None, True
    return correction, correction == eos


def _emitted(accepted: torch.Tensor, correction: int | None) -> torch.Tensor:
    """The tokens an iteration adds to the text: accepted [n] and the correction -> [n + 1] (or [n])."""
    if correction is None:
        return accepted
    return torch.cat([accepted, torch.tensor([correction], device=accepted.device)])


# ----- the loop around it -----------------------------------------------------------------------


def _decode(prompt, target: LoadedModel, drafter, run: Run, traced: bool, on_iteration, hooks) -> Trace:
    # The hooks hold the device for the whole decode (specviz.serving.hooks: a turn at its gate, and a
    # seat at the target's batcher when batched); their seat goes to the target's passes untouched.
    with hooks.decoding(target) as seat, torch.inference_mode():
        return _decode_loop(prompt, target, drafter, run, traced, on_iteration, seat)


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


@dataclass
class _Tally:
    """What a run adds up iteration by iteration: the summary's counts and the trace's records."""

    records: list[dict] = field(default_factory=list)
    iterations: int = 0
    drafted: int = 0
    accepted: int = 0
    new_tokens: int = 0
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    wall_ms: float = 0.0
    stop_reason: str = "max_new_tokens"

    def add(self, step: Step, draft_ms: float, verify_ms: float) -> None:
        self.iterations += 1
        self.drafted += step.drafts.shape[0]
        self.accepted += step.verdict.accepted_count
        self.new_tokens += step.emitted.shape[0]
        self.draft_ms += draft_ms
        self.verify_ms += verify_ms

    def summary(self, new_tokens: int, traced: bool) -> dict:
        return summarize(
            iterations=self.iterations,
            drafted=self.drafted,
            accepted=self.accepted,
            new_tokens=new_tokens,
            wall_ms=self.wall_ms,
            draft_ms=self.draft_ms,
            verify_ms=self.verify_ms,
            betas=reached_betas(self.records) if traced else None,
        )


def _decode_loop(prompt, target: LoadedModel, drafter, run: Run, traced, on_iteration, seat=None) -> Trace:
    options = run.options
    prompt_ids = _prompt_ids(prompt, target, options)
    generator = torch.Generator(device=target.device).manual_seed(options.seed)
    if drafter is not None:
        drafter.start(options.sampling, generator, target.vocab_size)
    state = TargetState(target, prompt_ids, seat, options.max_new_tokens)
    recorder = IterationRecorder(target.tokenizer, speculative=drafter is not None)
    tally = _iterate(state, drafter, options, generator, recorder, traced, on_iteration)
    output_ids = state.seq[len(prompt_ids) :].tolist()
    return Trace(
        mode="speculative" if drafter is not None else "autoregressive",
        config={**_config_dict(target, drafter, run, state.device, traced), "batched": seat is not None},
        prompt=prompt if isinstance(prompt, str) else "",
        prompt_token_ids=prompt_ids,
        output_token_ids=output_ids,
        output_text=_decode_text(target.tokenizer, output_ids),
        stop_reason=tally.stop_reason,
        iterations=tally.records,
        summary=tally.summary(len(output_ids), traced),
        extra=_extra(recorder, traced, seat),
    )


def _extra(recorder: IterationRecorder, traced: bool, seat) -> dict:
    """The trace's extra: its token texts, and for a batched run how many decodes shared its passes
    at most (its timings include waiting for theirs, so specviz.traces.speedup figures nothing from them)."""
    extra = {"token_text": recorder.token_text} if traced else {}
    if seat is not None:
        extra["batch"] = {"most_sessions": seat.most_sessions}
    return extra


def _iterate(state: TargetState, drafter, options: DecodeOptions, generator, recorder, traced, on_iteration) -> _Tally:
    """Iterations until max_new_tokens or end of sequence, each timed, recorded and reported."""
    clock, tally, eos = _Clock(state.device, traced), _Tally(), state.target.eos_token_id
    sync_device(state.device)
    t_start = time.perf_counter()
    while tally.new_tokens < options.max_new_tokens:
        position0, t0 = tally.new_tokens, clock.start()
        if drafter is None:
            step = target_step(state, options.sampling, generator, eos, clock.lap)
        else:  # leave room for the correction, so the run never overshoots max_new_tokens
            gamma = min(options.gamma, options.max_new_tokens - position0 - 1)
            step = speculative_iteration(state, drafter, gamma, options, generator, eos, clock.lap)
        draft_ms, verify_ms = clock.phase_ms()
        tally.add(step, draft_ms, verify_ms)
        record = None
        if traced:
            record = recorder.record(tally.iterations - 1, (t0 - t_start) * 1e3, draft_ms, verify_ms, step, position0)
            tally.records.append(record)
        if on_iteration is not None:
            said = Progress(tally.iterations, tally.new_tokens, options.max_new_tokens, record, recorder.token_text)
            on_iteration(said)
        if step.ended:
            tally.stop_reason = "eos"
            break
    sync_device(state.device)
    tally.wall_ms = (time.perf_counter() - t_start) * 1e3
    return tally


def _prompt_ids(prompt, target: LoadedModel, cfg: DecodeOptions) -> list[int]:
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


def _config_dict(target: LoadedModel, drafter, run: Run, device, traced: bool) -> dict:
    cfg = run.options
    s, rule = cfg.sampling, cfg.rule
    tree_mode = cfg.tree_mode if rule == "exact" and isinstance(drafter, TreeDrafter) else "off"
    return {
        "target": target.name,
        "draft": drafter.name if drafter is not None else None,
        "gamma": cfg.gamma if drafter is not None else 0,
        # branches of the draft tree at the first draft position (1: a chain; the lab's variants run chains;
        # a dynamic tree: the most children a node gets), and which tree (config.TREE_MODES)
        "draft_tree": _tree_width(drafter, tree_mode),
        "tree_mode": tree_mode,
        "temperature": s.temperature,
        "top_k": s.top_k,
        "top_p": s.top_p,
        "seed": cfg.seed,
        "max_new_tokens": cfg.max_new_tokens,
        "device": str(device),
        "dtype": target.dtype,
        # the target's weights: "shipped" (the GGUF's blocks) or "float32" (specviz.engine.models.WEIGHT_FORMATS),
        # and why float32 ran where shipped was asked for
        "weights": target.weights,
        "weights_note": target.weights_note,
        "forward": target.forward,  # "lean" (specviz.engine.lean_llama) or transformers' own, and why
        # on CUDA, why the captured step does not serve (specviz.engine.capture_proof): only when it does not
        **({"capture_note": target.capture_note} if getattr(target, "capture_note", "") else {}),
        "kernels": target.kernels,  # specviz.engine.kernels: the choice per group and shape, and its timings
        "draft_kernels": getattr(drafter, "kernels", None),
        "rule": rule,
        "traced": traced,
        # decoded batched (specviz.serving.batching; set from the hooks' seat by _decode_loop): its passes ran
        # with any other batched decode's; with extra.batch.most_sessions above 1 they did, and its timings
        # are not a solo run's
        "batched": False,
        "chat_template": cfg.chat_template,
    }


def _tree_width(drafter, tree_mode: str) -> int:
    """config.draft_tree: a tree's width at the first draft position (1: chains)."""
    if tree_mode == "dynamic" and hasattr(drafter, "propose_dynamic") and drafter.branches > 1:
        return drafter.width
    return drafter.branches if tree_mode == "branches" else 1


def sync_device(device) -> None:
    """Wait for queued GPU work so a timestamp means what it says (a no-op on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
