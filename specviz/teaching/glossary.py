"""The names and one-line definitions of the acceptance quantities, the same on every page.

Pages, charts, the CLI and docs/design.md use these words; a test checks that no page spells
them on its own. Where two are shown together, `WHY_RATE_AND_ALPHA_DIFFER` says why they differ.
(Definitions in code: specviz.traces.trace.summarize and specviz.traces.trace.acceptance_by_position.)
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.config import TREE_BRANCHES


def count_word(n: int) -> str:
    """'two' for 2: a small count in words (digits past ten)."""
    return dict(enumerate("zero one two three four five six seven eight nine ten".split())).get(n, str(n))


@dataclass(frozen=True)
class Term:
    label: str  # as a metric or column title
    definition: str  # one line, for hover help and captions


ACCEPTANCE_RATE = Term(
    "Acceptance rate",
    "accepted drafts ÷ drafts actually made, measured (a draft tree counts only the branch it kept; drafts "
    "after a rejection count as made, never checked)",
)
ACCEPTANCE_AT_POSITION = Term(
    "Acceptance at draft position k",
    "of the iterations that drafted a k-th token and reached it (the k − 1 before it passed), the share where "
    "draft k passed",
)
ALPHA = Term(
    "α (expected acceptance)",
    "the mean of β = Σ min(p, q) over the drafts the text reached: the chance each one's own test passes, "
    "predicted (a tree's kept first draft: its test against what the branches tried before it left of p)",
)
BETA = Term("β", "Σ_x min(p(x), q(x)) at one position: the exact probability that its draft token passes")
MEAN_ACCEPTED_LENGTH = Term(
    "Tokens per iteration",
    "new tokens ÷ iterations (target passes), the correction token included; every iteration counts, also "
    "those that drafted fewer than γ (an early stop, the first iteration's no draft)",
)
DRAFTS_MADE = Term(
    "Drafts made",
    "how many of γ an iteration actually drafted: γ is the most; the engine drafts fewer when the draft head "
    "stops early, the n-gram match runs out, or a draft ends the text, and none in the first iteration",
)
EARLY_STOP = Term(
    "Early stop",
    "the draft head stops drafting deeper once its confidence in every branch's latest draft is below a "
    "threshold; it reads only q, never p, so the output stays exact, but γ is then only the most it drafts "
    "(not in the paper's Algorithm 1)",
)
DRAFT_TREE = Term(
    "Draft tree",
    f"the draft head drafts {count_word(TREE_BRANCHES)} branches with different first tokens, checked in one "
    "target pass; the target keeps one (recursive rejection sampling over the first tokens), so a first "
    "position gets one test per branch (not in the paper's Algorithm 1)",
)
HISTOGRAM_PREDICTION = Term(
    "Predicted tokens per iteration",
    "the truncated geometric from α for the drafts each iteration actually made: with g drafts, k ≤ g "
    "tokens with probability α^(k−1)(1 − α), g + 1 with α^g, averaged over the iterations counted",
)
ALGORITHM_FASTEST = Term(
    "Fastest (default)",
    "the engine as measured fastest: the hybrid draft (n-gram when the text repeats itself, else the draft "
    f"head), the head's {count_word(TREE_BRANCHES)}-branch draft tree and its early stop; γ is the most it drafts",
)
ALGORITHM_PAPER = Term(
    "The paper's algorithm",
    "Algorithm 1 as Leviathan et al. state it: the draft head drafts one chain of γ tokens, no tree, no early "
    "stop, so γ does what the formula says; it drafts fewer only where it cannot do otherwise: none in the first "
    "iteration (the head has no target features yet), fewer when max new tokens leaves room for fewer than γ, "
    "and a chain ends early at a draft that ends the text",
)
C = Term(
    "c (draft cost)",
    "the draft's time per drafted token ÷ the target's time per single-token step when it runs alone, measured on "
    "this machine (specviz.traces.speedup)",
)
VERIFY_COST = Term(
    "Verify cost (target steps)",
    "v: the target's time per verification pass ÷ its time per single-token step when it runs alone, measured on "
    "this machine (specviz.traces.speedup); the paper's formula assumes 1",
)

WHY_RATE_AND_ALPHA_DIFFER = (
    "The acceptance rate counts every draft made, even those never checked because an earlier draft failed; "
    "α only averages where the text arrived, so drafts left unchecked pull the rate below α (most with a weak "
    "draft and many drafts per iteration). The engine's speed-ups pull the other way: an early stop leaves "
    "fewer drafts unchecked, and a draft tree gives the first position one test per branch while the rate "
    "counts only the kept branch, so with a tree the rate can sit above α."
)
