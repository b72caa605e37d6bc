"""The notebook views (specviz.teaching.notebook): what each view holds, its escaping, and the worked
notebook examples/specviz_tour.ipynb executed headlessly from top to bottom (slow: it decodes)."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest
from test_charts import EVIL, make_baseline, make_trace

from specviz.errors import TraceError
from specviz.shipped import ASSETS
from specviz.teaching.charts.tokens import token_rows
from specviz.teaching.notebook import VIEWS, View
from specviz.traces.speedup import speedup, speedup_spread
from specviz.traces.trace import Trace

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "specviz_tour.ipynb"
REMOTE_SCRIPT = re.compile(r"<script[^>]*\bsrc=[\"']?https?://|paths: *\{[^}]*https?://")  # a CDN load
METRIC = re.compile(r"sv-metric-label'>([^<]*)</div><div class='sv-metric-value'>([^<]*)<")


def example(name: str = "01-default") -> tuple[Trace, Trace]:
    read = lambda suffix: Trace.from_json((ASSETS / "examples" / f"{name}{suffix}.json").read_text())  # noqa: E731
    return read(""), read(".baseline")


def status_counts(html_text: str) -> Counter:
    return Counter(re.findall(r'class="sv-tok sv-(\w+)', html_text))


def test_a_trace_renders_its_numbers_and_every_token_inline():
    trace, baseline = example()
    out = trace._repr_html_()
    assert status_counts(out) == Counter(r["status"] for r in token_rows(trace))
    metrics = dict(METRIC.findall(out))
    s = trace.summary
    assert metrics["Iterations"] == str(s["iterations"])
    assert metrics["Tokens per iteration"] == f"{s['mean_accepted_length']:.2f}"
    assert metrics["Speedup"] == "n/a"  # no baseline given
    with_base = dict(METRIC.findall(trace.show("tokens", baseline=baseline).html))
    assert with_base["Speedup"] == f"{speedup(trace, baseline):.2f}×"  # the pages' one speedup: its timed pairs'
    assert f"over {speedup_spread(trace, baseline).pairs} pairs" in trace.show("tokens", baseline=baseline).html
    assert "data-verdict=" in trace.show("tokens", baseline=baseline).html


def test_token_text_from_a_model_is_escaped_in_every_html_view():
    evil = make_trace(evil=True)
    for html_text in (evil._repr_html_(), evil.show("step", iteration=1).html, evil.show("tokens").html):
        assert EVIL not in html_text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in evil._repr_html_()
    assert "<script>" not in evil.show("tokens", baseline=make_baseline()).html


def test_each_view_uses_the_app_builders_and_refuses_what_it_cannot_show():
    trace, baseline = example()
    step = trace.show("step", iteration=1)
    it = trace.iterations[0]
    checked = [d for d in it["drafts"] if d.get("r") is not None or d["accepted"]] if it["drafts"] else []
    assert len(step.figures) >= len(checked)
    assert len(trace.show("timeline", baseline=baseline).figures) == 1
    assert len(trace.show("acceptance").figures) == 3
    theory = trace.show("theory", baseline=baseline)
    assert f"α = {trace.summary['alpha']:.3f}" in theory.html and len(theory.figures) == 3
    with pytest.raises(TraceError, match="from 1 to"):
        trace.show("step", iteration=len(trace.iterations) + 1)
    with pytest.raises(TraceError, match="pick one of"):
        trace.show("heatmap")
    assert set(VIEWS) == {"tokens", "step", "timeline", "acceptance", "theory"}


def test_a_standalone_page_embeds_plotly_once_and_needs_no_network():
    trace, baseline = example()
    page = trace.show("acceptance").to_html()
    assert page.count("plotly.js v") == 1  # the bundle's banner: embedded once for three figures
    assert not REMOTE_SCRIPT.search(page)
    assert isinstance(trace.show("tokens"), View)


def all_html(nb) -> list[str]:
    return [
        o["data"]["text/html"]
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.outputs
        if "data" in o and "text/html" in o["data"]
    ]


@pytest.mark.slow
def test_the_worked_notebook_runs_offline_top_to_bottom(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    n_cells = len(nb.cells)
    # Two cells the test adds at the end: the kernel's own numbers, and a token with HTML in it.
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "import json\nfrom collections import Counter\nfrom specviz.teaching.charts.tokens import token_rows\n"
            "print('FACTS ' + json.dumps({'summary': trace.summary, 'baseline': baseline.summary, "
            "'statuses': Counter(r['status'] for r in token_rows(trace))}))"
        )
    )
    evil = make_trace(evil=True).to_json()
    nb.cells.append(nbformat.v4.new_code_cell(f"specviz.Trace.from_json({evil!r})"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # nbclient waits only 4 s by default for a cell's outputs after its reply and then drops
    # them silently; a busy CI machine took longer once (the FACTS line was missing). Wait
    # longer, and fail loudly rather than read a notebook with outputs missing.
    client = nbclient.NotebookClient(
        nb,
        timeout=600,
        iopub_timeout=120,
        raise_on_iopub_timeout=True,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()

    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    # The FACTS line is read wherever it stands in the stream: output that an earlier cell's thread
    # left without a newline would otherwise start its line (a CI run found no line starting FACTS),
    # and the kernel may send one print in several stream messages (a CI run got "FACTS" and the JSON
    # apart), so the messages are joined first and the line printed as one string.
    streams = [o["text"] for c in nb.cells[n_cells:] for o in c.outputs if o.output_type == "stream"]
    text = "".join(streams)
    facts_lines = [line[line.index("FACTS ") :] for line in text.splitlines() if "FACTS " in line]
    assert facts_lines, f"the kernel printed no FACTS line; the added cells printed: {streams!r}"[:3000]
    facts = json.loads(facts_lines[0].removeprefix("FACTS "))
    s, b = facts["summary"], facts["baseline"]

    htmls = all_html(nb)
    inline = next(h for h in htmls if "sv-metrics" in h)  # the first: the bare `trace` cell
    assert status_counts(inline) == Counter(facts["statuses"])
    metrics = dict(METRIC.findall(inline))
    assert metrics["Iterations"] == str(s["iterations"])
    assert metrics["Tokens per iteration"] == f"{s['mean_accepted_length']:.2f}"
    with_baseline = next(h for h in htmls if "data-verdict=" in h)
    assert dict(METRIC.findall(with_baseline))["Speedup"] == f"{s['tokens_per_s'] / b['tokens_per_s']:.2f}×"
    assert "data-verdict='identical'" in with_baseline  # greedy, float32: the output is unchanged

    figures = [
        o["data"]["application/vnd.plotly.v1+json"]
        for c in nb.cells
        for o in c.get("outputs", [])
        if "application/vnd.plotly.v1+json" in o.get("data", {})
    ]
    assert len(figures) >= 1 + 3 + 3 + 2  # step, timeline, acceptance, theory, race
    outputs = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert not REMOTE_SCRIPT.search(outputs)  # offline: no script loaded from a CDN
    assert sum(h.count("plotly.js v") for h in htmls) == 1  # plotly.js embedded into the notebook once

    evil_html = [h for c in nb.cells[n_cells:] for o in c.outputs for h in [o.get("data", {}).get("text/html", "")]]
    assert any("&lt;script&gt;alert(1)&lt;/script&gt;" in h for h in evil_html)
    assert not any(EVIL in h for h in evil_html)
    exported = Trace.from_json((tmp_path / "trace.json").read_text(encoding="utf-8"))
    assert exported.summary == s and (tmp_path / "timeline.html").stat().st_size > 100_000
