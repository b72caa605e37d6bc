"""Drafters: anything that proposes gamma tokens and the distribution q each was drawn from.

One small interface (like transformers' candidate generators), seven kinds:

- ModelDrafter: a small causal LM with its own KV cache. Before drafting it rolls its cache
  back to the longest prefix it shares with the current context, then feeds only the tokens it
  has not seen (the correction, or after a full acceptance the last draft plus the bonus).
- NgramDrafter: prompt lookup. Finds the latest earlier occurrence of the context's last n
  tokens and proposes what followed it. q is one-hot, so a draft token x is accepted with
  probability p(x).
- The target drafting for itself (a ModelDrafter over the target): q equals p, so everything
  is accepted. With the n-gram drafter it shows both ends of the range.
- HeadDrafter: the draft head (specviz.engine.draft_head), which reads the target's own features. It is the
  one drafter with `reads_features = True`: after each verification the decoder hands it the
  target's final-norm features of the positions that stayed on the text (`observe`), from the
  same forward pass, so it never costs a second pass. A head that fuses earlier layers (EAGLE-3)
  names them in `feature_layers`, and their outputs come in the same pass.
- HybridDrafter: per iteration, the n-gram draft when the context holds a match, else the head.
  Each iteration's q is the distribution its own drafter sampled from, so it stays exact.
- SuffixDrafter (suffix.py, SuffixDecoding): suffix trees (SuffixTree) over the current text and
  over the target's earlier outputs in this process (SuffixMemory), proposing the continuation with
  the best frequency-based score; q one-hot. The hybrid takes it as its lookup ("hybrid-suffix").
- StagedDrafter (staged.py, staged speculation): a draft model whose own drafting is guessed by
  n-gram lookup and checked in one pass of its own; the same drafts and q as the plain ModelDrafter,
  in fewer of its passes when the guesses hold.

Draft trees. The head also proposes a tree (`propose_tree`): `branches` different tokens at the
first draft position, each continued for gamma - 1 more (branches chains sharing the root). At T=0
they are its top choices, continued greedily; at T>0 they are drawn from q without replacement (the
second from q without the first), continued by sampling. The decoder verifies every branch in one
target pass and keeps one by recursive rejection sampling (specviz.decoding.verify.choose_branch), which
keeps the output exact at any temperature; at T=0 that is the branch starting with the target's
own choice. A drafter without `propose_tree` (not a `TreeDrafter`) drafts a chain, a tree of one
branch (`draft_tree`).

Stopping early. The head stops drafting deeper once its confidence in every branch's latest draft
is below `min_confidence` (config.HEAD_MIN_CONFIDENCE): q(token) when sampling, its softmax top
probability at T=0. gamma is then the most it drafts. The decision reads only q and the drafts,
never p, so the output stays exact (as transformers' assistant_confidence_threshold).

The paper's algorithm. `config.PAPER_DRAFT` names the draft head run as Algorithm 1 states it: one
chain of exactly gamma drafts, no tree, no early stop (the app's "paper" preset, config.ALGORITHMS).

What each proposal was. After every proposal a drafter's `report` (a DraftReport) says which drafter
drafted and why it drafted fewer than it was asked, if it did; the decoder hands it to the trace
(an iteration's `drafting`), so every page can say where the engine left Algorithm 1.

Files: base.py (the protocols, DraftReport, draft_tree), model.py, ngram.py, head.py, hybrid.py,
suffix.py, staged.py, and resolve.py (`resolve_drafter` turns a draft name into one of these; the one place that knows
the names). The names below are the package's public ones.
"""

from specviz.drafters.base import STOP_REASONS, Drafter, DraftReport, TreeDrafter, draft_tree, sample_token
from specviz.drafters.head import HeadDrafter, load_draft_head
from specviz.drafters.hybrid import HybridDrafter
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter, lookup_continuation
from specviz.drafters.resolve import needs_no_model, resolve_drafter
from specviz.drafters.staged import StagedDrafter
from specviz.drafters.suffix import SuffixDrafter, SuffixMemory, SuffixTree

__all__ = [
    "STOP_REASONS",
    "DraftReport",
    "Drafter",
    "HeadDrafter",
    "HybridDrafter",
    "ModelDrafter",
    "NgramDrafter",
    "StagedDrafter",
    "SuffixDrafter",
    "SuffixMemory",
    "SuffixTree",
    "TreeDrafter",
    "draft_tree",
    "load_draft_head",
    "lookup_continuation",
    "needs_no_model",
    "resolve_drafter",
    "sample_token",
]
