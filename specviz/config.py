"""Decoding settings as a frozen dataclass, validated when it is built.

Every limit lives here so the CLI, the app and the library refuse the same bad values with
the same words, and so do the limits of what a trace file may record. `slug` is the one rule
that turns a label or a prompt into a name for a URL or a file.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from specviz.errors import ConfigError

GAMMA_MIN, GAMMA_MAX = 1, 16
# The default gamma of the library, the CLI and the app: the most drafts per iteration. Chosen by
# measurement with the default draft (the hybrid, whose head drafts a two-branch tree and stops
# early when unsure, HEAD_MIN_CONFIDENCE): with the stop, gamma 3 was ahead of gamma 2 without it at
# T=1 and level at T=0 (the figures: docs/benchmarks.md, "Figures once kept in code comments",
# "The defaults"; the probe itself: "Stopping early").
DEFAULT_GAMMA = 3
# The target's weights (specviz.engine.blocks): "shipped" keeps the GGUF file's Q4_1/Q8_0 blocks and runs
# them with the native kernel, bit-identical to "float32" (the blocks expanded once) in a fraction of the
# bytes; only the offline target ships blocks, and only the CPU's native kernel reads them, so elsewhere
# "shipped" loads float32 and says why (specviz.engine.models.LoadedModel.weights_note). The default is
# the faster of the two where it runs (docs/benchmarks.md, "The weights as shipped").
WEIGHT_FORMATS = ("shipped", "float32")
DEFAULT_WEIGHTS = "shipped"
# The draft head stops drafting deeper once its confidence in every branch's latest draft is below
# this (specviz.drafters.HeadDrafter._unsure); it won the probe above against 0.6 and no stop. Where
# the target's verification costs were measured (the shipped drafters), a chain stops instead when its
# next draft would not pay for its row, and the head drafts its branches only where their rows pay
# (HeadDrafter._chain_budget, _branches_pay): on a step that computes rather than streams, as the
# weights as shipped do, rows are not free (docs/benchmarks.md, "drafts that must pay for their rows").
HEAD_MIN_CONFIDENCE = 0.3
# First-position candidates of the head's greedy draft tree, chosen by measurement: two candidates,
# each continued for gamma - 1 more tokens, raised the tokens per iteration; three or a deeper tree
# added tokens but cost more than they brought (docs/benchmarks.md, "Width", and "The defaults").
# The draft head's tree (specviz.drafters.HeadDrafter).
TREE_BRANCHES = 2
# The dynamic draft tree (EAGLE-2; DecodeOptions.tree "dynamic", specviz.drafters.head_tree): at T=0 each
# level expands its DYNAMIC_TREE_WIDTH best nodes by path score into their DYNAMIC_TREE_WIDTH likeliest
# tokens; of all drafted nodes at most DYNAMIC_TREE_NODES are sent, as many as the target's measured
# cost of a pass pays for (specviz.engine.verify_cost, token_tree.choose_budget). At T>0 each level draws
# at most DYNAMIC_TREE_WIDTH nodes, a node at most that many children, the same cost rule deciding how
# many before they are drawn (specviz.drafters.sampled_tree). Bounds, not tunings.
DYNAMIC_TREE_WIDTH = 4
DYNAMIC_TREE_NODES = 16
TREE_MODES = ("off", "branches", "dynamic")  # DecodeOptions.tree: chains, TREE_BRANCHES branches, EAGLE-2
# The drafting presets (the app's "Algorithm" setting, ?algorithm= in links). "fastest": the offline
# pair's drafts as measured fastest (the hybrid; the head's two-branch tree; its early stop).
# "paper": Algorithm 1 of Leviathan et al. as the paper states it, so gamma does what the formula
# says: the draft head drafts one chain of exactly gamma tokens, no tree, no early stop (PAPER_DRAFT,
# a draft name specviz.drafters resolves). The default is "fastest", chosen by measurement
# (docs/design.md, "The paper's algorithm, one click away").
ALGORITHMS = ("fastest", "paper")
DEFAULT_ALGORITHM = "fastest"


# ----- the drafters: one registry ----------------------------------------------------------------
@dataclass(frozen=True)
class DrafterKind:
    """A kind of drafter offered by name. Every list of drafters (the sidebar's pairs, the race, the
    Workloads page, what a link or the CLI may name) is read from DRAFTERS; how it is built lives
    in its own module (`build`, called by specviz.drafters.resolve_drafter); what the pages call it
    is the catalogue's "drafter_<key>" and "drafter_<key>_help" (specviz/assets/words/*/drafters.json)."""

    name: str  # what a link, the CLI, the library and a trace's config.draft call it
    key: str  # its short word: the catalogue's texts, the sidebar's pair "offline-<key>"
    build: str  # "module:function": function(target, device, dtype) -> a Drafter for that target
    model_free: bool = True  # built from its name alone: the caller loads no draft model
    head: bool = False  # drafts with the offline draft head (a first iteration cannot draft: no features yet)
    raced: bool = True  # set beside the others: the Drafters page's race and the Workloads page
    offered: bool = True  # an offline pair of the sidebar (with the offline target)


DRAFTERS: dict[str, DrafterKind] = {
    k.name: k
    for k in (
        DrafterKind("hybrid", "hybrid", "specviz.drafters.hybrid:build_hybrid", head=True),
        DrafterKind("offline:specviz-head-smollm2", "head", "specviz.drafters.head:build_head", head=True),
        DrafterKind("ngram", "ngram", "specviz.drafters.ngram:build_ngram"),
        DrafterKind("offline:specviz-draft-smollm2", "trained", "specviz.drafters.model:build_model", False),
        DrafterKind("hybrid-suffix", "hybrid-suffix", "specviz.drafters.hybrid:build_hybrid_suffix", head=True),
        DrafterKind("staged", "staged", "specviz.drafters.staged:build_staged"),
        DrafterKind("self", "self", "specviz.drafters.model:build_self"),
        # Algorithm 1 as the paper states it: the head drafting one chain of exactly gamma, no tree, no
        # early stop (the app's "paper" preset); the preset offers it, not the pair picker or the race.
        DrafterKind("paper-head", "paper", "specviz.drafters.head:build_paper", head=True, raced=False, offered=False),
    )
}
PAPER_DRAFT = "paper-head"
# The default draft of the offline target, chosen by measurement (docs/benchmarks.md, "The defaults"),
# and of any other target, which has no shipped draft: the lookup, which needs no model.
DEFAULT_DRAFT = "hybrid"
FALLBACK_DRAFT = "ngram"


def drafter_named(key: str) -> str:
    """The name of the registered kind whose key is `key` ("head" -> its shipped weights' name)."""
    return next(k.name for k in DRAFTERS.values() if k.key == key)


def drafter_kind(name: object) -> DrafterKind | None:
    """The registered kind a draft name is, or None (a model by name, or a draft head by folder)."""
    return DRAFTERS.get(name) if isinstance(name, str) else None


def default_verify_rows() -> tuple[int, ...]:
    """The new rows of the verification passes the default drafts make at the default gamma: the
    n-gram chain (1 + gamma) and the head's tree (1 + branches x gamma). specviz.engine.kernels times them."""
    return (1 + DEFAULT_GAMMA, 1 + TREE_BRANCHES * DEFAULT_GAMMA)


# A run's measured speedup is the median of interleaved pairs of timings (specviz.traces.speedup): at
# least SPEEDUP_MIN_PAIRS (unless a server asks for none beyond the run's own, SPECVIZ_TIMING_SECONDS=0),
# and for short runs more, until about SPEEDUP_TIMED_SECONDS were timed
# (at most SPEEDUP_MAX_PAIRS): enough pairs that fresh runs of one setting agree with each other
# (docs/benchmarks.md, "Figures once kept in code comments", "The speedup's pairs").
SPEEDUP_MIN_PAIRS, SPEEDUP_MAX_PAIRS = 3, 12
SPEEDUP_TIMED_SECONDS = 16.0

# The queue of decodes waiting for one device (specviz.serving.gate). A new run joins it while its
# estimated wait is within MAX_WAIT_S; one that would wait longer is deferred: it waits in the gate's
# room, told its place and the estimate, and joins by itself once its wait is within the bound (a
# place freeing wakes it; it also looks again every ADMISSION_RETRY_S, as it says). A baseline waits
# behind every first run, but only for BEHIND_PATIENCE_S: after that nobody passes it. The hard
# bound is GATE_QUEUE_MAX sessions queued and deferred together (each a waiting script thread and
# its page; decodes' caches are bounded by the seats below): past it a run is refused at once.
MAX_WAIT_S = 60.0
ADMISSION_RETRY_S = 5.0
BEHIND_PATIENCE_S = 120.0
GATE_QUEUE_MAX = 256
GATE_HISTORY = 20  # recent decode durations the gate keeps for a waiting caller's estimate

# Batched decodes (specviz.serving.batching): at most BATCH_MAX_SESSIONS hold the device together, their
# target passes run as one forward. A pass waits for every seated decode's request while requests
# keep coming, but no longer than BATCH_WINDOW_S after the last progress (a submission, a pass, a
# decode seated or leaving), so a decode stalled outside the compute lock never holds the others
# long. It is a safety net, not a pace: a decode that has not submitted is drafting under the lock
# or waiting for it, and every release of the lock follows a submission or a decode leaving, so a
# long turn at drafting never cuts a pass; the window bounds only how long the lock may lie free
# with no seated decode taking it (a hand-over, unless a busy machine schedules the next holder
# late). A short window counted from the oldest request cut a class's passes to two requests each
# (docs/reliability.md).
# 64 lets a class of 60 join at once: whoever misses the first batch waits a whole round, so fewer
# seats made the last of a class's websocket clients wait far longer for its first tokens
# (scripts/ws_load.py; the figures: docs/benchmarks.md, "Batch seats", and docs/reliability.md, "A lecture hall").
BATCH_MAX_SESSIONS = 64
BATCH_WINDOW_S = 1.0
# The distribution lab's samples decoding at once (batched, one thread each): more threads than this
# only contend on two cores, and each thread holds a decode's caches.
LAB_WORKERS = 8

TEMPERATURE_MAX = 10.0  # beyond this every distribution is flat enough to teach nothing new
MAX_NEW_TOKENS_MAX = 1024  # keeps one run (and its trace) bounded in time and memory
SEED_MAX = 2**63 - 1

# What a trace file may record (specviz.traces.trace.validate). Its gamma, temperature and seed are bounded
# as a run's are; the rest more widely, on purpose: max_new_tokens only bounds how long a run takes,
# and the trace file's size cap (trace.MAX_TRACE_BYTES) already bounds what reading one costs, so
# the trace of a longer run (recorded under an earlier limit, or by a script) still opens.
TRACE_MAX_NEW_TOKENS = 10**6
TRACE_TOKEN_ID_MAX = 10**7  # above any vocabulary: a larger id in a trace is damage, not a model
TRACE_BRANCHES_MAX = 64  # a draft tree's branches at the first draft position


@dataclass(frozen=True)
class SamplingConfig:
    """How logits become probabilities; applied identically to p (target) and q (draft)."""

    temperature: float = 1.0  # 0 means greedy: the argmax gets probability 1
    top_k: int | None = None  # keep only the k most likely tokens (None: keep all)
    top_p: float | None = None  # keep the smallest set whose mass reaches top_p (None: keep all)

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise ConfigError(f"temperature must be a finite number >= 0 (0 means greedy); got {t!r}.")
        if t > TEMPERATURE_MAX:
            raise ConfigError(f"temperature must be at most {TEMPERATURE_MAX}; got {t!r}.")
        if self.top_k is not None and (
            isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1
        ):
            raise ConfigError(f"top_k must be a whole number >= 1, or None to keep all tokens; got {self.top_k!r}.")
        p = self.top_p
        if p is not None and (
            isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or not 0 < p <= 1
        ):
            raise ConfigError(f"top_p must be in (0, 1], or None to keep all tokens; got {p!r}.")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class DecodeOptions:
    """How one decode runs, whatever its models: the paper's gamma, the sampling (applied to p and q
    alike), the seed, the length, the acceptance rule and whether a drafter may draft a tree."""

    gamma: int = DEFAULT_GAMMA  # the most draft tokens proposed per iteration
    temperature: float = 1.0  # 0 means greedy
    top_k: int | None = None  # keep only the k most likely tokens (None: all)
    top_p: float | None = None  # keep the smallest set whose mass reaches top_p (None: all)
    seed: int = 0  # seeds the single torch.Generator of the run
    max_new_tokens: int = 64
    rule: str = "exact"  # the acceptance rule (specviz.decoding.verify.RULES; the lab's wrong ones too)
    # Whether a drafter that drafts trees may (the exact rule only), and which (TREE_MODES): True or
    # "branches" its branches, "dynamic" EAGLE-2's dynamic tree where it drafts one, False or "off" chains.
    tree: bool | str = True
    chat_template: bool = True  # wrap a text prompt in the tokenizer's chat template if it has one

    def __post_init__(self) -> None:
        self.sampling  # noqa: B018 (validates temperature, top_k and top_p)
        g = self.gamma
        if isinstance(g, bool) or not isinstance(g, int) or not GAMMA_MIN <= g <= GAMMA_MAX:
            raise ConfigError(f"gamma must be a whole number from {GAMMA_MIN} to {GAMMA_MAX}; got {g!r}.")
        s = self.seed
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= SEED_MAX:
            raise ConfigError(f"seed must be a whole number from 0 to 2**63-1; got {s!r}.")
        m = self.max_new_tokens
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_NEW_TOKENS_MAX:
            raise ConfigError(f"max_new_tokens must be a whole number from 1 to {MAX_NEW_TOKENS_MAX}; got {m!r}.")
        if not isinstance(self.tree, bool) and self.tree not in TREE_MODES:
            raise ConfigError(f"tree must be true, false or one of {', '.join(TREE_MODES)}; got {self.tree!r}.")

    @property
    def tree_mode(self) -> str:
        """The tree setting as one of TREE_MODES (True is "branches", False "off")."""
        if isinstance(self.tree, bool):
            return "branches" if self.tree else "off"
        return self.tree

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig(self.temperature, self.top_k, self.top_p)

    def to_dict(self) -> dict:
        return asdict(self)


def validate_prompt(prompt: str | list[int]) -> None:
    """Refuse a prompt that cannot start a decode: empty text or an empty id list."""
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ConfigError("The prompt is empty: type some text for the model to continue.")
    elif isinstance(prompt, (list, tuple)):
        if not prompt or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in prompt):
            raise ConfigError("A prompt given as token ids must be a non-empty list of ids >= 0.")
    else:
        raise ConfigError(f"The prompt must be text or a list of token ids; got {type(prompt).__name__}.")


def slug(text: str, max_chars: int | None = None) -> str:
    """Lower-case letters and digits, every other run of characters one "-", at most max_chars long,
    no "-" at either end: "Online: SmolLM2 (360M)" -> "online-smollm2-360m". May be empty."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower())[:max_chars].strip("-")
