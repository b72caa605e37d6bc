"""Turns one iteration's tensors into the plain numbers a trace stores (once per iteration).

The decoder hands over what Algorithm 1 produced (drafts, q, p, the verdict, the correction);
this module reads the numbers out, the top-10 lists and the token texts, and nothing else. Field
meanings are those of specviz.traces.trace.
"""

from __future__ import annotations

import torch

from specviz.decoding.verify import beta
from specviz.traces.trace import TOP_N


class IterationRecorder:
    """Records iterations of one run; keeps the text of every token id it mentions."""

    def __init__(self, tokenizer, speculative: bool):
        self.tokenizer = tokenizer
        self.speculative = speculative
        self.token_text: dict[str, str] = {}

    def record(self, index: int, start_ms: float, draft_ms: float, verify_ms: float, step, position0: int) -> dict:
        """step: a specviz.decoding.decoder.Step. position0: index in the generated text of its first draft."""
        q_top, p_top = top_tokens(step.q), top_tokens(step.p)
        draft_records = self.draft_records(step, position0, q_top, p_top)
        corr = self.correction(step, position0, p_top)
        residual_top = [corr["residual_top"]] if corr and corr["residual_top"] else []
        for pairs in q_top + p_top + residual_top:  # every id a chart may label: the residual's too
            for token_id, _ in pairs:
                self.text(token_id)
        record = {
            "index": index,
            "start_ms": start_ms,
            "draft_ms": draft_ms,
            "verify_ms": verify_ms,
            "accepted_count": step.verdict.accepted_count,
            "drafts": draft_records,
            "correction": corr,
        }
        if self.speculative:  # how many of gamma were drafted, by which drafter, and why it stopped
            record["drafting"] = self.drafting(step)
        if step.cache is not None:  # the caches' lengths: rows written, kept and rolled back
            record["cache"] = step.cache
        if step.walk is not None:  # a dynamic tree: its nodes, the accepted path, every level's tests
            record["tree"] = self.dynamic_tree(step.walk)
        elif step.other_branches is not None:  # a draft tree: which branch was kept, and the others
            record["tree"] = self.tree(step)
        return record

    def draft_records(self, step, position0: int, q_top: list, p_top: list) -> list[dict]:
        """The iteration's `drafts` (specviz.traces.trace): each draft's q, p, test and top lists."""
        drafts, q, p, verdict = step.drafts, step.q, step.p, step.verdict
        g, n = drafts.shape[0], verdict.accepted_count
        rows = torch.arange(g, device=drafts.device)
        q_x, p_x = q[rows, drafts].tolist(), p[rows, drafts].tolist()
        accept_prob = verdict.accept_prob.tolist()
        # Only the drafts up to the first rejection were judged; later ones never met their r.
        r = verdict.r.tolist() if verdict.r is not None else [None] * g
        betas = beta(p[:g], q).clamp(max=1.0).tolist()  # float32 sums can overshoot 1 by ~1e-5
        ids = drafts.tolist()
        records = [
            {
                "position": position0 + j,
                "token_id": ids[j],
                "token": self.text(ids[j]),
                "q": q_x[j],
                "p": p_x[j],
                "accept_prob": accept_prob[j],
                "r": r[j],
                "accepted": j < n,
                "q_top": q_top[j],
                "p_top": p_top[j],
                "beta": betas[j],
            }
            for j in range(g)
        ]
        if verdict.block is not None:  # block verification: the weight after draft j and the stop test there
            weights, h = verdict.block.weights[1:].tolist(), verdict.block.h[1:].tolist()
            for j, record in enumerate(records):
                record["block"] = {"weight": min(1.0, weights[j]), "h": min(1.0, h[j])}
        return records

    def correction(self, step, position0: int, p_top: list) -> dict | None:
        """The iteration's `correction` (specviz.traces.trace); None when it ended on an end-of-sequence draft."""
        verdict, correction, n = step.verdict, step.correction, step.verdict.accepted_count
        if correction is None:
            return None
        dist = verdict.residual if verdict.residual is not None else step.p[n]
        return {
            "kind": verdict.correction_kind if self.speculative else "target",
            "position": position0 + n,
            "token_id": correction,
            "token": self.text(correction),
            "p": float(dist[correction]),
            "residual_top": top_tokens(verdict.residual[None])[0] if verdict.residual is not None else None,
            "p_top": p_top[n],
            **self.block_correction(verdict),
        }

    @staticmethod
    def block_correction(verdict) -> dict:
        """A block residual's weight w and mass sum max(0, w p - q) (the residual before normalising)."""
        if verdict.correction_kind != "block_resample":
            return {}
        n = verdict.accepted_count
        return {"block": {"weight": float(verdict.block.weights[n]), "mass": float(verdict.block.masses[n])}}

    def tree(self, step) -> dict:
        """The iteration's `tree` (specviz.traces.trace): the branch kept, the others, the first tokens rejected."""
        return {
            "kept_branch": step.kept_branch,
            "other_branches": [
                [{"token_id": t, "token": self.text(t)} for t in branch] for branch in step.other_branches.tolist()
            ],
            "rejected_first": [
                {
                    "branch": t.branch,
                    "token_id": t.token,
                    "token": self.text(t.token),
                    "p": t.p,
                    "q": t.q,
                    "accept_prob": t.accept_prob,
                    "r": t.r,
                }
                for t in step.rejected_first or []
            ],
        }

    def dynamic_tree(self, walk) -> dict:
        """A dynamic tree's `tree` (specviz.traces.trace): the fields a branch tree has, read the same
        way (kept_branch: how many first tokens were rejected before drafts[0]; no other branches), and
        its nodes, the accepted path and every level's rejected tests."""
        t = walk.tree
        first = walk.tests[0]
        before_kept = first if walk.path else first[:-1]  # the last rejected first token is drafts[0]
        nodes = [
            {"token_id": tok, "token": self.text(tok), "parent": parent, "depth": depth, "score": score}
            for tok, parent, depth, score in zip(
                t.tokens.tolist(), t.parents.tolist(), t.depth.tolist(), t.score.tolist(), strict=True
            )
        ]
        return {
            "kept_branch": len(before_kept),
            "other_branches": [],
            "rejected_first": [self.test(test, test.branch) for test in before_kept],
            "nodes": nodes,
            "path": list(walk.path),
            "tests": [[{"node": test.branch, **self.test(test, None)} for test in level] for level in walk.tests],
        }

    def test(self, test, branch: int | None) -> dict:
        """A rejected test as the trace stores it (with its branch when it is one of rejected_first)."""
        out = {} if branch is None else {"branch": branch}
        return {
            **out, "token_id": test.token, "token": self.text(test.token), "p": test.p, "q": test.q,
            "accept_prob": test.accept_prob, "r": test.r,
        }  # fmt: skip

    def drafting(self, step) -> dict:
        """The iteration's `drafting` (specviz.traces.trace): gamma, source, stop, confidence, threshold."""
        report = step.report if step.gamma > 0 else None  # asked for nothing: the drafter was not called
        g = step.drafts.shape[0]
        stop = None if report is None else report.stop
        eos = getattr(self.tokenizer, "eos_token_id", None)
        if stop is None and g < step.gamma and g and eos is not None and int(step.drafts[-1]) == eos:
            stop = "eos"  # nothing is drafted past an end of sequence
        return {
            "gamma": step.gamma,
            "source": None if report is None else report.source,
            "stop": stop,
            "confidence": None if report is None or stop not in ("confidence", "cost") else report.confidence,
            "threshold": None if report is None or stop not in ("confidence", "cost") else report.threshold,
        }

    def text(self, token_id: int) -> str:
        key = str(token_id)
        if key not in self.token_text:
            tok = self.tokenizer
            self.token_text[key] = tok.decode([token_id]) if tok is not None else f"<{token_id}>"
        return self.token_text[key]


def top_tokens(probs: torch.Tensor) -> list[list[list]]:
    """probs [rows, V] -> per row, [token_id, prob] for the TOP_N most likely tokens with prob > 0."""
    if probs.shape[0] == 0:
        return []
    k = min(TOP_N, probs.shape[-1])
    values, indices = torch.topk(probs, k, dim=-1)
    return [
        [[i, v] for i, v in zip(ix, vs, strict=True) if v > 0]
        for ix, vs in zip(indices.tolist(), values.tolist(), strict=True)
    ]
