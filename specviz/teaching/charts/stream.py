"""The coloured token stream as HTML: one span per token, coloured by its status, each with a hover
card; its legend; and user text made safe for HTML. Shared by the app (st.html) and the notebook
views (Trace._repr_html_), so both show the same stream with the same escaping.

Every piece of text that came from a user or a model passes through html.escape here (hover cards
escape their own token text in specviz.teaching.charts.tokens).
"""

from __future__ import annotations

import html

from specviz.teaching.charts.drafting import drafted_line, tree_line
from specviz.teaching.charts.style import STATUS_BACKGROUNDS, STATUS_COLORS, STATUS_LABELS
from specviz.teaching.charts.tokens import display_token, hover_card, token_rows
from specviz.teaching.charts.words import words
from specviz.traces.trace import STATUSES

# break-spaces and overflow-wrap:anywhere keep every token inside the stream's column: under pre-wrap
# the spaces at a line's end hung past the edge, and a refused draft's line-through ran over them into
# the next column (issue 48); a word longer than the column breaks anywhere.
CSS = (
    "<style>"
    ".sv-stream{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:15px;line-height:2.1;"
    "white-space:break-spaces;overflow-wrap:anywhere}"
    ".sv-tok{position:relative;padding:1px 1px;border-radius:3px;border-bottom:2px solid;cursor:default}"
    ".sv-tok .sv-card{display:none;position:absolute;z-index:20;left:0;top:1.9em;min-width:340px;"
    "background:#fff;color:#212121;border:1px solid #bbb;border-radius:6px;padding:6px 9px;"
    "box-shadow:0 3px 10px rgba(0,0,0,.18);font:12.5px/1.45 system-ui,sans-serif;white-space:normal}"
    ".sv-tok:hover .sv-card{display:block}"
    ".sv-tok.sv-r .sv-card{left:auto;right:0}"
    ".sv-card .sv-it{display:block;margin-top:4px;padding-top:4px;border-top:1px solid #ddd;color:#455a64}"
    ".sv-legend{display:flex;flex-wrap:wrap;gap:6px 14px;font-size:13.5px;margin:4px 0 10px}"
    ".sv-legend span.sv-key{padding:1px 6px;border-radius:3px;border-bottom:2px solid}"
    + "".join(
        f".sv-{s}{{color:{STATUS_COLORS[s]};background:{STATUS_BACKGROUNDS[s]};border-color:{STATUS_COLORS[s]}}}"
        for s in STATUS_COLORS
    )
    + ".sv-rejected,.sv-discarded{text-decoration:line-through}"
    "</style>"
)


REFUSED = ("rejected", "discarded")
# Characters per line we guess the stream wraps at. Cards of tokens in the right half of a line open
# leftwards so they stay on screen; CSS alone cannot know where a token sits, and a wrong guess
# only moves a card, never hides it.
LINE_GUESS = 80


def iteration_note(it: dict, gamma: int | None = None, lang: str = "en") -> str:
    """The hover card's last lines, the same for every token of iteration `it`: how many of γ it
    drafted and why it stopped, and its draft tree (specviz.teaching.charts.drafting), in `lang`. HTML,
    escaped here."""
    lines = [words(lang)["iteration_line"].format(i=it["index"] + 1, line=drafted_line(it, gamma, lang=lang))]
    if (tree := tree_line(it, lang)) is not None:
        lines.append(tree)
    return f'<span class="sv-it">{"<br>".join(html.escape(line) for line in lines)}</span>'


def token_span(row: dict, extra: dict, column: int, note: str = "", lang: str = "en") -> str:
    text = html.escape(display_token(row["token"]) if not row["token"].strip() else row["token"])
    text = text.replace("\n", "↵<br>")
    card = hover_card(row, extra, lang=lang) + note
    side = " sv-r" if column % LINE_GUESS > LINE_GUESS // 2 else ""
    return f'<span class="sv-tok sv-{row["status"]}{side}">{text}<span class="sv-card">{card}</span></span>'


def token_stream_html(
    iterations: list[dict], extra: dict, show_refused: bool = True, gamma: int | None = None, lang: str = "en"
) -> str:
    """The generated text, one span per token coloured by status, each with a hover card that ends
    with its iteration's drafting, in `lang` (gamma: the run's γ, trace.config["gamma"]; None only for
    a trace that does not record it: each iteration's own most, which shrinks near max new tokens).

    show_refused=False leaves out rejected and discarded drafts, so the final text reads plainly.
    """
    rows = [r for r in token_rows(iterations) if show_refused or r["status"] not in REFUSED]
    notes = {it["index"]: iteration_note(it, gamma, lang) for it in iterations}
    spans, column = [], 0
    for r in rows:
        spans.append(token_span(r, extra, column, notes[r["iteration"]], lang))
        token = r["token"]
        column = len(token) - token.rfind("\n") - 1 if "\n" in token else column + len(token)
    spans = "".join(spans)
    return f'{CSS}<div class="sv-stream">{spans}</div>'


# The statuses' words live in one place, specviz.traces.trace.STATUSES (the CSV's status column uses them too).
MAIN_STATUSES = tuple(s for s in STATUSES if s != "target")


def statuses_in(iterations: list[dict]) -> tuple[str, ...]:
    """The main statuses, plus "target" when some iteration had no draft."""
    extra = ("target",) if any(r["status"] == "target" for r in token_rows(iterations)) else ()
    return MAIN_STATUSES + extra


def legend_html(statuses: tuple[str, ...] = MAIN_STATUSES, lang: str = "en") -> str:
    """The key of the statuses' colours: each chip names its status (as the trace does in English, in
    `lang`'s word for it otherwise: the lesson in Chinese), then describes it in `lang`."""
    said = words(lang)
    keys = "".join(
        f'<span><span class="sv-key sv-{s}">{html.escape(said.get(f"chip_{s}", s))}</span> '
        f"{html.escape(said.get(f'legend_{s}', STATUS_LABELS[s]))}</span>"
        for s in statuses
    )
    return f'{CSS}<div class="sv-legend">{keys}</div>'


def escaped_text(text: str) -> str:
    """User text for st.html, line breaks kept."""
    return html.escape(text).replace("\n", "<br>")
