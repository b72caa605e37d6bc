"""The names and one-line definitions of the acceptance quantities, the same on every page.

Pages, charts, the CLI and docs/design.md use these words; a test checks that no page spells
them on its own. Where two are shown together, `WHY_RATE_AND_ALPHA_DIFFER` says why they differ.
(Definitions in code: specviz.trace.summarize and specviz.trace.acceptance_by_position.)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    label: str  # as a metric or column title
    definition: str  # one line, for hover help and captions


ACCEPTANCE_RATE = Term(
    "Acceptance rate",
    "accepted drafts ÷ drafted tokens, measured; drafts after a rejection count as drafted (never checked)",
)
ACCEPTANCE_AT_POSITION = Term(
    "Acceptance at draft position k",
    "of the iterations that reached draft k (the k − 1 before it passed), the share where draft k passed",
)
ALPHA = Term(
    "α (expected acceptance)",
    "the mean of β = Σ min(p, q) over the drafts the text reached: the probability a draft passes, predicted",
)
BETA = Term("β", "Σ_x min(p(x), q(x)) at one position: the exact probability that its draft token passes")
MEAN_ACCEPTED_LENGTH = Term(
    "Tokens per iteration",
    "mean accepted length: new tokens ÷ iterations (target passes), the correction token included",
)
C = Term(
    "c (draft cost)",
    "the draft's time per drafted token ÷ the target's time per single-token step when it runs alone, measured on "
    "this machine (specviz.speedup)",
)
VERIFY_COST = Term(
    "Verify cost (target steps)",
    "v: the target's time per verification pass ÷ its time per single-token step when it runs alone, measured on "
    "this machine (specviz.speedup); the paper's formula assumes 1",
)

WHY_RATE_AND_ALPHA_DIFFER = (
    "The acceptance rate counts every drafted token, even those never checked because an earlier draft "
    "failed; α only averages where the text arrived. With a weak draft and a large γ the rate is far below α."
)
