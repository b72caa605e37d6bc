"""`python -m specviz check` (specviz.labs.check): a wrong rule fails it and the report names the check
that caught it; the exit status follows the verdicts; the report is kept as this machine's last."""

from __future__ import annotations

import json

import pytest

from specviz.labs import check


def _report(passed: bool) -> dict:
    verdicts = [
        check.Verdict("kernels", True, "shipped weights"),
        check.Verdict("chi2", passed, "hybrid, rule exact: p = 0.4"),
        check.Verdict("speed", True, "1.10×"),
    ]
    return {
        "schema": check.CHECK_SCHEMA, "quick": True, "rule": "exact", "machine": check.machine(),
        "verdicts": [vars(v) for v in verdicts], "passed": passed, "caught_by": [] if passed else ["chi2"],
        "seconds": 1.0,
    }  # fmt: skip


@pytest.mark.parametrize("passed", [True, False])
def test_the_exit_status_and_the_report_follow_the_verdicts(monkeypatch, tmp_path, capsys, passed):
    monkeypatch.setattr(check, "run_check", lambda *args, **kwargs: _report(passed))
    monkeypatch.setattr(check, "last_report_path", lambda: tmp_path / "check.json")
    assert check.main(["--quick", "--out", str(tmp_path / "out.json")]) == (0 if passed else 1)
    said = capsys.readouterr().out
    assert ("every check passed" in said) == passed and ("caught by chi2" in said) == (not passed)
    assert "  chi2        " + ("pass" if passed else "FAIL") in said and "  speed       info" in said
    assert json.loads((tmp_path / "out.json").read_text()) == check.last_report() == _report(passed)


def test_the_machine_is_named_with_the_flags_its_kernels_care_about():
    m = check.machine()
    assert m["cpu"] and m["cores"] >= 1 and m["torch"] and set(m["cpu_flags"]) <= set(check.CPU_FLAGS)


@pytest.mark.slow
def test_a_wrong_rule_fails_the_chi_square_and_is_named(offline_target):
    """resample_from_p resamples from p instead of the residual: the check's chi-square must catch it on
    the offline pair as it loads (the exact rule's side: tests/test_offline_exactness.py)."""
    # Half the check's samples keep the test short; the wrong rule is still caught far below the level.
    plan = check.Plan(0, 0, ("hybrid",), ("resample_from_p",), check.CHI2_SAMPLES // 2, 0, 0)
    traces: list = []
    (verdict,) = check.chi2_verdicts(offline_target, plan, traces, log=lambda _: None)
    assert not verdict.passed and verdict.detail["p_value"] < verdict.detail["level"] / 10, verdict
    assert "resample_from_p" in verdict.said and len(traces) == 1
    assert check.invariants_verdict(traces).passed  # a wrong rule's trace still keeps every invariant
