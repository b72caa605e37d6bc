"""The draft head run several draft positions deep over whole answers at once, as the recipe
(specviz.training.train_head) trains it: the batch layout (`pad_batch`: ids, the features the head
fuses, the answer mask), the unrolled forward of "training-time test" (`unrolled`, EAGLE-3 and
HASS: step k reads the features the head itself predicted at step k - 1, exactly what drafting sees
at draft position k + 1) and the loss of one batch on it (`head_loss`). The held-out measure
(specviz.training.head_eval) reads the same forward.
"""

from __future__ import annotations

import torch
from torch import nn

from specviz.engine.draft_head import DraftHead
from specviz.training.head_data import Sequence


def pad_batch(seqs: list[Sequence], device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> ids [B, L] (right-padded with 0), features [B, L - 1, (n+1)D] float32 (the n earlier
    layers' outputs, when the text holds them, then f), loss mask [B, L - 1]: head index j (reading
    f_j, x_{j+1}, predicting x_{j+2}) counts when x_{j+2} is an answer token."""
    width = max(s.ids.shape[0] for s in seqs)
    dim = seqs[0].features.shape[-1] * (1 + len(seqs[0].layer_ids))
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    feats = torch.zeros(len(seqs), width - 1, dim)
    mask = torch.zeros(len(seqs), width - 1, dtype=torch.bool)
    for i, s in enumerate(seqs):
        n = s.ids.shape[0]
        ids[i, :n] = s.ids
        feats[i, : n - 1] = _all_features(s)
        mask[i, max(0, s.start - 2) : n - 2] = True  # j + 2 in [start, n - 1]
    return ids.to(device), feats.to(device), mask.to(device)


def _all_features(s: Sequence) -> torch.Tensor:
    """[L - 1, (n+1)D]: the earlier layers' outputs, then f, as the head's fused() reads them."""
    if s.layers is None:
        return s.features.float()
    return torch.cat([s.layers.flatten(-2).float(), s.features.float()], dim=-1)


def _shift(t: torch.Tensor, by: int, dim: int) -> torch.Tensor:
    """t shifted `by` places towards higher indices along dim, zeros coming in: out[j] = t[j - by]."""
    if by == 0:
        return t
    pad = torch.zeros_like(t.narrow(dim, 0, by))
    return torch.cat([pad, t.narrow(dim, 0, t.shape[dim] - by)], dim=dim)


def unrolled(head: DraftHead, ids: torch.Tensor, feats: torch.Tensor, steps: int) -> list[tuple]:
    """The head run `steps` draft positions deep at every head index at once.

    ids [B, L], feats [B, N = L - 1, D] (f_0..f_{L-2}) -> per step k (0-based) f^ [B, N, D] (the
    logits are head.lm_head(f^), left to the caller, which needs them at few positions), where
    index j of step k is draft position k + 1 of a chain that started with
    the true f_{j-k}: it read f^ of step k - 1 at index j - 1, and attends to step-0 keys at
    indices <= j - k (true features) and to step-m keys at index j - (k - m) for m = 1..k.
    """
    n = feats.shape[1]
    tokens = ids[:, 1:]  # [B, N] x_{j+1}
    positions = torch.arange(1, n + 1, device=ids.device)
    cos, sin = head.rope(positions)  # [N, hd]
    rows = torch.arange(n, device=ids.device)
    inputs = head.fused(feats)  # [B, N, D]
    keys = [[] for _ in head.layers]  # keys[i][m]: layer i's keys of step m, [B, H, N, hd]
    values = [[] for _ in head.layers]
    outs = []
    for k in range(steps):
        x = head.merge(inputs, tokens)  # [B, N, D]
        causal = rows[None, :] <= rows[:, None] - k  # [N, N] step-0 keys up to the chain start
        for layer, lk, lv in zip(head.layers, keys, values, strict=True):
            scale = layer.head_dim**-0.5
            q, key, value = layer.qkv(x, cos, sin)  # [B, H, N, hd], [B, Hkv, N, hd]
            lk.append(layer.expand_kv(key))
            lv.append(layer.expand_kv(value))
            scores = (q @ lk[0].transpose(-1, -2)) * scale  # [B, H, N, N]
            scores = scores.masked_fill(~causal, float("-inf"))
            diag = [(q * _shift(lk[m], k - m, 2)).sum(-1, keepdim=True) * scale for m in range(1, k + 1)]
            weights = torch.softmax(torch.cat([scores, *diag], dim=-1), dim=-1)  # [B, H, N, N + k]
            attended = weights[..., :n] @ lv[0]  # [B, H, N, hd]
            for m in range(1, k + 1):
                attended = attended + weights[..., n + m - 1 : n + m] * _shift(lv[m], k - m, 2)
            x = layer.finish(x, attended)
        f_hat = head.norm(x)
        outs.append(f_hat)
        inputs = _shift(f_hat, 1, 1)  # step k + 1 at index j reads f^ at j - 1
    return outs


def head_loss(head, ids, feats, mask, cfg, generator) -> tuple[torch.Tensor, float]:
    """Unrolled loss of one batch -> (loss, first-step loss as a float for the log). cfg: the recipe's
    HeadTrainConfig (specviz.training.train_head), of which it reads unroll, noise, tv_weight and feature_weight."""
    d = head.cfg.hidden
    target_f = feats[:, 1:, -d:]  # [B, N - 1, D] f_{j+1}, the true feature that index j predicts
    m = mask[:, :-1]  # [B, N - 1] answer positions; step k also needs k <= j (its chain start exists)
    with torch.no_grad():
        p_sub = torch.softmax(head.lm_head(target_f[m]).float(), dim=-1)  # [M, S] target's p on S, renormalised
    noisy = feats
    if cfg.noise > 0:
        blocks = feats.unflatten(-1, (-1, d))  # [B, N, n+1, D]: noise relative to each layer's own RMS
        rms = blocks.pow(2).mean(-1, keepdim=True).sqrt()
        u = torch.rand(blocks.shape, generator=generator, device=feats.device) * 2 - 1
        noisy = (blocks + cfg.noise * rms * u).flatten(-2)
    total, first = 0.0, 0.0
    column = torch.arange(m.shape[1], device=m.device)[None, :].expand_as(m)[m]  # [M] j of each answer position
    for k, f_hat in enumerate(unrolled(head, ids, noisy, cfg.unroll)):
        f_sel = f_hat[:, :-1][m]  # [M, D]
        log_q = torch.log_softmax(head.lm_head(f_sel).float(), dim=-1)  # [M, S]
        ce = -(p_sub * log_q).sum(-1)  # [M]
        if cfg.tv_weight:
            ce = ce + cfg.tv_weight * (1 - torch.minimum(p_sub, log_q.exp()).sum(-1))  # [M]
        feat = nn.functional.smooth_l1_loss(f_sel.float(), target_f[m].float(), reduction="none").mean(-1)  # [M]
        valid = (column >= k).float()  # [M]
        step_loss = ((ce + cfg.feature_weight * feat) * valid).sum() / valid.sum().clamp(min=1)
        total = total + (0.8**k) * step_loss
        if k == 0:
            first = float(step_loss.detach())
    return total, first
