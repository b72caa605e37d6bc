"""Figures of the distribution lab (specviz.labs.lab.LabResult, in its dict form): the two empirical
distributions against the target's exact probabilities, and the verdict of every rule.

Pure functions: no torch, no streamlit. Labels for the outcomes come from the caller (the page
decodes token ids with the tokenizer, or writes #id for the toy pair); they are HTML-escaped here
because Plotly reads tags in labels. Every word comes from the catalogue's "charts" section (keys
"lab_..."), in the language `lang` (English by default).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from specviz.labs import lab_stats
from specviz.teaching.charts.style import P_COLOR, STATUS_COLORS, house_figure, titled
from specviz.teaching.charts.tokens import plot_escape
from specviz.teaching.charts.words import words

SPEC_COLOR = "#ef6c00"  # samples of speculative decoding (under the chosen rule)
TARGET_SAMPLE_COLOR = "#b39ddb"  # samples of the target alone: a light shade of p's purple
CORRECT_COLOR = STATUS_COLORS["accepted"]
WRONG_COLOR = STATUS_COLORS["rejected"]
SIGNIFICANCE = lab_stats.SIGNIFICANCE  # the lab's level, whose home (and why 0.001) is specviz.labs.lab_stats
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


# The columns of distribution_rows: its key for the code, its catalogue key for the reader.
DISTRIBUTION_COLUMNS = {
    "outcome": "lab_col_outcome", "exact p": "lab_col_exact", "speculative frequency": "lab_col_spec_freq",
    "target-alone frequency": "lab_col_target_freq", "speculative count": "lab_col_spec_count",
    "target-alone count": "lab_col_target_count",
}  # fmt: skip


def _distribution(result: dict[str, Any], labels: Sequence[str], top: int, lang: str) -> list[dict[str, Any]]:
    """distribution_rows under the code's column names (DISTRIBUTION_COLUMNS' keys)."""
    n_spec, n_target = max(result["n_spec"], 1), max(result["n_target"], 1)
    cells = len(result["outcomes"])

    def row(outcome: str, exact: float, spec: int, targ: int) -> dict[str, Any]:
        return {
            "outcome": outcome, "exact p": exact, "speculative frequency": spec / n_spec,
            "target-alone frequency": targ / n_target, "speculative count": spec, "target-alone count": targ,
        }  # fmt: skip

    rows = [
        row(labels[i], result["exact"][i], result["spec_counts"][i], result["target_counts"][i])
        for i in range(min(top, cells))
    ]
    rest = range(min(top, cells), cells + 1)  # the unlisted outcomes and the pooled "other" cell
    if any(result["exact"][i] > 0 or result["spec_counts"][i] or result["target_counts"][i] for i in rest):
        spec = sum(result["spec_counts"][i] for i in rest)
        targ = sum(result["target_counts"][i] for i in rest)
        exact = math.fsum(result["exact"][i] for i in rest)
        rows.append(row(words(lang)["lab_everything_else"], exact, spec, targ))
    return rows


def distribution_rows(
    result: dict[str, Any], labels: Sequence[str], top: int = 12, lang: str = "en"
) -> list[dict[str, Any]]:
    """The `top` most likely outcomes and one 'everything else' row: exact probability, both frequencies;
    the columns named in `lang`."""
    w = words(lang)
    return [{w[DISTRIBUTION_COLUMNS[k]]: v for k, v in r.items()} for r in _distribution(result, labels, top, lang)]


def distribution_figure(result: dict[str, Any], labels: Sequence[str], top: int = 12, lang: str = "en") -> go.Figure:
    """Bars: how often each k-token outcome came out, speculative (orange) and target alone (lilac);
    purple diamonds: the target's exact probability, with whiskers at ±2 standard errors (where 95 %
    of frequencies from n true samples land)."""
    w = words(lang)
    rows = _distribution(result, labels, top, lang)
    x = [plot_escape(r["outcome"]) for r in rows]
    n = max(result["n_spec"], 1)
    fig = house_figure()
    samplers = [("target-alone", w["lab_target_alone"], result["n_target"], TARGET_SAMPLE_COLOR)]
    speculative = w["lab_speculative"].format(rule=rule_name(result, lang))
    samplers.append(("speculative", speculative, result["n_spec"], SPEC_COLOR))
    for key, name, count, color in samplers:
        if not count:
            continue  # the target alone was not sampled in this run
        fig.add_bar(
            x=x,
            y=[r[f"{key} frequency"] for r in rows],
            name=w["lab_sampler_name"].format(name=name, count=count),
            marker_color=color,
            customdata=[r[f"{key} count"] for r in rows],
            hovertemplate=w["lab_hover_sampled"].format(name=name),
        )
    errors = [2 * math.sqrt(max(r["exact p"] * (1 - r["exact p"]), 0.0) / n) for r in rows]
    fig.add_scatter(
        x=x,
        y=[r["exact p"] for r in rows],
        mode="markers",
        marker={"color": P_COLOR, "size": 11, "symbol": "diamond"},
        error_y={"type": "data", "array": errors, "color": P_COLOR, "thickness": 1.5, "width": 6},
        name=w["lab_exact_name"],
        hovertemplate=w["lab_hover_exact"],
    )
    k = result["k"]
    one = "_one" if k == 1 else ""
    fig.update_layout(
        title=titled(w[f"lab_dist_title{one}"].format(k=k)),
        xaxis_title=w[f"lab_dist_x{one}"].format(k=k),
        yaxis_title=w["lab_dist_y"],
        barmode="group",
        height=440,
    )
    fig.update_yaxes(rangemode="tozero")
    return fig


def rule_title(rule: str, lang: str = "en", fallback: str = "") -> str:
    """A rule in a few words, as the page's dropdown names it (specviz.decoding.verify.RULE_NAMES in English)."""
    return words(lang).get(f"lab_rule_{rule}") or fallback or rule


def rule_name(result: dict[str, Any], lang: str = "en") -> str:
    """The rule's name as the page's dropdown shows it (rule_title; the result keeps the English one,
    stored by specviz.labs.lab.run_lab), never its code name."""
    return rule_title(result["rule"], lang, result.get("rule_name", ""))


def rule_label(rule: str, lang: str = "en", fallback: str = "") -> str:
    """What the rule does, in a sentence (specviz.decoding.verify.RULE_LABELS in English)."""
    return words(lang).get(f"lab_does_{rule}") or fallback or rule


def significance_note(simulated: int = 0, lang: str = "en") -> str:
    """The page's words on its significance level and on what a p-value is here (markdown);
    `simulated`: the null samples behind the p-values (FitResult.simulated), 0 for the χ² curve's."""
    w = words(lang)
    how = w["lab_how_simulated"].format(simulated=f"{simulated:,}") if simulated else w["lab_how_curve"]
    return w["lab_significance"].format(level=f"{SIGNIFICANCE:g}", runs=round(1 / SIGNIFICANCE), how=how)


def verdict(result: dict[str, Any], which: str = "spec_test") -> str:
    """'rejected', 'not rejected' or 'not enough data', at the SIGNIFICANCE level (English: a code as well
    as a word; VERDICT_WORDS names its text in the catalogue)."""
    test = _test(result, which)
    if test is None or test.get("p_value") is None:
        return "not enough data"
    return "rejected" if test["p_value"] < SIGNIFICANCE else "not rejected"


VERDICT_WORDS = {"rejected": "lab_verdict_rejected", "not rejected": "lab_verdict_not_rejected",
                 "not enough data": "lab_verdict_no_data"}  # fmt: skip
RULE_NUMBER_FORMATS = {"p-value": "{:.3g}", "statistic": "{:.1f}", "tokens per iteration": "{:.2f}"}
# The columns of rules_rows: its key for the code, its catalogue key for the reader.
RULE_COLUMNS = {
    "rule": "lab_col_rule", "what it does": "lab_col_does", "samples": "lab_col_samples",
    "statistic": "lab_col_statistic", "dof": "lab_col_dof", "p-value": "lab_col_p",
    "impossible samples": "lab_col_impossible", "verdict": "lab_col_verdict", "tokens per iteration": "lab_col_tokens",
}  # fmt: skip


def rules_rows(
    results: dict[str, dict[str, Any]], costs: dict[str, float] | None = None, as_text: bool = False, lang: str = "en"
) -> list[dict[str, Any]]:
    """One row per rule tried: its label, the test of its samples, the verdict, tokens per iteration,
    the columns named in `lang`. as_text=True formats the numbers for a static table (which wraps long
    text, unlike a data grid)."""
    w = words(lang)
    rows = []
    for rule, r in results.items():
        test = _test(r, "spec_test") or {}
        rows.append(
            {
                "rule": rule_name(r, lang),
                "what it does": rule_label(rule, lang, r["rule_label"]),
                "samples": r["n_spec"],
                "statistic": test.get("statistic"),
                "dof": test.get("dof"),
                "p-value": test.get("p_value"),
                "impossible samples": r.get("impossible_spec", 0),
                "verdict": w[VERDICT_WORDS[verdict(r)]],
                "tokens per iteration": None if costs is None else costs.get(rule),
            }
        )
    if as_text:

        def show(key: str, value: Any) -> Any:
            if value is None:
                return w["lab_na"]
            return RULE_NUMBER_FORMATS[key].format(value) if key in RULE_NUMBER_FORMATS else value

        rows = [{k: show(k, v) for k, v in row.items()} for row in rows]
    return [{w[RULE_COLUMNS[k]]: v for k, v in row.items()} for row in rows]


def p_value_label(p_value: float | None, lang: str = "en") -> str:
    w = words(lang)
    if p_value is None:
        return w["lab_na"]
    return w["lab_p_zero"] if p_value == 0 else w["lab_p_value"].format(p=f"{p_value:.2g}")


def _width(text: str) -> int:
    """How wide `text` draws, in Latin letters: a Chinese character is about two."""
    return sum(2 if ord(ch) >= 0x2E80 else 1 for ch in text)


def _pieces(label: str, width: int) -> list[str]:
    """The words of `label`, each cut into pieces no wider than `width` (Chinese has no spaces)."""
    out = []
    for word in label.split():
        piece = ""
        for ch in word:
            if piece and _width(piece + ch) > width:
                out.append(piece)
                piece = ""
            piece += ch
        out.append(piece)
    return out


def _wrapped(label: str, width: int = 26) -> str:
    """An axis label broken into lines about `width` letters wide (Plotly never wraps a tick)."""
    lines, line = [], ""
    for word in _pieces(label, width):
        if line and _width(line) + 1 + _width(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "<br>".join(plot_escape(part) for part in [*lines, line])


def rules_figure(results: dict[str, dict[str, Any]], wrong_rules: Sequence[str], lang: str = "en") -> go.Figure:
    """Each rule's goodness-of-fit p-value on a log axis, so 0.3 and 1e-17 both show where they
    are: the lower the dot, the stronger the evidence that the rule does not sample from p. Below
    the dashed line (SIGNIFICANCE) the test rejects. Green: a correct rule, red: a wrong one. The
    rules are named as the page's dropdown names them. A p-value of exactly 0 (an impossible
    sample) has no place on a log axis: it is drawn at the bottom edge as a triangle, and says so."""
    w = words(lang)
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
            x=[_wrapped(rule_name(results[rule], lang)) for rule in rules],
            y=[ps[rule] if ps[rule] > 0 else 10**bottom for rule in rules],
            mode="markers+text",
            marker={
                "color": CORRECT_COLOR if correct else WRONG_COLOR,
                "size": 18,
                "symbol": ["circle" if ps[rule] > 0 else "triangle-down" for rule in rules],
                "line": {"color": "white", "width": 1.5},
            },
            name=w["lab_correct_rule"] if correct else w["lab_wrong_rule"],
            # "p-value", never "p =": p is the target's probability everywhere else in specviz.
            text=[p_value_label(ps[rule], lang) for rule in rules],
            # Beside the dot, towards the middle: the last rule's label went off the right edge.
            textposition=["middle left" if rule == last else "middle right" for rule in rules],
            cliponaxis=False,
            hovertemplate="%{x}: %{text}<extra></extra>",
        )
    fig.add_hline(y=SIGNIFICANCE, line={"color": "#424242", "dash": "dash"})
    fig.add_annotation(  # under the line at the right, clear of the dots near 1 (a log axis takes log10 here)
        x=1, xref="paper", xanchor="right", y=math.log10(SIGNIFICANCE), yref="y", yanchor="top", showarrow=False,
        text=w["lab_level_line"].format(level=f"{SIGNIFICANCE:g}"), font={"color": "#424242"},
    )  # fmt: skip
    fig.update_layout(
        title=titled(w["lab_rules_title"]), xaxis_title=w["lab_rules_x"], yaxis_title=w["lab_rules_y"], height=440
    )
    order = [_wrapped(rule_name(r, lang)) for r in results.values()]
    fig.update_xaxes(categoryorder="array", categoryarray=order)
    fig.update_yaxes(type="log", range=[bottom, 0.3], exponentformat="power", dtick=1 if bottom > -6 else 2)
    return fig


def _facts(result: dict[str, Any], lang: str) -> str:
    """The test's numbers in a sentence: statistic, degrees of freedom, p-value, samples, impossible ones."""
    w = words(lang)
    test = result["spec_test"]
    stat = w["lab_no_statistic"] if test["statistic"] is None else f"χ² = {test['statistic']:.1f}"
    facts = w["lab_facts"].format(stat=stat, dof=test["dof"], p=f"{test['p_value']:.3g}", n=result["n_spec"])
    if impossible := result.get("impossible_spec", 0):
        facts += w["lab_facts_impossible"].format(impossible=impossible)
    return facts


def verdict_messages(
    rule: str, result: dict[str, Any], wrong_rules: Sequence[str], lang: str = "en"
) -> list[tuple[str, str]]:
    """What the lab says about one rule's test, as (level, markdown) pairs; level is one of
    "warning", "info", "error", "success" (the page shows each with that Streamlit call)."""
    w = words(lang)
    p = result["spec_test"]["p_value"]
    out = []
    if result["stopped"]:
        out.append(("warning", w["lab_stopped"].format(done=result["n_spec"], requested=result["n_requested"])))
    if p is None:
        return out + [("info", w["lab_too_few"])]
    facts = _facts(result, lang)
    if p < SIGNIFICANCE:
        kind = w["lab_expected_wrong"] if rule in wrong_rules else w["lab_unexpected"]
        return out + [("error", w["lab_rejected"].format(kind=kind, facts=facts))]
    extra = w["lab_not_caught"] if rule in wrong_rules else ""
    return out + [("success", w["lab_not_rejected"].format(facts=facts, extra=extra))]


def control_verdict(
    test: dict[str, Any] | None, n: int, level: float = SIGNIFICANCE, lang: str = "en"
) -> tuple[str, str] | None:
    """What the page says of the control, the target alone tested against its own exact distribution,
    as (level, markdown): "caption" when the test does not reject at `level`, "warning" when it does.

    A correct sampler is rejected at level a with probability a, so at 0.01 about one run in 100
    rejects the control by chance: the page must say that plainly, never that p itself "should not be
    rejected" beside a p-value that just was. None when there is nothing to test."""
    if not test or test.get("p_value") is None:
        return None
    w = words(lang)
    p = test["p_value"]
    in_runs = round(1 / level) if level > 0 else None
    chance = w["lab_chance_in"].format(runs=in_runs) if in_runs else w["lab_chance"]
    said = {"n": n, "p": f"{p:.3g}", "level": f"{level:g}", "chance": chance}
    if p < level:
        return "warning", w["lab_control_rejected"].format(**said)
    return "caption", w["lab_control_passed"].format(**said)
