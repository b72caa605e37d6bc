"""The summary's quantities, defined once: α from the positions the text reached, acceptance by draft
position, and a run's summary (specviz.traces.trace stores it; validation checks it; the decoder,
the charts, the race and the bench call these). Plain data in, plain numbers out: no torch."""

from __future__ import annotations

from typing import Any


def reached_betas(iterations: list[dict]) -> list[float]:
    """beta of every position the text reached: each iteration's accepted drafts and its first
    rejected one. Later drafts sat on a prefix that was thrown away, so they do not count."""
    return [d["beta"] for it in iterations for d in it["drafts"][: it["accepted_count"] + 1]]


def acceptance_by_position(iterations: list[dict], gamma: int) -> list[dict[str, Any]]:
    """Per draft position k = 1..gamma, over the iterations that reached it (drafted k tokens and
    accepted the first k - 1): reached, accepted, acceptance (accepted / reached) and mean beta."""
    rows = []
    for k in range(1, gamma + 1):
        reached = [it for it in iterations if len(it["drafts"]) >= k and it["accepted_count"] >= k - 1]
        accepted = sum(it["accepted_count"] >= k for it in reached)
        betas = [it["drafts"][k - 1]["beta"] for it in reached]
        rows.append(
            {
                "position": k,
                "reached": len(reached),
                "accepted": accepted,
                "acceptance": accepted / len(reached) if reached else None,
                "mean_beta": sum(betas) / len(betas) if betas else None,
            }
        )
    return rows


def summarize(
    iterations: int,
    drafted: int,
    accepted: int,
    new_tokens: int,
    wall_ms: float,
    draft_ms: float,
    verify_ms: float,
    betas: list[float] | None,
) -> dict[str, Any]:
    """The summary of a run (or of a pooled set of runs): the one place its quantities are defined.

    acceptance_rate       accepted / drafted (drafts after a rejection count as drafted)
    mean_accepted_length  new tokens / iterations: tokens per target pass, correction included
    alpha                 mean of `betas` (see reached_betas): the expected acceptance rate
    """
    return {
        "iterations": iterations,
        "target_calls": iterations,
        "drafted": drafted,
        "accepted": accepted,
        "new_tokens": new_tokens,
        "acceptance_rate": accepted / drafted if drafted else None,
        "mean_accepted_length": new_tokens / iterations if iterations else 0.0,
        "alpha": sum(betas) / len(betas) if betas else None,
        "wall_ms": wall_ms,
        "tokens_per_s": new_tokens / (wall_ms / 1e3) if wall_ms > 0 else 0.0,
        "draft_ms": draft_ms,
        "verify_ms": verify_ms,
    }
