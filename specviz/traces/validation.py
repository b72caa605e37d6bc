"""Reading a trace from outside: a file's bytes (parse_json, uploaded_text, with clear messages for a
file that is too big, not UTF-8 or not JSON) and every rule a trace must hold (validate), so a
page, the CLI or a notebook never meets a trace that breaks its invariants. Field meanings:
specviz.traces.trace's docstring."""

from __future__ import annotations

import json
from typing import Any

from specviz.config import (
    GAMMA_MAX,
    GAMMA_MIN,
    SEED_MAX,
    TEMPERATURE_MAX,
    TRACE_BRANCHES_MAX,
    TRACE_MAX_NEW_TOKENS,
    TRACE_TOKEN_ID_MAX,
)
from specviz.errors import SpecvizError, TraceError
from specviz.traces.checks import (
    _close,
    _expect,
    _int,
    _number,
    _same,
    _token_ids,
    _top_list,
    block_correction,
    block_draft,
)
from specviz.traces.summary import reached_betas

SCHEMA = "specviz.trace/1"
MAX_TRACE_BYTES = 20 * 1024 * 1024  # a 1024-token trace at gamma 16 is far below this
ACCEPT_PROB_TOLERANCE = 1e-5  # float32 rounding between p/q and the stored min(1, p/q)


def parse_json(
    text: str | bytes,
    *,
    what: str = "trace",
    max_bytes: int = MAX_TRACE_BYTES,
    error: type[SpecvizError] = TraceError,
    too_big: str = "Record a shorter run (fewer max new tokens).",
) -> Any:
    """json.loads for an uploaded `what` file (a trace unless told; specviz.labs.sweep reads sweeps
    with it): input over `max_bytes` (`too_big` says what to do), text that is not UTF-8, NaN and
    Infinity, JSON nested deeper than Python recurses and JSON that does not parse each raise
    `error` with a message for the person who uploaded it."""
    text = uploaded_text(text, what=what, max_bytes=max_bytes, error=error, too_big=too_big)

    def refuse_constant(name: str) -> None:
        raise error(f"The {what} file contains {name}, which is not a valid number in a {what}.")

    try:
        return json.loads(text, parse_constant=refuse_constant)
    except json.JSONDecodeError as exc:
        # Cut short: the error is in the file's last token (a partial word such as "nul", or
        # nothing at all), or inside a string, where json names where the string started. "Extra
        # data" after a whole value is something added, not cut.
        last_token = not any(ch in ' \t\r\n,:[]{}"' for ch in text.rstrip()[exc.pos :])
        cut = (last_token and not exc.msg.startswith("Extra data")) or exc.msg.startswith("Unterminated string")
        hint = " It looks truncated." if cut else ""
        raise error(
            f"The {what} file is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.{hint}"
        ) from None
    except RecursionError:  # e.g. "[[[[..." 100 000 deep: json gives up with RecursionError, not a decode error
        raise error(f"The {what} file is nested too deeply to be a {what} (was it made by specviz?).") from None


def uploaded_text(
    text: str | bytes,
    *,
    what: str,
    max_bytes: int,
    error: type[SpecvizError],
    too_big: str,
    encoding: str = "utf-8",
) -> str:
    """An uploaded `what` file as text (JSON, or CSV with encoding "utf-8-sig"): over `max_bytes`
    (`too_big` says what to do), not UTF-8, or empty, it raises `error` with a message for the
    person who uploaded it."""
    if isinstance(text, bytes):
        if len(text) > max_bytes:
            raise error(_too_big(what, len(text), max_bytes, too_big))
        try:
            text = text.decode(encoding)
        except UnicodeDecodeError as exc:
            raise error(f"The {what} file is not UTF-8 text ({exc.reason} at byte {exc.start}).") from None
    if len(text) > max_bytes:
        raise error(_too_big(what, len(text), max_bytes, too_big))
    if not text.strip():
        raise error(f"The {what} file is empty.")
    return text


def _too_big(what: str, size: int, max_bytes: int, advice: str) -> str:
    return f"The {what} file is {size / 1e6:.1f} MB; the limit is {max_bytes / 1e6:.0f} MB. {advice}"


# ----- validation -----------------------------------------------------------------------------


DRAFT_SOURCES = ("head", "ngram", "suffix", "model")
DRAFT_STOPS = ("no_features", "confidence", "cost", "no_match", "match_end", "eos")


def _drafting(d: Any, where: str, drafted: int) -> None:
    """An iteration's optional `drafting` (see the module docstring)."""
    _expect(isinstance(d, dict), where, "an object")
    gamma = _int(d.get("gamma"), f"{where}.gamma", 0, GAMMA_MAX)
    _expect(drafted <= gamma, f"{where}.gamma", f"at least the {drafted} drafts made")
    _expect(
        d.get("source") is None or d["source"] in DRAFT_SOURCES, f"{where}.source", "head, ngram, suffix, model or null"
    )
    stop = d.get("stop")
    _expect(stop is None or stop in DRAFT_STOPS, f"{where}.stop", f"one of {', '.join(DRAFT_STOPS)}, or null")
    _expect(stop is None or drafted < gamma, f"{where}.stop", "null when all gamma drafts were made")
    for key in ("confidence", "threshold"):
        if stop in ("confidence", "cost"):
            _number(d.get(key), f"{where}.{key}", 0, 1)
        else:
            _expect(d.get(key) is None, f"{where}.{key}", 'null unless stop is "confidence" or "cost"')
    if stop in ("confidence", "cost"):
        # A threshold of 1 (no draft could pay for its row) stops even a draft the head was sure of.
        below = d["confidence"] < d["threshold"] or d["threshold"] == 1
        _expect(below, f"{where}.confidence", "below the threshold it stopped at")


def _tree(tree: Any, where: str, drafts: list, n: int) -> None:
    """An iteration's optional `tree`: a branch tree's fields, and a dynamic tree's nodes, path and
    tests (_dynamic_tree) checked against the iteration's drafts and accepted count n."""
    _expect(isinstance(tree, dict), where, "an object")
    _int(tree.get("kept_branch"), f"{where}.kept_branch", 0, TRACE_BRANCHES_MAX)
    branches = tree.get("other_branches")
    _expect(isinstance(branches, list), f"{where}.other_branches", "a list")
    for b, branch in enumerate(branches):
        _expect(isinstance(branch, list), f"{where}.other_branches[{b}]", "a list of tokens")
        for j, token in enumerate(branch):
            at = f"{where}.other_branches[{b}][{j}]"
            _expect(isinstance(token, dict) and isinstance(token.get("token"), str), at, "{token_id, token}")
            _int(token.get("token_id"), f"{at}.token_id", 0, TRACE_TOKEN_ID_MAX)
    tests = tree.get("rejected_first", [])
    _expect(isinstance(tests, list), f"{where}.rejected_first", "a list")
    others = len(branches) if "nodes" not in tree else _dynamic_tree(tree, where, drafts, n) - 1
    _expect(len(tests) <= others, f"{where}.rejected_first", "at most one test per other first token")
    for j, test in enumerate(tests):
        at = f"{where}.rejected_first[{j}]"
        _expect(isinstance(test, dict), at, "a test of a first token")
        _int(test.get("branch"), f"{at}.branch", 0, TRACE_BRANCHES_MAX)
        _rejected_test(test, at)


def _rejected_test(test: Any, at: str) -> None:
    """A test of a drafted token that failed: its numbers, min(1, p/q), and r not below it."""
    _expect(isinstance(test, dict) and isinstance(test.get("token"), str), at, "a test of a drafted token")
    _int(test.get("token_id"), f"{at}.token_id", 0, TRACE_TOKEN_ID_MAX)
    p = _number(test.get("p"), f"{at}.p", 0, 1 + 1e-4)
    q = _number(test.get("q"), f"{at}.q", 0, 1 + 1e-4)
    a = _number(test.get("accept_prob"), f"{at}.accept_prob", 0, 1)
    _expect(q > 0, f"{at}.q", "a probability > 0 (the draft proposed this token)")
    if abs(a - min(1.0, p / q)) > ACCEPT_PROB_TOLERANCE:
        raise TraceError(f"{at}.accept_prob is {a} but min(1, p/q) is {min(1.0, p / q)}.")
    if test.get("r") is not None and _number(test["r"], f"{at}.r", 0, 1) < a:
        raise TraceError(f"{at}: rejected although r = {test['r']} is below accept_prob = {a}.")


def _dynamic_tree(tree: dict, where: str, drafts: list, n: int) -> int:
    """A dynamic tree's nodes (parents before children, depth one below the parent's), its accepted path
    (a path of the tree from the root, as long as accepted_count, the drafts' tokens) and its tests
    (one list per level reached, each a child of the path's node there; the last, when the walk ended on
    a rejection, the last draft). Returns how many first tokens the tree had."""
    nodes, path, levels = tree.get("nodes"), tree.get("path"), tree.get("tests")
    _expect(isinstance(nodes, list) and nodes, f"{where}.nodes", "a non-empty list")
    for i, node in enumerate(nodes):
        at = f"{where}.nodes[{i}]"
        _expect(isinstance(node, dict) and isinstance(node.get("token"), str), at, "{token_id, token, parent, ...}")
        _int(node.get("token_id"), f"{at}.token_id", 0, TRACE_TOKEN_ID_MAX)
        parent = _int(node.get("parent"), f"{at}.parent", -1, i - 1)  # parents precede children
        want = 1 if parent < 0 else nodes[parent]["depth"] + 1
        _expect(node.get("depth") == want, f"{at}.depth", f"{want} (one below its parent)")
        _number(node.get("score"), f"{at}.score", 0, 1 + 1e-4)
    _expect(isinstance(path, list) and len(path) == n, f"{where}.path", f"a list of the {n} accepted nodes")
    at_node = -1
    for j, node in enumerate(path):
        _int(node, f"{where}.path[{j}]", 0, len(nodes) - 1)
        _expect(nodes[node]["parent"] == at_node, f"{where}.path[{j}]", "a child of the node before it")
        _expect(nodes[node]["token_id"] == drafts[j]["token_id"], f"{where}.path[{j}]", "the node of draft {j}")
        at_node = node
    _expect(isinstance(levels, list) and len(levels) == n + 1, f"{where}.tests", f"{n + 1} levels of tests")
    for d, level in enumerate(levels):
        _expect(isinstance(level, list), f"{where}.tests[{d}]", "a list of tests")
        parent = -1 if d == 0 else path[d - 1]
        for j, test in enumerate(level):
            at = f"{where}.tests[{d}][{j}]"
            _expect(isinstance(test, dict), at, "a rejected test")
            node = _int(test.get("node"), f"{at}.node", 0, len(nodes) - 1)
            _expect(nodes[node]["parent"] == parent, f"{at}.node", "a child of the path's node at this level")
            _expect(nodes[node]["token_id"] == test.get("token_id"), f"{at}.token_id", "its node's token")
            _rejected_test(test, at)
    ended_rejected = len(drafts) == n + 1
    _expect(len(drafts) in (n, n + 1), f"{where}.tree", "drafts: the accepted path, then at most one rejected test")
    if ended_rejected:
        _expect(bool(levels[n]) and levels[n][-1]["token_id"] == drafts[n]["token_id"], f"{where}.tests[{n}]",
                "ending with the rejected draft")  # fmt: skip
    return sum(node["parent"] == -1 for node in nodes)


def validate(data: Any) -> None:
    """Check a trace dict's shape, types, ranges and invariants. Raises TraceError."""
    _expect(isinstance(data, dict), "", "a JSON object")
    schema = data.get("schema")
    if schema != SCHEMA:
        raise TraceError(
            f"Unsupported trace schema {schema!r}; this version of specviz reads {SCHEMA!r}. "
            "Re-record the trace with this version."
        )
    for key in (
        "mode",
        "config",
        "prompt",
        "prompt_token_ids",
        "output_token_ids",
        "output_text",
        "stop_reason",
        "iterations",
        "summary",
    ):
        if key not in data:
            raise TraceError(f"The trace is missing the field {key!r}.")
    _expect(data["mode"] in ("speculative", "autoregressive"), "mode", '"speculative" or "autoregressive"')
    _expect(isinstance(data["prompt"], str), "prompt", "text")
    _expect(isinstance(data["output_text"], str), "output_text", "text")
    _expect(data["stop_reason"] in ("max_new_tokens", "eos"), "stop_reason", '"max_new_tokens" or "eos"')
    _token_ids(data["prompt_token_ids"], "prompt_token_ids")
    _token_ids(data["output_token_ids"], "output_token_ids")
    _validate_config(data["config"], data["mode"])
    _expect(isinstance(data["iterations"], list), "iterations", "a list")
    _validate_summary(data["summary"])
    if data["config"].get("traced", True):
        _validate_iterations(data)
    elif data["iterations"]:
        raise TraceError("iterations: an untraced run must have an empty iteration list.")
    if "extra" in data:
        _expect(isinstance(data["extra"], dict), "extra", "an object")
        texts = data["extra"].get("token_text", {})
        _expect(isinstance(texts, dict), "extra.token_text", "an object of token id -> text")
        _expect(all(isinstance(v, str) for v in texts.values()), "extra.token_text", "texts for every token id")
        if "timing" in data["extra"]:
            _validate_timing(data["extra"]["timing"])
        if "batch" in data["extra"]:
            batch = data["extra"]["batch"]
            _expect(isinstance(batch, dict), "extra.batch", "an object")
            _int(batch.get("most_sessions"), "extra.batch.most_sessions", 0, 10**6)


TIMING_PAIRS_MAX = 1000  # a trace keeps a few timed pairs (config.SPEEDUP_MAX_PAIRS); far more is damage


def _validate_timing(timing: Any) -> None:
    """extra.timing: the run's timed pairs (specviz.traces.speedup), each run's numbers finite and >= 0."""
    from specviz.traces.speedup import PAIR_FIELDS

    _expect(isinstance(timing, dict), "extra.timing", "an object with the timed pairs")
    _int(timing.get("wanted"), "extra.timing.wanted", 0, TIMING_PAIRS_MAX)
    pairs = timing.get("pairs")
    _expect(isinstance(pairs, list) and len(pairs) <= TIMING_PAIRS_MAX, "extra.timing.pairs", "a list of timed pairs")
    for k, pair in enumerate(pairs):
        where = f"extra.timing.pairs[{k}]"
        _expect(isinstance(pair, dict), where, "an object with both runs' timings")
        for flag in ("batched", "disturbed"):
            _expect(isinstance(pair.get(flag, False), bool), f"{where}.{flag}", "true or false")
        for run in ("speculative", "target_alone"):
            numbers = pair.get(run)
            _expect(isinstance(numbers, dict), f"{where}.{run}", "an object of timings")
            for key in PAIR_FIELDS:
                value = numbers.get(key)
                if value is not None:
                    _number(value, f"{where}.{run}.{key}", 0, 1e12)


def _validate_config(cfg: Any, mode: str) -> None:
    _expect(isinstance(cfg, dict), "config", "an object")
    for key in (
        "target",
        "draft",
        "gamma",
        "temperature",
        "top_k",
        "top_p",
        "seed",
        "max_new_tokens",
        "device",
        "dtype",
    ):
        if key not in cfg:
            raise TraceError(f"config is missing the field {key!r}.")
    _expect(isinstance(cfg["target"], str), "config.target", "text")
    if mode == "speculative":
        _expect(isinstance(cfg["draft"], str), "config.draft", "text")
        _int(cfg["gamma"], "config.gamma", GAMMA_MIN, GAMMA_MAX)
    _number(cfg["temperature"], "config.temperature", 0, TEMPERATURE_MAX)
    if cfg["top_k"] is not None:
        _int(cfg["top_k"], "config.top_k", 1, TRACE_TOKEN_ID_MAX)
    if cfg["top_p"] is not None:
        _number(cfg["top_p"], "config.top_p", 0, 1)
    _int(cfg["seed"], "config.seed", 0, SEED_MAX)
    _int(cfg["max_new_tokens"], "config.max_new_tokens", 1, TRACE_MAX_NEW_TOKENS)
    _expect(isinstance(cfg.get("batched", False), bool), "config.batched", "true or false")
    # optional (traces before the weights as shipped ran float32): "shipped" or "float32"
    _expect(cfg.get("weights", "float32") in ("shipped", "float32"), "config.weights", '"shipped" or "float32"')


def _validate_summary(s: Any) -> None:
    _expect(isinstance(s, dict), "summary", "an object")
    for key in ("iterations", "drafted", "accepted", "new_tokens", "target_calls"):
        _int(s.get(key), f"summary.{key}", 0, 10**9)
    for key in ("draft_ms", "verify_ms"):  # optional, but shown as numbers when present
        if key in s:
            _number(s[key], f"summary.{key}", 0, 1e12)
    for key in ("wall_ms", "tokens_per_s", "mean_accepted_length"):
        _number(s.get(key), f"summary.{key}", 0, 1e12)
    for key in ("acceptance_rate", "alpha"):
        if s.get(key) is not None:
            _number(s[key], f"summary.{key}", 0, 1)


def _validate_iterations(data: dict) -> None:
    """Every iteration on its own, then what they add up to: the output tokens and the summary."""
    iterations = data["iterations"]
    emitted: list[int] = []
    drafted = accepted_total = 0
    for i, it in enumerate(iterations):
        drafts, n = _validate_iteration(data, i, it, len(emitted))
        drafted += len(drafts)
        accepted_total += n
        emitted.extend(d["token_id"] for d in drafts[:n])
        corr = _validate_correction(data, i, len(drafts), n, len(emitted))
        if corr is not None:
            emitted.append(corr)
    if emitted != data["output_token_ids"]:
        raise TraceError("output_token_ids do not equal the accepted drafts plus corrections of the iterations.")
    s = data["summary"]
    _same(s["iterations"], len(iterations), "summary.iterations")
    _same(s["drafted"], drafted, "summary.drafted")
    _same(s["accepted"], accepted_total, "summary.accepted")
    _same(s["new_tokens"], len(emitted), "summary.new_tokens")
    if drafted:
        _close(s.get("acceptance_rate"), accepted_total / drafted, "summary.acceptance_rate")
    reached = reached_betas(iterations)
    if reached:
        _close(s.get("alpha"), sum(reached) / len(reached), "summary.alpha")
    if iterations:
        _close(s["mean_accepted_length"], len(emitted) / len(iterations), "summary.mean_accepted_length")


def _validate_iteration(data: dict, i: int, it: Any, position0: int) -> tuple[list, int]:
    """Iteration i's number, timings, drafts (the first at `position0` of the text), tree and
    drafting; returns its drafts and accepted_count."""
    where = f"iterations[{i}]"
    _expect(isinstance(it, dict), where, "an object")
    _expect(it.get("index") == i, f"{where}.index", f"{i}")
    if "iteration" in it:  # optional: older files number only from 0
        _expect(it["iteration"] == i + 1, f"{where}.iteration", f"{i + 1} (index + 1)")
    for key in ("start_ms", "draft_ms", "verify_ms"):
        _number(it.get(key), f"{where}.{key}", 0, 1e12)
    drafts = it.get("drafts")
    _expect(isinstance(drafts, list), f"{where}.drafts", "a list")
    n = _int(it.get("accepted_count"), f"{where}.accepted_count", 0, len(drafts))
    for j, d in enumerate(drafts):
        _validate_draft(data["config"], d, where, j, n, position0 + j)
    if "tree" in it:
        _tree(it["tree"], f"{where}.tree", drafts, n)
    if "drafting" in it:
        _drafting(it["drafting"], f"{where}.drafting", len(drafts))
    if "cache" in it:
        _cache(it["cache"], f"{where}.cache")
    return drafts, n


CACHE_STAGES = {
    "target": ("before", "after_pass", "after_rollback"),
    "draft": ("before", "after_rollback", "after_draft"),
}


def _cache(c: Any, where: str) -> None:
    """An iteration's optional `cache` (see the module docstring): each length a whole number, the
    target's pass only adding rows and its roll-back only removing them, the draft's likewise."""
    _expect(isinstance(c, dict) and isinstance(c.get("target"), dict), where, "an object with a target object")
    _expect(c.get("draft") is None or isinstance(c["draft"], dict), f"{where}.draft", "an object or null")
    for side, stages in CACHE_STAGES.items():
        if c.get(side) is None:
            continue
        rows = [_int(c[side].get(k), f"{where}.{side}.{k}", 0, TRACE_MAX_NEW_TOKENS * 4) for k in stages]
        grows, shrinks = (1, 2) if side == "target" else (2, 1)  # which stage adds rows, which removes them
        _expect(rows[grows] >= rows[grows - 1], f"{where}.{side}.{stages[grows]}", f"at least {stages[grows - 1]}")
        before_it = stages[shrinks - 1]
        _expect(rows[shrinks] <= rows[shrinks - 1], f"{where}.{side}.{stages[shrinks]}", f"at most {before_it}")


def _validate_draft(config: dict, d: Any, where: str, j: int, n: int, position: int) -> None:
    """Draft j of an iteration that accepted n: its token, its probabilities, and a draw r that
    agrees with its verdict under the exact rule (under block verification: specviz.traces.checks)."""
    greedy = config["temperature"] == 0
    exact = config.get("rule", "exact") == "exact"
    dw = f"{where}.drafts[{j}]"
    _expect(isinstance(d, dict), dw, "an object")
    _int(d.get("token_id"), f"{dw}.token_id", 0, TRACE_TOKEN_ID_MAX)
    _expect(isinstance(d.get("token"), str), f"{dw}.token", "text")
    _expect(d.get("position") == position, f"{dw}.position", str(position))
    q = _number(d.get("q"), f"{dw}.q", 0, 1)
    p = _number(d.get("p"), f"{dw}.p", 0, 1)
    a = _number(d.get("accept_prob"), f"{dw}.accept_prob", 0, 1)
    _number(d.get("beta"), f"{dw}.beta", 0, 1 + 1e-4)
    _expect(isinstance(d.get("accepted"), bool), f"{dw}.accepted", "true or false")
    _expect(q > 0, f"{dw}.q", "a probability > 0 (the draft proposed this token)")
    if abs(a - min(1.0, p / q)) > ACCEPT_PROB_TOLERANCE:
        raise TraceError(f"{dw}.accept_prob is {a} but min(1, p/q) is {min(1.0, p / q)}.")
    _expect("r" in d, f"{dw}.r", "the draw r (null in a greedy run, which draws nothing)")
    if config.get("rule") == "block":
        block_draft(d, dw, j, n, greedy)
    elif d["r"] is not None:
        r = _number(d["r"], f"{dw}.r", 0, 1)
        if exact and d["accepted"] and not r < a:
            raise TraceError(f"{dw}: accepted although r = {r} is not below accept_prob = {a}.")
        first_rejected = j == n  # drafts after the first rejection were never judged
        if exact and first_rejected and r < a:
            raise TraceError(f"{dw}: rejected although r = {r} is below accept_prob = {a}.")
    elif exact and not greedy:
        raise TraceError(f"{dw}.r is missing; only greedy runs (temperature 0) have no draw.")
    if d["accepted"] != (j < n):
        raise TraceError(f"{where}: accepted drafts must form a prefix of length accepted_count = {n}.")
    for key in ("q_top", "p_top"):
        _top_list(d.get(key), f"{dw}.{key}")


def _validate_correction(data: dict, i: int, drafted: int, n: int, position: int) -> int | None:
    """Iteration i's correction (after `drafted` drafts, `n` accepted, at `position` of the text):
    its kind fits the verdict; returns its token id (None: a run may end without one)."""
    where = f"iterations[{i}]"
    corr = data["iterations"][i].get("correction")
    if corr is None:
        last = i == len(data["iterations"]) - 1
        if data["config"].get("rule") == "no_bonus":
            pass  # the no-bonus variant ends full acceptances without a correction
        elif not (last and data["stop_reason"] == "eos"):
            raise TraceError(
                f"{where}.correction may be null only in the last iteration of a run stopped at end of sequence."
            )
        return None
    _expect(isinstance(corr, dict), f"{where}.correction", "an object")
    kinds = ("target",) if data["mode"] == "autoregressive" else ("resample", "block_resample", "bonus", "target")
    _expect(corr.get("kind") in kinds, f"{where}.correction.kind", " or ".join(map(repr, kinds)))
    block = data["config"].get("rule") == "block"
    if corr["kind"] == "block_resample" or (block and corr["kind"] == "resample"):
        block_correction(corr, f"{where}.correction", data["config"].get("rule"), n, drafted)
    elif corr["kind"] == "resample":
        _expect(n < drafted, f"{where}.correction.kind", '"bonus" (every draft was accepted)')
        _top_list(corr.get("residual_top"), f"{where}.correction.residual_top")
    elif corr["kind"] == "bonus":
        _expect(n == drafted, f"{where}.correction.kind", '"resample" (a draft was rejected)')
    elif data["mode"] == "speculative":  # "target" in a speculative run: the draft proposed nothing
        _expect(not drafted, f"{where}.correction.kind", '"resample" or "bonus" (drafts were proposed)')
    _int(corr.get("token_id"), f"{where}.correction.token_id", 0, TRACE_TOKEN_ID_MAX)
    _expect(isinstance(corr.get("token"), str), f"{where}.correction.token", "text")
    _number(corr.get("p"), f"{where}.correction.p", 0, 1 + 1e-4)
    if "p_top" in corr:  # the target's top tokens where the correction was drawn (hover cards show them)
        _top_list(corr["p_top"], f"{where}.correction.p_top")
    _expect(corr.get("position") == position, f"{where}.correction.position", str(position))
    return corr["token_id"]
