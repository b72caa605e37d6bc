"""The Lab page's "this machine's check": the last report of `python -m specviz check` made here (its
verdicts in the page's language, each with its statistic) and a button that runs the quick check.

The report is specviz.labs.check's, kept per machine (<cache>/check.json), so a check from a terminal shows
here too. Its one-line English sentences stay in the JSON; the page says each verdict from its numbers.
"""

import threading

import streamlit as st

from specviz.errors import SpecvizError
from specviz.labs import check
from specviz_app import keys, language, render

# The checks in the report's order, and those that are measurements (never a verdict): their words'
# keys are the catalogue's "check_<name>" (section "lab").
CHECKS = ("kernels", "greedy", "chi2", "invariants", "speed")
MEASURED = ("kernels", "speed")
# One check at a time per server: a check takes the whole CPU for about a minute, so a class pressing
# the button together must not run thirty (a session that finds one running is told so and waits for it).
CHECKING = threading.Lock()


def section() -> None:
    """The section: what it does, the last report (or that there is none), the button."""
    w = language.words("lab")
    st.subheader(w["check_title"])
    st.caption(w["check_intro"])
    if st.button(w["check_run"], icon=":material/verified:", key=keys.LAB_CHECK_RUN):
        _run_quick_check(w)
    report = check.last_report()
    if report is None:
        st.info(w["check_none"])
        return
    m = report["machine"]
    outcome = (
        w["check_passed"]
        if report["passed"]
        else w["check_failed"].format(
            checks=", ".join(w[f"check_{c}"] for c in report["caught_by"] if f"check_{c}" in w)
        )
    )
    said = w["check_made"].format(
        made=report["made_at"], kind=w["check_quick" if report["quick"] else "check_full"], rule=report["rule"],
        cpu=str(m["cpu"]).replace("`", "'"), cores=m["cores"], torch=m["torch"], seconds=report["seconds"],
    )  # fmt: skip
    (st.success if report["passed"] else st.error)(f"{outcome} {said}")  # its values shown as code
    # A list, not a table: the found values (a drafter's name, a rule) show as code, as elsewhere.
    lines = [_line(v, w) for v in report["verdicts"] if v["check"] in CHECKS]
    st.markdown("\n".join(lines))


def _run_quick_check(w: dict[str, str]) -> None:
    """The quick check, saved as this machine's report; or, while another session runs one, a wait for
    its report (said while it waits: the report below is then the new one)."""
    if not CHECKING.acquire(blocking=False):
        note = st.empty()
        # Said again at every poll: Streamlit stops a closed tab's script at its next call, never inside a lock.
        while not CHECKING.acquire(timeout=0.5):
            note.info(w["check_busy"], icon=":material/hourglass_top:")
        CHECKING.release()
        note.empty()
        return
    try:
        with st.spinner(w["check_running"]):
            report = check.run_check(quick=True, rule=None, device=None, dtype=None, log=lambda _: None)
            check.save_report(report, None)
    except (SpecvizError, OSError, RuntimeError) as exc:
        st.error(w["error"].format(error=render.md_escape(str(exc))))
    finally:
        CHECKING.release()


def _line(verdict: dict, w: dict[str, str]) -> str:
    name = w["check_" + verdict["check"]]
    return f"- **{name}** · {_verdict_word(verdict, w)} · {found(verdict, w)}"


def _verdict_word(verdict: dict, w: dict[str, str]) -> str:
    if verdict["check"] in MEASURED:
        return w["check_measured"]
    return w["check_pass"] if verdict["passed"] else w["check_fail"]


def found(verdict: dict, w: dict[str, str]) -> str:
    """What a check found, from its numbers, in the page's language."""
    d = verdict["detail"]
    name = verdict["check"]
    if name == "kernels":
        return w["check_found_kernels"].format(weights=d["weights"], forward=d["forward"], step=d.get("draft_step"))
    if name == "greedy":
        prompts = d["prompts"]
        same = sum(p["verdict"] == "identical" for p in prompts)
        ties = sum(p["verdict"] == "near_tie" for p in prompts)
        return w["check_found_greedy"].format(same=same, n=len(prompts), ties=ties, tokens=d["tokens"])
    if name == "chi2":
        p = "n/a" if d["p_value"] is None else f"{d['p_value']:.3g}"
        return w["check_found_chi2"].format(
            drafter=d["drafter"], rule=d["rule"], p=p, level=d["level"], n=d["n"], cells=d["cells"]
        )
    if name == "invariants":
        return w["check_found_invariants"].format(traces=d["traces"], problems=len(d["problems"]))
    spread = d.get("spread")
    if spread is None:
        return w["check_found_no_speed"]
    costs = d.get("costs") or {}
    return w["check_found_speed"].format(
        median=spread["median"], low=spread["low"], high=spread["high"], pairs=spread["pairs"],
        c=costs.get("c") or 0.0, v2=d["v"][2], v4=d["v"][4],
    )  # fmt: skip
