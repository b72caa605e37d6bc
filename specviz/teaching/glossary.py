"""The names and one-line definitions of the acceptance quantities, the same on every page.

Pages, charts, the CLI and docs/design.md use these words; a test checks that no page spells
them on its own. Their texts, in each language, are the catalogue's section "glossary"
(specviz.teaching.catalogue); a page asks `term(name, lang)`. Where two are shown together,
`why_rate_and_alpha_differ(lang)` says why they differ.
(Definitions in code: specviz.traces.trace.summarize and specviz.traces.trace.acceptance_by_position.)
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.config import TREE_BRANCHES
from specviz.teaching import catalogue


def count_word(n: int) -> str:
    """'two' for 2: a small count in words (digits past ten)."""
    return dict(enumerate("zero one two three four five six seven eight nine ten".split())).get(n, str(n))


@dataclass(frozen=True)
class Term:
    label: str  # as a metric or column title
    definition: str  # one line, for hover help and captions


def term(name: str, lang: str = "en") -> Term:
    """The term `name` (a constant's name in lower case: "alpha", "verify_cost") in `lang`, from the
    catalogue's section "glossary" (specviz/assets/words/<lang>/glossary.json)."""
    said = catalogue.words("glossary", lang)
    branches = count_word(TREE_BRANCHES) if catalogue.language_or_default(lang) == "en" else str(TREE_BRANCHES)
    return Term(said[f"{name}_label"], said[f"{name}_definition"].format(branches=branches))


def why_rate_and_alpha_differ(lang: str = "en") -> str:
    """Why the acceptance rate and α differ, where a page shows both."""
    return catalogue.words("glossary", lang)["why_rate_and_alpha_differ"]


# The English terms, for the library, the CLI and the notebook (pages ask term(name, lang)).
(
    ACCEPTANCE_RATE, ACCEPTANCE_AT_POSITION, ALPHA, BETA, MEAN_ACCEPTED_LENGTH, DRAFTS_MADE, EARLY_STOP, DRAFT_TREE,
    HISTOGRAM_PREDICTION, ALGORITHM_FASTEST, ALGORITHM_PAPER, C, VERIFY_COST,
) = (term(name) for name in (
    "acceptance_rate", "acceptance_at_position", "alpha", "beta", "mean_accepted_length", "drafts_made",
    "early_stop", "draft_tree", "histogram_prediction", "algorithm_fastest", "algorithm_paper", "c", "verify_cost",
))  # fmt: skip
WHY_RATE_AND_ALPHA_DIFFER = why_rate_and_alpha_differ()
