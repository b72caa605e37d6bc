"""The trace of one decode: plain data, versioned, JSON and CSV I/O, validation.

A trace holds only ints, floats, strings, bools, None, lists and dicts, so it imports without
torch and round-trips through JSON unchanged. Field meanings (p is always the target, q the draft):

    schema              "specviz.trace/1"
    mode                "speculative" or "autoregressive" (the target-only baseline)
    config              target, draft, gamma, temperature, top_k, top_p, seed, max_new_tokens,
                        device, dtype, rule, traced; batched (optional: true when its target
                        passes ran in one forward with other sessions', specviz.serving.batching, so its
                        timings are not a solo run's and no speedup is figured from them)
    prompt, prompt_token_ids, output_token_ids, output_text, stop_reason
    iterations[]        index (0-based: its place in this list), iteration (index + 1: the number
                        every page and the CSV show, "Iteration 2 of 7"; filled in by Trace when
                        absent, so older files read the same), start_ms, draft_ms, verify_ms,
                        accepted_count, drafts[], correction
      drafts[]          position (index into the generated text), token_id, token,
                        q, p (of this token, after temperature/top-k/top-p, as the rule used them),
                        accept_prob = min(1, p/q), r (the uniform draw; null when greedy),
                        accepted, q_top and p_top ([token_id, prob] for the top 10),
                        beta = sum_x min(p(x), q(x)) (clamped to 1 against float32 rounding);
                        block (config.rule "block" only, specviz.decoding.block: weight, the w after
                        this draft, and h, the chance of stopping after it; r is then the draw
                        tested against h, and the last draft with r < h is the last one kept)
      correction        kind ("resample", "bonus", "block_resample" (rule "block": drawn from
                        max(0, w p - q) normalised, with block {weight: w, mass: its sum before
                        normalising}), or "target": drawn by the target with no draft
                        to check, a baseline step or an iteration whose draft proposed nothing;
                        older files called the latter "bonus", and Trace renames it), position,
                        token_id, token, p (the chosen token's probability under the distribution
                        it was drawn from), residual_top (resample and block_resample: [token_id, prob]
                        top 10 of the residual it was drawn from), p_top (bonus/target: top 10 of p)
                        null only when the run stopped at an end-of-sequence draft token
      tree              only when the drafter proposed a draft tree: several branches that start
                        with different first tokens, all verified in the same target pass.
                        drafts[] is the branch kept, scored as a chain: the first whose first
                        token passed its test (recursive rejection sampling; at T=0 the one
                        starting with the target's own choice), else the last. kept_branch
                        (0 = the drafter's first choice), other_branches[] (each a list of
                        {token_id, token}), rejected_first[] (optional: the first tokens tested
                        and rejected before the kept one, in order: branch, token_id, token, p, q,
                        accept_prob, r; after each rejection p becomes norm(max(0, p - q)), so
                        the kept branch's first p, p_top and beta are that residual's).
                        A dynamic tree (EAGLE-2, config.tree_mode "dynamic") also holds nodes[]
                        ({token_id, token, parent (-1: after the text; parents come first), depth
                        (1 for the first drafts), score (the head's path score)}), path[] (the
                        accepted nodes, accepted_count of them) and tests[] (one list per level
                        reached, len(path) + 1: the children tested and rejected there, in order,
                        each {node, token_id, token, p, q, accept_prob, r}: q is 1 at T = 0,
                        where the head chose the token, and at T > 0 q_b(x), the head's q without
                        the siblings drawn before it, renormalised). Its drafts[] are
                        the path, then the last child rejected after it (the correction is drawn
                        from what that test left of p); kept_branch counts the first tokens
                        rejected before drafts[0], and other_branches is empty
      drafting          optional (newer speculative traces): how the drafts came, so a page can
                        say where the engine left Algorithm 1. gamma (the most this iteration
                        could draft: config.gamma, less near max_new_tokens), source (which
                        drafter drafted: "head", "ngram", "suffix", "model"; null when unknown or nothing
                        was asked), stop (why fewer than gamma: "no_features" (the draft head has
                        no target features before the first pass), "confidence" (the head's early
                        stop), "cost" (the head's next draft would not pay for its row of the
                        target's pass at this machine's measured costs), "no_match" /
                        "match_end" (the n-gram's or the suffix trees' lookup found no match / its
                        match ran out), "eos" (an end-of-sequence draft); null: it drafted
                        all it was asked),
                        confidence and threshold (stop "confidence": the best branch's
                        confidence in its latest draft, below the head's min_confidence; stop
                        "cost": the head's confidence in the draft it did not send, below the
                        least that would have paid for its row, at most 1)
      cache             optional (newer speculative traces): the KV caches' lengths in rows (token
                        positions) as the engine left them. target: before (before the pass),
                        after_pass, after_rollback (step 5: the text and the accepted drafts; the
                        correction is written by the next pass); draft (null: a drafter with no
                        cache, as the n-gram): before, after_rollback (a drafter rolls back at the
                        start of its proposal), after_draft
    summary             iterations, drafted, accepted, acceptance_rate, mean_accepted_length,
                        alpha (mean beta over the positions the text reached: the accepted
                        drafts and the first rejected one of each iteration), wall_ms,
                        tokens_per_s, new_tokens, target_calls, draft_ms, verify_ms

    extra.token_text    {"token_id": text} for every id the trace mentions, top lists included,
                        so hover cards can show alternatives without a tokenizer
    extra.batch         a batched run only: most_sessions, the most decodes one of its passes served
                        (1: it met no other decode, and specviz.traces.speedup times it as a solo run)
    extra.timing        timed pairs (specviz.traces.speedup); a pair's "batched" marks one figures skip,
                        its "disturbed" one they skip while enough others are in
    extra.baseline      optional: the target-alone run on the same settings, a whole trace of its own
                        (Trace.with_baseline_json writes it, carried_baseline reads it back), so one
                        downloaded file reproduces every page

With tracing off (benchmarks) `iterations` is empty and only the summary is filled.

Token statuses (STATUSES, the one home of their words: the pages, the CSV and specviz.teaching.charts.style
use them): accepted, rejected (the first draft refused), discarded (drafts after it, never
checked), resampled and bonus (the correction after a rejection / after every draft passed), and
target (drawn by the target alone, no draft to check).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

# The summary's definitions and the reading of untrusted files have their own modules; their names
# stay importable from here, where the trace's users look for them.
from specviz.errors import TraceError  # noqa: F401
from specviz.traces.summary import acceptance_by_position, reached_betas, summarize  # noqa: F401
from specviz.traces.validation import (  # noqa: F401
    MAX_TRACE_BYTES,
    SCHEMA,
    parse_json,
    uploaded_text,
    validate,
)

TOP_N = 10  # how many alternatives each draft and correction records
BASELINE_KEY = "baseline"  # extra: the target-alone run a downloaded trace carries (Trace.with_baseline_json)

# The status of every token, in the order the legend shows them (see the module docstring).
STATUSES = ("accepted", "rejected", "discarded", "resampled", "bonus", "target")

# The per-token CSV: one row per token of the stream, drafts and corrections, in reading order.
# iteration counts from 1 as the pages do; cells that do not apply are left empty (accept_prob and
# r of a discarded draft, which was never checked; q, accept_prob, r, accepted and beta of a
# correction, which is drawn, not drafted).
CSV_COLUMNS = (
    "iteration",
    "position",
    "token_id",
    "token",
    "status",
    "q",
    "p",
    "accept_prob",
    "r",
    "accepted",
    "beta",
)


def draft_status(j: int, accepted_count: int) -> str:
    """The status of draft j (0-based) in an iteration that accepted its first `accepted_count`."""
    return "accepted" if j < accepted_count else ("rejected" if j == accepted_count else "discarded")


def correction_status(it: dict[str, Any]) -> str | None:
    """The status of an iteration's correction: resampled, bonus or target (None: it has none)."""
    corr = it.get("correction")
    if corr is None:
        return None
    if corr["kind"] in ("resample", "block_resample"):
        return "resampled"
    if corr["kind"] == "bonus" and it["drafts"]:
        return "bonus"
    return "target"  # a baseline step, or a draft that proposed nothing: not a reward for good drafts


def _settle_words(iterations: list[dict[str, Any]]) -> None:
    """Give every iteration its 1-based number, and call a draft-less iteration's token what the
    pages call it, "target", where older files (and the recorder) wrote "bonus"."""
    for it in iterations:
        it["iteration"] = it["index"] + 1
        corr = it.get("correction")
        if corr is not None and corr.get("kind") == "bonus" and not it["drafts"]:
            corr["kind"] = "target"


@dataclass
class Trace:
    """One decode, as plain data. Build it with the decoder or `Trace.from_dict`.

    Building one numbers its iterations from 1 (`iteration`) and names a draft-less iteration's
    token "target", in place (see _settle_words): in memory, in JSON and in the CSV alike."""

    mode: str
    config: dict[str, Any]
    prompt: str
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    output_text: str
    stop_reason: str
    iterations: list[dict[str, Any]]
    summary: dict[str, Any]
    schema: str = SCHEMA
    extra: dict[str, Any] = field(default_factory=dict)  # free-form notes (e.g. where it was made)

    def __post_init__(self) -> None:
        _settle_words(self.iterations)

    # ----- conversion -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "mode": self.mode,
            "config": self.config,
            "prompt": self.prompt,
            "prompt_token_ids": self.prompt_token_ids,
            "output_token_ids": self.output_token_ids,
            "output_text": self.output_text,
            "stop_reason": self.stop_reason,
            "iterations": self.iterations,
            "summary": self.summary,
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Trace:
        """Validate `data` and build a Trace; raises TraceError naming the first problem."""
        validate(data)
        return cls(
            mode=data["mode"],
            config=data["config"],
            prompt=data["prompt"],
            prompt_token_ids=data["prompt_token_ids"],
            output_token_ids=data["output_token_ids"],
            output_text=data["output_text"],
            stop_reason=data["stop_reason"],
            iterations=data["iterations"],
            summary=data["summary"],
            extra=data.get("extra", {}),
        )

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> Trace:
        return cls.from_dict(parse_json(text))

    def with_baseline_json(self, baseline: Trace | None, indent: int | None = None) -> str:
        """This trace's JSON with its target-alone run carried in extra.baseline, so one file reproduces
        what a page showed (its speedup reads both; specviz_app's "Trace (JSON)"). Without a baseline
        (or a baseline alone, its own baseline): to_json."""
        if baseline is None or baseline is self or self.mode != "speculative":
            return self.to_json(indent)
        data = self.to_dict()
        data["extra"] = {**self.extra, BASELINE_KEY: baseline.to_dict()}
        return json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)

    def carried_baseline(self) -> tuple[Trace, Trace | None]:
        """(this trace without extra.baseline, the baseline it carried, validated; None when it carries
        none): with_baseline_json's inverse. Raises TraceError naming a carried baseline's problem."""
        carried = self.extra.get(BASELINE_KEY)
        if carried is None:
            return self, None
        try:
            baseline = Trace.from_dict(carried)
        except TraceError as exc:
            raise TraceError(f"extra.{BASELINE_KEY}: {exc}") from None
        if baseline.mode != "autoregressive":
            raise TraceError(f"extra.{BASELINE_KEY}: the carried baseline must be a target-alone run.")
        trace = replace(self, extra={k: v for k, v in self.extra.items() if k != BASELINE_KEY})
        return trace, baseline

    # ----- exports ----------------------------------------------------------------------------
    def to_csv(self) -> str:
        """One row per token of the stream, drafts and corrections, in reading order (CSV_COLUMNS)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for it in self.iterations:
            number = it["index"] + 1
            for j, d in enumerate(it["drafts"]):
                status = draft_status(j, it["accepted_count"])
                # A discarded draft never met its test; under block verification every draft met its stop test.
                checked = status != "discarded" or "block" in d
                writer.writerow(
                    [
                        number,
                        d["position"],
                        d["token_id"],
                        d["token"],
                        status,
                        d["q"],
                        d["p"],
                        d["accept_prob"] if checked else "",
                        d["r"] if checked and d["r"] is not None else "",
                        int(d["accepted"]),
                        d["beta"],
                    ]
                )
            if (status := correction_status(it)) is not None:
                c = it["correction"]
                writer.writerow([number, c["position"], c["token_id"], c["token"], status, "", c["p"], "", "", "", ""])
        return out.getvalue()

    def accept_lengths(self) -> list[int]:
        """Spec-Bench style: tokens emitted per iteration (accepted drafts plus the correction)."""
        return [it["accepted_count"] + (it["correction"] is not None) for it in self.iterations]

    @property
    def traced(self) -> bool:
        return bool(self.config.get("traced", True))

    def _repr_html_(self) -> str:
        """Inline in a notebook: settings, headline numbers, legend and the coloured token stream."""
        return _notebook_views().trace_html(self)

    def show(self, view: str = "tokens", *, baseline: Trace | None = None, iteration: int = 1):
        """A notebook view: "tokens", "step", "timeline", "acceptance" or "theory" (specviz.teaching.notebook)."""
        return _notebook_views().show(self, view, baseline=baseline, iteration=iteration)


# How a trace finds its notebook views. They (specviz.teaching.notebook) draw with the charts, which read
# traces, so the trace cannot import them without an import circle: specviz/__init__.py registers
# a loader instead, on `import specviz`, and the views load on a trace's first display.
def _unregistered() -> Any:
    raise RuntimeError("No notebook views are registered (specviz/__init__.py registers specviz.teaching.notebook).")


_notebook_views: Callable[[], Any] = _unregistered


def register_notebook_views(load: Callable[[], Any]) -> None:
    """load() returns the notebook views: a module with trace_html(trace) and show(trace, view, ...)."""
    global _notebook_views
    _notebook_views = load
