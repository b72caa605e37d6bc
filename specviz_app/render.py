"""The Streamlit pieces the pages share: the headline numbers as metrics, the two texts side by
side with their sameness verdict, and the notice above every page about which trace is shown.

The HTML of the token stream and its legend is built in the library (specviz.teaching.charts.stream, also
used by the notebook views) and re-exported here for the pages. Every piece of text that came
from a user or a model passes through html.escape before it reaches st.html.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from specviz.teaching import catalogue
from specviz.teaching.charts.headline import batch_words, headline_metrics, passes_versus_time, sureness, timing_status
from specviz.teaching.charts.stream import escaped_text, legend_html, statuses_in, token_stream_html
from specviz.teaching.charts.tokens import md_escape
from specviz.traces.sameness import Sameness, sameness_of
from specviz.traces.speedup import Spread, speedup_spread
from specviz_app import keys, language, session
from specviz_app.runs import opening
from specviz_app.serving import background

# Absolute, so a link finds its page whichever main script serves the app (`specviz app` runs
# specviz_app/app.py, `streamlit run app.py` the root's app.py, which runs it).
PAGES_DIR = Path(__file__).resolve().parent / "app_pages"
# How often a page looks for the timing pairs that came in (a small fragment rerun). Each poll is a
# script run, and the pair it meets is timed again (specviz_app/serving/background.py): polling more often
# disturbed many more pairs and made the timing take far longer (docs/benchmarks.md, "The speedup a
# page shows", and "Figures once kept in code comments", "The app's server").
TIMING_POLL_S = 5.0
# How often a running decode redraws its page at most (the token stream and the progress bar). The
# stream is sent whole each time: redrawn every iteration, one page streaming a long run kept its
# browser half a core busy (docs/benchmarks.md, "Figures once kept in code comments", "The app's server").
STREAM_REDRAW_S = 0.25

__all__ = ["escaped_text", "legend_html", "md_escape", "statuses_in", "token_stream_html"]  # for the pages


# A token's hover card opens below it, leftwards in a line's right half (the stream's own CSS guesses the
# side from the token's column). Only the browser knows where a card lands: a card at a line's end ran
# past the window's right edge, one near the bottom below it (issue 59). Once a card is shown, this moves
# it inside the window: left or right by what it overhangs, above its token when there is no room below.
_CARDS_IN_VIEW = """<script>
(() => {
  if (window.__svCardsInView) return;
  window.__svCardsInView = true;
  const pad = 8;
  const place = (token) => {
    const card = token.querySelector('.sv-card');
    if (!card) return;
    Object.assign(card.style, {left: '', right: '', top: '', bottom: '', maxWidth: ''});
    const width = document.documentElement.clientWidth, height = window.innerHeight;
    card.style.maxWidth = (width - 2 * pad) + 'px';
    let r = card.getBoundingClientRect();
    if (r.right > width - pad || r.left < pad) {
      const shift = r.right > width - pad ? width - pad - r.right : pad - r.left;
      card.style.left = (card.offsetLeft + shift) + 'px';
      card.style.right = 'auto';
    }
    r = card.getBoundingClientRect();
    const above = token.getBoundingClientRect().top;
    if (r.bottom > height - pad && above - r.height - pad > 0) {
      card.style.top = 'auto';
      card.style.bottom = '1.9em';
    }
  };
  document.addEventListener('mouseover', (e) => {
    const token = e.target.closest && e.target.closest('.sv-tok');
    if (token) requestAnimationFrame(() => place(token));
  }, true);
})();
</script>"""


APP_SCRIPTS = (_CARDS_IN_VIEW,)  # the app's own scripts, written here with no user text in them


def cards_in_view() -> None:
    """Every hover card of the token streams opens inside the window (_CARDS_IN_VIEW; our own script)."""
    st.html(_CARDS_IN_VIEW, unsafe_allow_javascript=True)


def uploaders_in_language() -> None:
    """Every file uploader of the page in the language on show: Streamlit writes its box in English
    ("Drag and drop files here", "Limit 50MB per file", "Upload"), and its limit is the server's, which
    is larger than a trace may be (the pages say their own limit beside the box). So the English hint
    is hidden and the button says the catalogue's words."""
    said = language.words("app")["upload_button"]
    label = said.replace("\\", "\\\\").replace('"', '\\"').replace("<", "\\3c ")  # a CSS string, in a style tag
    st.html(
        "<style>[data-testid=stFileUploaderDropzoneInstructions]{display:none}"
        "[data-testid=stFileUploaderDropzone] button [data-testid=stMarkdownContainer]{display:none}"
        f'[data-testid=stFileUploaderDropzone] button::after{{content:"{label}";margin-left:0.4rem}}</style>'
    )


def headline(trace, baseline, spread) -> None:
    """The headline numbers (specviz.teaching.charts.headline) as two rows of metrics, with the words on the
    speed they need, all from `spread` (the run's speedup_spread: one reading, see speed_numbers)."""
    # Units sit in the labels and values are a little smaller than Streamlit's default, so four
    # numbers fit side by side on a laptop screen without being cut to "11.4 to…".
    st.html("<style>[data-testid=stMetricValue]{font-size:1.9rem}</style>")
    lang = language.current()
    for row in headline_metrics(trace, baseline, spread, lang):
        for col, m in zip(st.columns(len(row)), row, strict=True):
            note = {"delta": m.note, "delta_color": "off", "delta_arrow": "off"} if m.note else {}
            col.metric(m.label, m.value, help=m.help or None, **note)
    if words := sureness(spread, lang):
        st.caption(":material/straighten: " + words)
    if note := passes_versus_time(trace, baseline, spread, lang):
        st.warning(note, icon=":material/hourglass_bottom:")


def speed_numbers(loaded, draw: Callable[[Spread | None], None]) -> None:
    """Draw a page's speed numbers with `draw(spread)`, every one of them from a single reading of
    the run's timed pairs. While pairs still come in, `draw` runs in the timing line's fragment,
    below that line and from the same reading, so the figures, the count and any verdict move
    together: a headline drawn once beside a line that kept counting said "1.00×" under
    "so far 1.45×" (issue 35). The page must open with timing_line=False (open_trace_page)."""
    if loaded.timing is not None and loaded.timing.running():
        drawn_with_speedup = speedup_spread(loaded.trace, loaded.baseline) is not None
        st.fragment(run_every=TIMING_POLL_S)(_timing_status)(loaded, drawn_with_speedup, draw)
    else:
        draw(speedup_spread(loaded.trace, loaded.baseline))


def follow_timing(loaded) -> None:
    """For a page whose figures all read the run's timed pairs without being drawn by speed_numbers
    (Theory: its measured speedup, the verdict beside it, the chart's point): while pairs come in, the
    timing line, and the whole page drawn again as soon as another pair is in, so no figure stays at
    the count it was first drawn with while the Playground's moves on (issue 59)."""
    if loaded is None or loaded.timing is None or not loaded.timing.running():
        return
    st.fragment(run_every=TIMING_POLL_S)(_redraw_on_new_pairs)(loaded, _pairs_in(loaded))


def _pairs_in(loaded) -> tuple[int, int]:
    """The run's timed pairs as a page reads them: (the pairs its figures come from, the pairs timed)."""
    spread = speedup_spread(loaded.trace, loaded.baseline)
    return (0, 0) if spread is None else (spread.pairs, spread.timed)


@background.page_drawing  # a poll is a script run too: the pair it meets is timed again
def _redraw_on_new_pairs(loaded, pairs_when_drawn: tuple[int, int]) -> None:
    if not loaded.timing.running() or _pairs_in(loaded) != pairs_when_drawn:
        st.rerun()
    spread = speedup_spread(loaded.trace, loaded.baseline)
    if words := timing_status(loaded.trace, loaded.baseline, spread, language.current()):
        st.caption(":material/timer: " + words)


def sameness_words(trace, verdict: Sameness, w: dict[str, str]) -> str:
    """The verdict on sameness (specviz.traces.sameness) in the language of `w`, tokens named as the
    speculative trace wrote them (#id when unknown)."""
    if verdict.verdict in ("identical", "different_samples"):
        return w[f"same_{verdict.verdict}"].format(n=verdict.compared_tokens)
    names = trace.extra.get("token_text", {})

    def name(token_id) -> str:
        return repr(names.get(str(token_id), f"#{token_id}"))

    where = w["same_where"].format(
        at=verdict.first_difference + 1, spec=name(verdict.speculative_token), alone=name(verdict.target_token)
    )
    gap = None if verdict.logit_gap is None else f"{verdict.logit_gap:.3f}"
    return w[f"same_{verdict.verdict}"].format(where=where, gap=gap)


def side_by_side(trace, baseline) -> None:
    """Speculative text beside the target-alone text, with the verdict on sameness above them."""
    w = language.words("render")
    if baseline is None or baseline is trace:
        st.info(w["no_baseline_run"])
        return
    verdict = sameness_of(trace, baseline)
    sentence = sameness_words(trace, verdict, w)
    if verdict.verdict == "identical":
        st.success(sentence, icon=":material/check_circle:")
    elif verdict.verdict in ("near_tie", "different_samples"):
        st.info(sentence, icon=":material/info:")
        if verdict.verdict == "different_samples":
            st.page_link(PAGES_DIR / "lab.py", label=w["open_lab"], icon=":material/science:")
    else:
        st.warning(sentence, icon=":material/warning:")
    left, right = st.columns(2)
    left.markdown(w["speculative_text"].format(n=trace.summary["new_tokens"]))
    left.html(f"<div class='sv-plain'>{escaped_text(trace.output_text)}</div>")
    right.markdown(w["alone_text"].format(n=baseline.summary["new_tokens"]))
    right.html(f"<div class='sv-plain'>{escaped_text(baseline.output_text)}</div>")


@background.page_drawing  # a poll is a script run too: the pair it meets is timed again
def _timing_status(loaded, drawn_with_speedup: bool, draw: Callable[[Spread | None], None] | None = None) -> None:
    """While the run's further pairs are timed: how many are in and the speedup so far, then the
    page's speed numbers (`draw`, speed_numbers) from the same reading. The whole page is drawn
    again once the last pair is in, so every number on it agrees, and once the first solo pair is
    in when the page was drawn without a speedup (a batched run's own timing gives none)."""
    if not loaded.timing.running():
        st.rerun()
    spread = speedup_spread(loaded.trace, loaded.baseline)
    if not drawn_with_speedup and spread is not None:
        st.rerun()
    if words := timing_status(loaded.trace, loaded.baseline, spread, language.current()):
        st.caption(":material/timer: " + words)
    if draw is not None:
        draw(spread)


def trace_notice(loaded, settings, timing_line: bool = True) -> bool:
    """The line above every page: which trace is shown and whether the sidebar asks for a new run.
    `timing_line` False: the page shows its speed numbers with speed_numbers, which draws the
    timing line above them.

    Returns False when there is no trace to show.
    """
    w, lang = language.words("render"), language.current()
    if loaded is None:
        st.info(w["no_trace"])
        return False
    cfg = loaded.trace.config
    showing = w["showing"].format(
        source=opening.source_words(loaded.source, lang), target=cfg["target"], draft=cfg.get("draft"),
        gamma=cfg.get("gamma"), temperature=cfg["temperature"], seed=cfg["seed"],
    )  # fmt: skip
    st.caption(md_escape(showing))
    if words := batch_words(loaded.trace, loaded.baseline, lang):
        st.caption(":material/group: " + words)
    if note := cfg.get("capture_note"):  # on CUDA: the captured step failed its proof (engine.capture_proof)
        st.warning(w["capture_fallback"].format(why=str(note).replace("`", "'")), icon=":material/memory:")
    if timing_line and loaded.timing is not None and loaded.timing.running():
        drawn_with_speedup = speedup_spread(loaded.trace, loaded.baseline) is not None
        # One poll rate for every page: in a class, thirty pages polling faster while their shared
        # runs wait for solo pairs loaded the server and the browsers for nothing (the soak).
        st.fragment(run_every=TIMING_POLL_S)(_timing_status)(loaded, drawn_with_speedup)
    if loaded.run_key is None or loaded.run_key != settings.run_key():
        st.warning(w["settings_differ"])
    return True


# The trace pages that open with a title and a one-line explanation (the catalogue's section "render":
# "<page>_title", "<page>_intro"), by page file name.
INTRO_PAGES = ("playground", "timeline", "acceptance", "inspector", "workloads")
# In English, for callers that want the words without a language.
PAGE_INTROS = {page: (catalogue.words("render")[f"{page}_title"], catalogue.words("render")[f"{page}_intro"])
               for page in INTRO_PAGES}  # fmt: skip


def page_intro(page: str) -> tuple[str, str]:
    """A trace page's title and one-line explanation in the language on show."""
    w = language.words("render")
    return w[f"{page}_title"], w[f"{page}_intro"]


def open_trace_page(page: str, timing_line: bool = True):
    """Title, one-line explanation (page_intro) and the trace notice every trace page opens with
    (`timing_line`: see trace_notice). Returns the loaded trace (with its baseline), or None when
    there is none to show."""
    title, caption = page_intro(page)
    st.title(title)
    st.caption(caption)
    loaded = session.current()
    return loaded if trace_notice(loaded, st.session_state[keys.SETTINGS], timing_line) else None


@dataclass(frozen=True)
class SavedResults:
    """How a page saves its result and opens a saved one (the Sweep's, Workloads' and Serving's): a result
    class with to_json() and to_csv(), read back by `read`."""

    what: str  # the download buttons' word: "Sweep (JSON)", "Sweep (CSV)"
    read: Callable  # (file name, bytes) -> a result; a SpecvizError says what is wrong with the file
    widget_keys: tuple[str, str, str, str]  # keys.py: the JSON and CSV downloads', the uploader's, Open's
    shown: tuple[str, str]  # the session keys of the result on show and of where it came from
    formats: str  # the caption under the downloads: what each file keeps


FROM_FILE = "file: "  # a saved result's source once loaded from a file: "file: <its name>"


def saved_result_source(source: str, w: dict[str, str]) -> str:
    """Where a measuring page's result on show came from, as markdown in the page's words `w`: its
    "recorded" or "here" text, "from_file" with the file's name, or the source as given."""
    if source in ("recorded", "here"):
        return w[source]
    if source.startswith(FROM_FILE):
        return w["from_file"].format(name=md_escape(source[len(FROM_FILE) :]))
    return md_escape(source)


def save_or_load(files: SavedResults, result, stem: str) -> None:
    """A page's "Save or load" block: `result` (None: nothing to save yet) as JSON and CSV (`stem`.json,
    .csv) beside an uploader. An uploaded file is read with files.read (a SpecvizError is said above the
    page and the result on show stays), else put on show under files.shown and the page drawn again."""
    from specviz.errors import SpecvizError

    w = language.words("render")
    st.subheader(w["save_or_load"])
    save, load = st.columns(2)
    if result is None:
        save.caption(w["run_first"])
    else:
        json_col, csv_col = save.columns(2)
        json_col.download_button(
            w["download_json"].format(what=files.what),
            result.to_json(),
            f"{stem}.json",
            "application/json",
            key=files.widget_keys[0],
        )
        csv_col.download_button(
            w["download_csv"].format(what=files.what), result.to_csv(), f"{stem}.csv", "text/csv",
            key=files.widget_keys[1],
        )  # fmt: skip
        save.caption(w["both_load"].format(formats=files.formats))
    upload = load.file_uploader(w["load_file"], type=["json", "csv"], key=files.widget_keys[2])
    if upload is None or not load.button(w["open_upload"], key=files.widget_keys[3]):
        return
    try:
        loaded = files.read(upload.name, upload.getvalue())
    except SpecvizError as exc:
        st.error(f"{md_escape(upload.name)}: {exc}")
        return
    st.session_state[files.shown[0]] = loaded
    st.session_state[files.shown[1]] = f"{FROM_FILE}{upload.name}"  # the source, in English (opening.source_words)
    st.rerun()
