"""Suffix decoding (Oliaro et al. 2024, SuffixDecoding): propose the continuation that most often
followed the context's longest matching suffix, in the current text (prompt and output so far) and in
the target's own earlier outputs in this process. q is one-hot, so a draft x is accepted with
probability p(x) and the output stays exact whatever the trees hold.

A SuffixTree here is a depth-bounded suffix trie with counts: every substring of at most `depth`
tokens of the sequences it holds is a path from the root, and each node counts how often its path
occurs. The empirical probability of a next token is its child's count over the node's count; a
continuation's score is the sum of its prefixes' probabilities (the expected number of its tokens
the target would accept, were the counts its probabilities), as SuffixDecoding scores it.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict

import torch

from specviz.config import SamplingConfig
from specviz.drafters.base import DraftReport
from specviz.drafters.ngram import one_hot_drafts

SUFFIX_DEPTH = 24  # longest path the tries keep: matches and statistics beyond it add little
MIN_TOKEN_PROB = 0.1  # stop the continuation once its estimated probability falls below this
MEMORY_OUTPUTS = 256  # earlier outputs the process keeps; the oldest is forgotten first
# ... and at most this many of their tokens: a token adds up to SUFFIX_DEPTH trie nodes (a few kB
# where the text does not repeat), so 256 outputs of 1024 tokens could hold gigabytes; 16k tokens
# stay at a small fraction of that at the worst (the estimate: docs/benchmarks.md, "Figures once
# kept in code comments", "Memory bounds").
MEMORY_TOKENS = 16_384


class _Node:
    __slots__ = ("children", "count")

    def __init__(self):
        self.children: dict[int, _Node] = {}
        self.count = 0


class SuffixTree:
    """A depth-bounded suffix trie with counts over several token sequences (documents), each grown
    at its end (`extend`) and removable as a whole (`remove`)."""

    def __init__(self, depth: int = SUFFIX_DEPTH):
        if depth < 1:
            raise ValueError(f"depth must be at least 1; got {depth}.")
        self.depth = depth
        self.root = _Node()
        self.docs: dict[object, list[int]] = {}
        self._ends: dict[object, list[_Node]] = {}  # per document: the nodes of its suffixes, shortest first

    def extend(self, doc: object, tokens: list[int]) -> None:
        """Append tokens to document `doc` (a new one if unseen), counting every new path."""
        ids = self.docs.setdefault(doc, [])
        ends = self._ends.setdefault(doc, [])
        for token in tokens:
            ends[:] = [self._step(node, token, +1) for node in [self.root, *ends[: self.depth - 1]]]
            ids.append(token)

    def remove(self, doc: object) -> None:
        """Forget document `doc`: replay it, taking back its counts and pruning nodes left at zero."""
        ends: list[_Node] = []
        for token in self.docs.pop(doc, []):
            ends = [self._step(node, token, -1) for node in [self.root, *ends[: self.depth - 1]]]
        self._ends.pop(doc, None)

    @staticmethod
    def _step(node: _Node, token: int, sign: int) -> _Node:
        child = node.children.get(token)
        if child is None:
            child = node.children[token] = _Node()
        child.count += sign
        if child.count == 0:  # the replay still holds the node, so its own children are taken back too
            del node.children[token]
        return child

    def matches(self, ids: list[int], min_match: int = 1) -> list[tuple[int, _Node]]:
        """(length, node) for every suffix of ids of at least min_match tokens that is a path, longest
        first (a suffix of a path's occurrence is a path too, so the lengths run down from the longest)."""
        found = []
        for length in range(min(self.depth, len(ids)), min_match - 1, -1):
            node = self._walk(ids[len(ids) - length :])
            if node is not None:
                found.append((length, node))
        return found

    def _walk(self, path: list[int]) -> _Node | None:
        node = self.root
        for token in path:
            node = node.children.get(token)
            if node is None:
                return None
        return node

    def propose(self, ids: list[int], gamma: int, min_match: int = 1, min_prob: float = MIN_TOKEN_PROB):
        """(score, tokens): the best-scoring continuation of up to gamma tokens over every match of
        ids' suffixes of at least min_match tokens (ties: the longer match). (0.0, []) when none."""
        best: tuple[float, list[int]] = (0.0, [])
        for _, node in self.matches(ids, min_match):
            score, tokens = continuation(node, gamma, min_prob)
            if score > best[0]:
                best = (score, tokens)
        return best


def continuation(node: _Node, gamma: int, min_prob: float) -> tuple[float, list[int]]:
    """Follow the most frequent child (ties: the smallest id) while the path's estimated probability
    (the product of count ratios) stays at least min_prob: (score, tokens), score the sum of those
    probabilities."""
    tokens: list[int] = []
    prob, score = 1.0, 0.0
    while len(tokens) < gamma and node.children:
        token, child = max(node.children.items(), key=lambda kv: (kv[1].count, -kv[0]))
        prob *= child.count / node.count
        if prob < min_prob:
            break
        tokens.append(token)
        score += prob
        node = child
    return score, tokens


class SuffixMemory:
    """The target's earlier outputs in this process, as one SuffixTree shared by every run (thread-safe):
    in the app, every session's, so one student's answers can be drafted (and shown as drafts) in
    another's run, and a rerun drafts from its own earlier answer. It keeps the latest `max_outputs`
    outputs and `max_tokens` of their tokens, forgetting the oldest first."""

    def __init__(self, depth: int = SUFFIX_DEPTH, max_outputs: int = MEMORY_OUTPUTS, max_tokens: int = MEMORY_TOKENS):
        self.tree = SuffixTree(depth)
        self.max_outputs, self.max_tokens = max_outputs, max_tokens
        self._tokens = 0  # held by the runs remembered
        self._runs: OrderedDict[int, None] = OrderedDict()
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def new_run(self) -> int:
        """A fresh document for one run's output; the oldest is forgotten beyond max_outputs."""
        with self._lock:
            run = next(self._ids)
            self._runs[run] = None
            while len(self._runs) > self.max_outputs:
                self._forget_oldest()
            return run

    def _forget_oldest(self) -> None:
        oldest = self._runs.popitem(last=False)[0]
        self._tokens -= len(self.tree.docs.get(oldest, []))
        self.tree.remove(oldest)

    def extend(self, run: int, tokens: list[int]) -> None:
        with self._lock:
            if run in self._runs:  # a run forgotten while still going adds nothing more
                self.tree.extend(run, tokens)
                self._tokens += len(tokens)
            while self._tokens > self.max_tokens and len(self._runs) > 1:
                self._forget_oldest()

    def propose(self, ids: list[int], gamma: int, min_match: int, min_prob: float) -> tuple[float, list[int]]:
        with self._lock:
            return self.tree.propose(ids, gamma, min_match, min_prob)


PROCESS_MEMORY = SuffixMemory()  # the outputs of every run of this process that drafts with suffix trees


class SuffixDrafter:
    """Suffix decoding: the best-scoring continuation of the context's suffix, from the current text's
    tree or from the memory of earlier outputs (SuffixMemory; the process's own unless given one)."""

    name = "suffix"
    reads_features = False
    feature_layers = ()

    def __init__(self, min_match: int = 1, min_prob: float = MIN_TOKEN_PROB, memory: SuffixMemory | None = None):
        self.min_match, self.min_prob = min_match, min_prob
        self.memory = PROCESS_MEMORY if memory is None else memory

    def start(self, sampling: SamplingConfig, generator: torch.Generator, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.text = SuffixTree(self.memory.tree.depth)  # this run's prompt and output so far
        self.prompt_length: int | None = None
        self.run = self.memory.new_run()

    def propose(self, context: torch.Tensor, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        ids = context.tolist()
        seen = len(self.text.docs.get(0, []))
        self.text.extend(0, ids[seen:])  # the text only grows: accepted tokens are final
        if self.prompt_length is None:
            self.prompt_length = len(ids)  # the first proposal's context stands for the prompt
        else:
            self.memory.extend(self.run, ids[max(seen, self.prompt_length) :])
        here = self.text.propose(ids, gamma, self.min_match, self.min_prob)
        before = self.memory.propose(ids, gamma, self.min_match, self.min_prob)
        tokens = here[1] if here[0] >= before[0] else before[1]
        self.report = DraftReport("suffix", None if len(tokens) == gamma else "match_end" if tokens else "no_match")
        return one_hot_drafts(tokens, self.vocab_size, context.device)

    def observe(self, features: torch.Tensor, first_position: int) -> None:
        pass
