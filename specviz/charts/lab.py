"""Figures of the distribution lab (specviz.lab.LabResult, in its dict form): the two empirical
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

from specviz.charts.style import P_COLOR, STATUS_COLORS, house_figure, titled

SPEC_COLOR = "#ef6c00"  # samples of speculative decoding (under the chosen rule)
TARGET_SAMPLE_COLOR = "#b39ddb"  # samples of the target alone: a light shade of p's purple
CORRECT_COLOR = STATUS_COLORS["accepted"]
WRONG_COLOR = STATUS_COLORS["rejected"]
SIGNIFICANCE = 0.01  # below this p-value the page says "the statistic rejects: not the target's distribution"


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
    samplers.append(("speculative", f"speculative, rule '{result['rule']}'", result["n_spec"], SPEC_COLOR))
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
                "rule": rule,
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


def rules_figure(results: dict[str, dict[str, Any]], wrong_rules: Sequence[str]) -> go.Figure:
    """Evidence against p for each rule's speculative samples: −log10 of the goodness-of-fit p-value,
    so a taller bar means 'further from the target's distribution'. Above the line (p-value 0.01)
    the test rejects. Green: a correct rule, red: a wrong one. p-values below 1e-16 (or exactly 0,
    an impossible sample) are drawn at 16; the label gives the number."""
    fig = house_figure()
    floor = 1e-16
    for correct in (True, False):
        rules = [rule for rule in results if (rule not in wrong_rules) == correct]
        if not rules:
            continue
        ps = [(_test(results[rule], "spec_test") or {}).get("p_value") for rule in rules]
        fig.add_bar(
            x=rules,
            y=[-math.log10(max(p, floor)) if p is not None else None for p in ps],
            name="correct rule (keeps p exactly)" if correct else "wrong rule (changes the distribution)",
            marker_color=CORRECT_COLOR if correct else WRONG_COLOR,
            # "p-value", never "p =": p is the target's probability everywhere else in specviz.
            text=[p_value_label(p) for p in ps],
            textposition="outside",
            hovertemplate="%{x}: %{text}<extra></extra>",
        )
    threshold = -math.log10(SIGNIFICANCE)
    fig.add_hline(
        y=threshold,
        line={"color": "#424242", "dash": "dash"},
        annotation_text=f"p-value {SIGNIFICANCE}: above this line the test rejects",
        annotation_position="top left",
    )
    fig.update_layout(
        title=titled("Does each rule sample from p? Evidence against p from its samples"),
        xaxis_title="verification rule",
        yaxis_title="evidence against p: −log₁₀(p-value)",
        height=400,
        barmode="group",
    )
    fig.update_yaxes(range=[0, 18.5])
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
