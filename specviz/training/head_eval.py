"""Measuring the draft head on held-out answers (`HeldOutText`), as the recipe
(specviz.training.train_head) does every `--eval-every` steps: alpha per draft position on sampled
text (T=1, with the exact p of float32 features), and, on greedy text, the greedy agreement per
position and the tokens per iteration at T=0 and gamma 4. The head runs unrolled as in training
(specviz.training.head_unroll), on its own predicted features.
"""

from __future__ import annotations

import torch

from specviz.engine.draft_head import DraftHead
from specviz.training.head_data import Sequence
from specviz.training.head_unroll import pad_batch, unrolled


class HeldOutText:
    """Held-out answers (float32 features, so p is exact) to measure alpha per draft position."""

    def __init__(self, held: list[Sequence], device, positions: int = 4):
        self.sampled = [s for s in held if s.temperature > 0]
        self.greedy = [s for s in held if s.temperature == 0]
        self.device, self.positions = device, positions

    @torch.no_grad()
    def measure(self, head: DraftHead, gamma: int = 4) -> dict:
        head.eval()
        alpha = self._sampled_alpha(head)
        agree, accepted = self._greedy_agreement_and_accepted_length(head, gamma)
        head.train()
        return {
            "alpha_by_position": [round(a, 4) for a in alpha],
            "greedy_agreement_by_position": [round(a, 4) for a in agree],
            "greedy_accepted_length_gamma4": round(accepted, 3),
        }

    def _runs(self, head, seqs):
        embed = head.embed.float()
        for s in seqs:
            ids, feats, mask = pad_batch([s], self.device)
            outs = unrolled(head, ids, feats, self.positions)
            p = torch.softmax(feats[0, 1:, -embed.shape[1] :] @ embed.T, dim=-1)  # [N - 1, V] exact target p at T=1
            yield mask[0, :-1], p, outs

    def _valid(self, mask, k: int):
        """The answer positions a draft at position k is measured at: k tokens of history at least."""
        return mask & (torch.arange(mask.shape[0], device=mask.device) >= k)

    @staticmethod
    def _draft_q(head, p, f_hat):
        """The head's q over the whole vocabulary at every position (0 outside its subset)."""
        q = torch.zeros_like(p)
        q[:, head.subset] = torch.softmax(head.lm_head(f_hat[0, :-1]).float(), dim=-1)  # [N - 1, V]
        return q

    def _sampled_alpha(self, head) -> list[float]:
        """Mean beta = sum min(p, q) per draft position over the sampled answers."""
        sums, counts = [0.0] * self.positions, [0] * self.positions
        for mask, p, outs in self._runs(head, self.sampled):
            for k, f_hat in enumerate(outs):
                q = self._draft_q(head, p, f_hat)
                valid = self._valid(mask, k)
                sums[k] += float(torch.minimum(p, q).sum(-1)[valid].sum())
                counts[k] += int(valid.sum())
        return [s / c if c else 0.0 for s, c in zip(sums, counts, strict=True)]

    def _greedy_agreement_and_accepted_length(self, head, gamma: int) -> tuple[list[float], float]:
        """Over the greedy answers, in one pass: how often the draft's argmax equals the target's at
        each position, and the mean tokens per iteration at T=0 and gamma draft positions over chains
        starting at every answer position (1 + the run of leading drafts equal to the argmax)."""
        outs_needed = min(gamma, self.positions)
        sums, counts = [0.0] * self.positions, [0] * self.positions
        total, chains = 0.0, 0
        for mask, p, outs in self._runs(head, self.greedy):
            argmax_p = p.argmax(-1)  # [N - 1]
            # [N - 1] each: the draft at position k equals the target's argmax (the head's argmax
            # over its subset is its argmax over the whole vocabulary: q is 0 outside the subset)
            hits = [head.subset[head.lm_head(f_hat[0, :-1]).argmax(-1)] == argmax_p for f_hat in outs]
            for k, hit in enumerate(hits):
                valid = self._valid(mask, k)
                sums[k] += float(hit.float()[valid].sum())
                counts[k] += int(valid.sum())
            n = argmax_p.shape[0]
            for start in mask.nonzero()[:, 0].tolist():
                run = 0
                while run < outs_needed and start + run < n and bool(hits[run][start + run]) and mask[start + run]:
                    run += 1
                total += 1 + run
                chains += 1
        agree = [s / c if c else 0.0 for s, c in zip(sums, counts, strict=True)]
        return agree, total / chains if chains else 0.0
