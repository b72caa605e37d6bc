"""Token-level views of a trace: which status each token has, and its hover card text.

Pure functions of plain trace data (a Trace or just its `iterations` list), shared by the charts
and by the app's coloured token stream. Hover text is HTML-escaped here, once.
"""

from __future__ import annotations

import html
from typing import Any

from specviz.teaching.charts.words import words
from specviz.traces.trace import Trace

# How a chart names a token that has no readable text of its own, in one place for every chart:
# a byte-level token holding part of a character's UTF-8 bytes (an emoji, a Chinese character)
# decodes alone to U+FFFD, "�"; a token whose text the trace did not record is known by its id.
BYTE_PIECE = "⟨part of a character⟩"
UNKNOWN_TOKEN = "⟨token {id}⟩"


def display_token(text: str) -> str:
    """Make invisible characters visible: newline as ↵, tab as →, an all-space token as ␣, and a piece
    of a character's bytes (decoded alone: "�") as BYTE_PIECE."""
    shown = text.replace("\n", "↵").replace("\t", "→").replace("\r", "").replace("\ufffd", BYTE_PIECE)
    if not shown.strip():
        return "␣" * max(1, len(shown))
    return shown


def label_token(text: str) -> str:
    """A label for an axis: leading spaces shown as ␣ so ' the' and 'the' differ."""
    shown = display_token(text)
    stripped = shown.lstrip(" ")
    return "␣" * (len(shown) - len(stripped)) + stripped


def plot_escape(text: str) -> str:
    """Text for a Plotly label or hover card (and HTML element text): <, > and & escaped so Plotly
    reads no tags, quotes left as they are. Plotly knows only a few named entities (&lt; &gt; &amp;
    ...): html.escape's &quot; showed raw on a chart, as `!&quot;`."""
    return html.escape(text, quote=False)


def token_text(trace_extra: dict[str, Any], token_id: int) -> str:
    """The text of a token id from the trace's `extra.token_text`, or UNKNOWN_TOKEN (⟨token 3929⟩, not
    a raw <3929> that reads like markup) when the trace did not record it."""
    return trace_extra.get("token_text", {}).get(str(token_id), UNKNOWN_TOKEN.format(id=token_id))


def iteration_tokens(it: dict[str, Any]) -> list[dict[str, Any]]:
    """One iteration -> its tokens in order, each with a status (see specviz.teaching.charts.style)."""
    n = it["accepted_count"]
    rows = []
    for j, d in enumerate(it["drafts"]):
        status = "accepted" if j < n else ("rejected" if j == n else "discarded")
        rows.append({**d, "iteration": it["index"], "slot": j + 1, "status": status, "is_draft": True})
    corr = it.get("correction")
    if corr is not None:
        status = {"resample": "resampled", "block_resample": "resampled", "bonus": "bonus"}.get(corr["kind"], "target")
        if status == "bonus" and not it["drafts"]:
            status = "target"  # the draft proposed nothing (no n-gram match): not a reward for good drafts
        rows.append(
            {
                **corr,
                "iteration": it["index"],
                "slot": len(it["drafts"]) + 1,
                "status": status,
                "is_draft": False,
            }
        )
    return rows


def token_rows(source: Trace | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every token of a run in reading order (rejected and discarded drafts included)."""
    iterations = source.iterations if isinstance(source, Trace) else source
    return [row for it in iterations for row in iteration_tokens(it)]


def decision_text(row: dict[str, Any], lang: str = "en") -> str:
    """One line saying why the token has its status (lang: the language, specviz.teaching.charts.words)."""
    status = row["status"]
    greedy = "_greedy" if status in ("accepted", "rejected") and row.get("r") is None else ""
    said = words(lang)
    if row.get("block") and not greedy and status != "bonus":  # block verification: r meets h, not min(1, p/q)
        return said.get(f"decision_{status}_block", said["decision_target"])
    if status == "bonus":  # says how many drafts passed: an iteration may draft fewer than γ
        k = row["slot"] - 1
        return said["decision_bonus_one"] if k == 1 else said["decision_bonus"].format(k=k)
    return said.get(f"decision_{status}{greedy}", said["decision_target"])


def hover_card(row: dict[str, Any], extra: dict[str, Any] | None = None, markup: bool = True, lang: str = "en") -> str:
    """The hover card of one token, in `lang`: position, text, q, p, p/q, r, decision and top alternatives.

    markup=True gives Plotly hover text (lines joined by <br>, token text HTML-escaped here);
    markup=False gives plain lines for an HTML title attribute (the caller escapes the whole string).
    """
    extra, w = extra or {}, words(lang)

    def tok(text: str) -> str:
        return plot_escape(label_token(text)) if markup else label_token(text)

    lines = [
        f"<b>{tok(row['token'])}</b>" if markup else tok(row["token"]),
        w["stream_position"].format(position=row["position"], iteration=row["iteration"] + 1),
    ]
    if row["is_draft"]:
        q, p = row["q"], row["p"]
        ratio = "∞" if q == 0 else f"{p / q:.3f}"
        lines.append(w["stream_qp"].format(q=q, p=p, ratio=ratio))
        if row["status"] == "discarded" and not row.get("block"):  # after the first rejection: no r met
            r = w["stream_r_not_drawn"]
        else:
            r = w["r_greedy"] if row.get("r") is None else f"{row['r']:.3g}"
        lines.append(w["stream_accept"].format(accept=row["accept_prob"], r=r))
        if row.get("block"):  # block verification: r is tested against h, the chance of stopping here
            lines.append(w["stream_block"].format(**row["block"]))
    else:
        lines.append(w["stream_drawn_prob"].format(p=row.get("p", 0.0)))
    lines.append(plot_escape(decision_text(row, lang)) if markup else decision_text(row, lang))
    if row["status"] == "resampled" and row.get("residual_top"):
        top, name = row["residual_top"], "stream_residual_top"
    else:
        top, name = row.get("p_top") or [], "stream_target_top"
    if top:
        alts = ", ".join(f"{tok(token_text(extra, tid))} {prob:.2f}" for tid, prob in top[:5])
        lines.append(w[name].format(alts=alts))
    return ("<br>" if markup else "\n").join(lines)


def md_escape(text: str) -> str:
    """Text from a file or a user, shown through markdown without turning into links or emphasis."""
    return "".join("\\" + ch if ch in "\\`*_[]<>#|~$" else ch for ch in text)


def draft_facts(row: dict, one_line: bool = False, lang: str = "en") -> str:
    """Markdown: one draft's q, p, p/q, min(1, p/q), r and the decision (the inspector's detail, or
    one line with the token for the lesson), in `lang`."""
    w = words(lang)
    ratio = "∞" if row["q"] == 0 else f"{row['p'] / row['q']:.3f}"
    if one_line:
        r = w["r_greedy"] if row["r"] is None else f"{row['r']:.3f}"
        return (
            f"**{md_escape(label_token(row['token']))}**: q = {row['q']:.3f}, p = {row['p']:.3f}, p/q = {ratio}, "
            f"min(1, p/q) = {row['accept_prob']:.3f}, r = {r} → {decision_text(row, lang)}"
        )
    r = w["inspector_r_greedy"] if row["r"] is None else f"{row['r']:.4f}"
    facts = w["inspector_facts"].format(
        q=row["q"], p=row["p"], ratio=ratio, accept=row["accept_prob"], r=r, beta=row["beta"],
        decision=decision_text(row, lang),
    )  # fmt: skip
    return facts + ("  \n" + w["stream_block"].format(**row["block"]) if row.get("block") else "")
