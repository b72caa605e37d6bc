"""Figures of the distribution lab (specviz.labs.lab.LabResult, in its dict form): the two empirical
distributions against the target's exact probabilities, and the verdict of every rule.

Pure functions: no torch, no streamlit. Labels for the outcomes come from the caller (the page
decodes token ids with the tokenizer, or writes #id for the toy pair); they are HTML-escaped here
because Plotly reads tags in labels.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from specviz.teaching.charts.style import P_COLOR, STATUS_COLORS, house_figure, titled

SPEC_COLOR = "#ef6c00"  # samples of speculative decoding (under the chosen rule)
TARGET_SAMPLE_COLOR = "#b39ddb"  # samples of the target alone: a light shade of p's purple
CORRECT_COLOR = STATUS_COLORS["accepted"]
WRONG_COLOR = STATUS_COLORS["rejected"]
# The lab's significance level: below this p-value the page says the test rejects. At 0.01 one run
# in 100 of the correct rule or the control was called "not the target's distribution" (the page's
# very first run, seed 0, was one of them: p-value 0.0084). At 0.001 a correct sampler is rejected
# about 1 run in 1000 (docs/reliability.md, measured), while the wrong rules at the default n = 500
# land near p-value 1e-17: fourteen orders of magnitude below the level, caught all the same.
SIGNIFICANCE = 0.001
# The page's starting values, per choice of models; scripts/lab_false_alarms.py measures the toy ones.
DEFAULTS = {
    "toy": {"k": 2, "n": 500, "gamma": 1, "temperature": 1.0},
    "sidebar": {"k": 1, "n": 60, "gamma": 1, "temperature": 1.0},
}


def _test(result: dict[str, Any], which: str) -> dict[str, Any] | None:
    test = result.get(which)
    if test is None or isinstance(test, dict):
        return test
    return vars(test)


def distribution_rows(result: dict[str, Any], labels: Sequence[str], top: int = 12) -> list[dict[str, Any]]:
    """The `top` most likely outcomes and one 'everything else' row: exact probability, both frequencies."""
    n_spec, n_target = max(result["n_spec"], 1), max(result["n_target"], 1)
    cells = len(result["outcomes"])
    rows = []
    for i in range(min(top, cells)):
        rows.append(
            {
                "outcome": labels[i],
                "exact p": result["exact"][i],
                "speculative frequency": result["spec_counts"][i] / n_spec,
                "target-alone frequency": result["target_counts"][i] / n_target,
                "speculative count": result["spec_counts"][i],
                "target-alone count": result["target_counts"][i],
            }
        )
    rest = range(min(top, cells), cells + 1)  # the unlisted outcomes and the pooled "other" cell
    if any(result["exact"][i] > 0 or result["spec_counts"][i] or result["target_counts"][i] for i in rest):
        spec = sum(result["spec_counts"][i] for i in rest)
        targ = sum(result["target_counts"][i] for i in rest)
        rows.append(
            {
                "outcome": "everything else",
                "exact p": math.fsum(result["exact"][i] for i in rest),
                "speculative frequency": spec / n_spec,
                "target-alone frequency": targ / n_target,
                "speculative count": spec,
                "target-alone count": targ,
            }
        )
    return rows


def distribution_figure(result: dict[str, Any], labels: Sequence[str], top: int = 12) -> go.Figure:
    """Bars: how often each k-token outcome came out, speculative (orange) and target alone (lilac);
    purple diamonds: the target's exact probability, with whiskers at ±2 standard errors (where 95 %
    of frequencies from n true samples land)."""
    rows = distribution_rows(result, labels, top)
    x = [html.escape(r["outcome"]) for r in rows]
    n = max(result["n_spec"], 1)
    fig = house_figure()
    samplers = [("target-alone", "target alone", result["n_target"], TARGET_SAMPLE_COLOR)]
    samplers.append(("speculative", f"speculative, {rule_name(result)}", result["n_spec"], SPEC_COLOR))
    for key, name, count, color in samplers:
        if not count:
            continue  # the target alone was not sampled in this run
        fig.add_bar(
            x=x,
            y=[r[f"{key} frequency"] for r in rows],
            name=f"{name} ({count} samples)",
            marker_color=color,
            customdata=[r[f"{key} count"] for r in rows],
            hovertemplate=f"%{{x}}<br>{name}: %{{y:.3f}} (%{{customdata}} samples)<extra></extra>",
        )
    errors = [2 * math.sqrt(max(r["exact p"] * (1 - r["exact p"]), 0.0) / n) for r in rows]
    fig.add_scatter(
        x=x,
        y=[r["exact p"] for r in rows],
        mode="markers",
        marker={"color": P_COLOR, "size": 11, "symbol": "diamond"},
        error_y={"type": "data", "array": errors, "color": P_COLOR, "thickness": 1.5, "width": 6},
        name="exact p (target) ± 2 standard errors",
        hovertemplate="%{x}<br>exact p %{y:.3g}<extra></extra>",
    )
    k = result["k"]
    fig.update_layout(
        title=titled(f"The first {k} generated token{'s' if k > 1 else ''}: sampled frequency against exact p"),
        xaxis_title=f"outcome (the first {k} token{'s' if k > 1 else ''}, most likely first)",
        yaxis_title="probability / frequency (fraction of samples)",
        barmode="group",
        height=440,
    )
    fig.update_yaxes(rangemode="tozero")
    return fig


def rule_name(result: dict[str, Any]) -> str:
    """The rule's name as the page's dropdown shows it (specviz.decoding.verify.RULE_NAMES, stored in the
    result by specviz.labs.lab.run_lab), never its code name."""
    return result.get("rule_name") or result["rule"]


def significance_note(simulated: int = 0) -> str:
    """The page's words on its significance level and on what a p-value is here (markdown);
    `simulated`: the null samples behind the p-values (FitResult.simulated), 0 for the χ² curve's."""
    runs = round(1 / SIGNIFICANCE)
    how = (
        f"the share of {simulated:,} samples drawn from p itself whose χ² is at least as large"
        if simulated
        else "from the χ² distribution"
    )
    return (
        f"**Significance level {SIGNIFICANCE:g}**: a test rejects when its p-value is below {SIGNIFICANCE:g}, so a "
        f"correct sampler is rejected about 1 run in {runs} by chance, while the wrong rules land near p-value "
        f"1e-17 at the default n = 500, far below it. Each p-value is {how}."
    )


def verdict(result: dict[str, Any], which: str = "spec_test") -> str:
    """'rejected', 'not rejected' or 'not enough data', at the SIGNIFICANCE level."""
    test = _test(result, which)
    if test is None or test.get("p_value") is None:
        return "not enough data"
    return "rejected" if test["p_value"] < SIGNIFICANCE else "not rejected"


RULE_NUMBER_FORMATS = {"p-value": "{:.3g}", "statistic": "{:.1f}", "tokens per iteration": "{:.2f}"}


def rules_rows(
    results: dict[str, dict[str, Any]], costs: dict[str, float] | None = None, as_text: bool = False
) -> list[dict[str, Any]]:
    """One row per rule tried: its label, the test of its samples, the verdict, tokens per iteration.
    as_text=True formats the numbers for a static table (which wraps long text, unlike a data grid)."""
    if as_text:

        def show(key: str, value: Any) -> Any:
            if value is None:
                return "n/a"
            return RULE_NUMBER_FORMATS[key].format(value) if key in RULE_NUMBER_FORMATS else value

        return [{k: show(k, v) for k, v in row.items()} for row in rules_rows(results, costs)]
    rows = []
    for rule, r in results.items():
        test = _test(r, "spec_test") or {}
        rows.append(
            {
                "rule": rule_name(r),
                "what it does": r["rule_label"],
                "samples": r["n_spec"],
                "statistic": test.get("statistic"),
                "dof": test.get("dof"),
                "p-value": test.get("p_value"),
                "impossible samples": r.get("impossible_spec", 0),
                "verdict": verdict(r),
                "tokens per iteration": None if costs is None else costs.get(rule),
            }
        )
    return rows


def p_value_label(p_value: float | None) -> str:
    if p_value is None:
        return "n/a"
    return "p-value 0 (impossible sample)" if p_value == 0 else f"p-value {p_value:.2g}"


def _wrapped(label: str, width: int = 26) -> str:
    """An axis label broken into lines of about `width` characters (Plotly never wraps a tick)."""
    lines, line = [], ""
    for word in label.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "<br>".join(html.escape(part) for part in [*lines, line])


def rules_figure(results: dict[str, dict[str, Any]], wrong_rules: Sequence[str]) -> go.Figure:
    """Each rule's goodness-of-fit p-value on a log axis, so 0.3 and 1e-17 both show where they
    are: the lower the dot, the stronger the evidence that the rule does not sample from p. Below
    the dashed line (SIGNIFICANCE) the test rejects. Green: a correct rule, red: a wrong one. The
    rules are named as the page's dropdown names them. A p-value of exactly 0 (an impossible
    sample) has no place on a log axis: it is drawn at the bottom edge as a triangle, and says so."""
    fig = house_figure()
    ps = {rule: (_test(r, "spec_test") or {}).get("p_value") for rule, r in results.items()}
    shown = [p for p in ps.values() if p]
    bottom = math.floor(math.log10(min([*shown, SIGNIFICANCE]))) - 1  # a decade of room under the lowest
    last = list(results)[-1]
    for correct in (True, False):
        rules = [rule for rule in results if (rule not in wrong_rules) == correct and ps[rule] is not None]
        if not rules:
            continue
        fig.add_scatter(
            x=[_wrapped(rule_name(results[rule])) for rule in rules],
            y=[ps[rule] if ps[rule] > 0 else 10**bottom for rule in rules],
            mode="markers+text",
            marker={
                "color": CORRECT_COLOR if correct else WRONG_COLOR,
                "size": 18,
                "symbol": ["circle" if ps[rule] > 0 else "triangle-down" for rule in rules],
                "line": {"color": "white", "width": 1.5},
            },
            name="correct rule (keeps p exactly)" if correct else "wrong rule (changes the distribution)",
            # "p-value", never "p =": p is the target's probability everywhere else in specviz.
            text=[p_value_label(ps[rule]) for rule in rules],
            # Beside the dot, towards the middle: the last rule's label went off the right edge.
            textposition=["middle left" if rule == last else "middle right" for rule in rules],
            cliponaxis=False,
            hovertemplate="%{x}: %{text}<extra></extra>",
        )
    fig.add_hline(y=SIGNIFICANCE, line={"color": "#424242", "dash": "dash"})
    fig.add_annotation(  # under the line at the right, clear of the dots near 1 (a log axis takes log10 here)
        x=1, xref="paper", xanchor="right", y=math.log10(SIGNIFICANCE), yref="y", yanchor="top", showarrow=False,
        text=f"significance level {SIGNIFICANCE:g}: below this line the test rejects", font={"color": "#424242"},
    )  # fmt: skip
    fig.update_layout(
        title=titled("Does each rule sample from p? Its p-value: the lower, the stronger the evidence against"),
        xaxis_title="verification rule",
        yaxis_title="p-value (log scale)",
        height=440,
    )
    fig.update_xaxes(categoryorder="array", categoryarray=[_wrapped(rule_name(r)) for r in results.values()])
    fig.update_yaxes(type="log", range=[bottom, 0.3], exponentformat="power", dtick=1 if bottom > -6 else 2)
    return fig


def verdict_messages(rule: str, result: dict[str, Any], wrong_rules: Sequence[str]) -> list[tuple[str, str]]:
    """What the lab says about one rule's test, as (level, markdown) pairs; level is one of
    "warning", "info", "error", "success" (the page shows each with that Streamlit call)."""
    test = result["spec_test"]
    p = test["p_value"]
    out = []
    if result["stopped"]:
        out.append(
            ("warning", f"Stopped after {result['n_spec']} of {result['n_requested']} samples; the test uses those.")
        )
    if p is None:
        return out + [
            ("info", "Not enough distinct outcomes to test: raise the temperature or the number of tokens k.")
        ]
    impossible = result.get("impossible_spec", 0)
    stat = (
        "no statistic: an impossible sample decides" if test["statistic"] is None else f"χ² = {test['statistic']:.1f}"
    )
    facts = f"{stat}, {test['dof']} degrees of freedom, p-value = {p:.3g} ({result['n_spec']} samples)"
    if impossible:
        facts += f"; {impossible} sample(s) had exact probability 0 under the target"
    if p < SIGNIFICANCE:
        kind = "as expected: this rule is wrong" if rule in wrong_rules else "unexpected for a correct rule"
        return out + [("error", f"**Rejected** ({kind}): these samples are not distributed as p. {facts}.")]
    extra = (
        " This wrong rule was not caught at this sample size: raise n or k, or lower γ." if rule in wrong_rules else ""
    )
    return out + [
        (
            "success",
            f"**Not rejected**: the samples are consistent with p. {facts}.{extra} "
            "(A test never proves equality; it finds no evidence of a difference.)",
        )
    ]
