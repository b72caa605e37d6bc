"""The command line: generate writes a valid trace; validate accepts it and refuses bad files.

The first test runs the real command, `python -m specviz`, in a process of its own; the refusals
call the same `specviz.cli.main` in this process (a new interpreter costs seconds of imports and
a model load each), where an uncaught exception fails the test as a traceback would show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "specviz", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )


def cli(capsys, *args: str) -> tuple[int, str]:
    """`python -m specviz args` in this process: (exit code, what it wrote to stderr)."""
    from specviz.cli import main

    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse refuses bad arguments by exiting, as the command does
        code = exc.code
    return code, capsys.readouterr().err


@pytest.mark.slow
def test_generate_then_validate(tmp_path, capsys):
    out, csv = tmp_path / "trace.json", tmp_path / "trace.csv"
    done = run_cli(
        "generate",
        "--prompt",
        "Name a colour.",
        "--temperature",
        "0",
        "--gamma",
        "3",
        "--max-new-tokens",
        "12",
        "--out",
        str(out),
        "--csv",
        str(csv),
    )
    assert done.returncode == 0, done.stderr
    assert "acceptance rate" in done.stdout and "tokens/s" in done.stdout
    assert "legend:" in done.stdout
    data = json.loads(out.read_text())
    assert data["schema"] == "specviz.trace/1" and data["config"]["gamma"] == 3
    assert csv.read_text().startswith("iteration,position")
    from specviz.cli import main

    capsys.readouterr()
    assert main(["validate", str(out)]) == 0  # in this process: a second interpreter costs its imports again
    assert "valid specviz.trace/1" in capsys.readouterr().out


def test_validate_refuses_a_truncated_file_without_a_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "specviz.trace/1", "iterations": [')
    code, err = cli(capsys, "validate", str(bad))
    assert code == 2
    assert "not valid JSON" in err and "Traceback" not in err


def test_generate_refuses_bad_settings_without_a_traceback(capsys):
    code, err = cli(capsys, "generate", "--prompt", "hi", "--gamma", "0")
    assert code == 2
    assert "gamma must be a whole number from 1 to 16" in err and "Traceback" not in err
    code, err = cli(capsys, "generate", "--prompt", "", "--gamma", "2")
    assert code == 2 and "prompt is empty" in err


def test_generate_offers_the_exact_rules_only(capsys):
    from specviz.cli import CLI_RULES
    from specviz.decoding.verify import RULES, WRONG_RULES

    assert set(CLI_RULES) <= set(RULES) and not set(CLI_RULES) & set(WRONG_RULES) and "block" in CLI_RULES
    code, err = cli(capsys, "generate", "--prompt", "hi", "--rule", "resample_from_p")
    assert code == 2 and "invalid choice" in err


@pytest.mark.slow
def test_generate_with_block_verification_writes_a_valid_trace(tmp_path, capsys):
    """In this process (the command's own process is run by the tests above): the models it loads are
    this worker's, loaded once."""
    out = tmp_path / "trace.json"
    code, err = cli(
        capsys, "generate", "--prompt", "Name a colour.", "--rule", "block", "--max-new-tokens", "16", "--out", str(out)
    )
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["config"]["rule"] == "block" and data["config"]["tree_mode"] == "off"
    assert all("block" in d for it in data["iterations"] for d in it["drafts"])
    assert cli(capsys, "validate", str(out))[0] == 0


def test_unknown_offline_model_from_the_cli(capsys):
    code, err = cli(capsys, "generate", "--prompt", "hi", "--target", "nobody/nothing-here")
    assert code == 2
    assert "not available offline" in err and "Traceback" not in err


def test_train_head_refuses_bad_feature_layers_without_a_traceback(capsys):
    code, err = cli(capsys, "train-head", "--feature-layers", "1,mid", "--steps", "0")
    assert code == 2
    assert "--feature-layers" in err and "comma-separated list of integers, like 1,14" in err
    assert "Traceback" not in err


def test_train_head_refuses_a_missing_layer_before_writing_text(tmp_path, capsys):
    code, err = cli(capsys, "train-head", "--feature-layers", "1,29", "--data", str(tmp_path / "data"))
    assert code == 2
    assert "error: --feature-layers: [29] are not decoder layers" in err and "0 to 28" in err
    assert not (tmp_path / "data").exists()  # refused before any text was written
    assert "Traceback" not in err


def _parsers():
    """Every command's parser, as `python -m specviz ... --help` shows it."""
    import argparse

    from specviz.cli import build_parser
    from specviz.labs import bench, draft_report
    from specviz.training import recipe, train_draft, train_head

    top = build_parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices
    found = {"specviz": top, **{f"specviz {name}": p for name, p in commands.items() if p.add_help}}
    found["specviz bench"] = bench._parser()

    def captured(main, name):  # the recipes build their parser inside main: take it as --help parses
        real = argparse.ArgumentParser.parse_args

        def keep(self, args=None, namespace=None):
            found[name] = self
            raise SystemExit(0)

        argparse.ArgumentParser.parse_args = keep
        try:
            main(["--help"])
        except SystemExit:
            pass
        finally:
            argparse.ArgumentParser.parse_args = real

    captured(draft_report.main, "specviz draft-report")
    captured(train_draft.main, "specviz train-draft")
    captured(train_head.main, "specviz train-head")
    assert recipe.field_notes(train_draft.TrainConfig)["hidden"].startswith("draft width")
    return found


def test_every_command_and_option_says_what_it_does_and_its_default():
    import argparse

    parsers = _parsers()
    assert {"specviz generate", "specviz validate", "specviz bench", "specviz train-head"} <= set(parsers)
    for name, parser in parsers.items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            where = f"{name} {'/'.join(action.option_strings) or action.dest}"
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    assert choice.help and "see python -m" not in choice.help, where
                continue
            assert action.help, f"{where} has no help"
            quiet = action.default is None or action.default is False or not action.option_strings
            assert quiet or "default" in action.help, f"{where} does not say its default"


def test_app_is_a_command_that_starts_the_app(monkeypatch):
    import subprocess
    import sys

    from specviz import cli

    calls = []
    monkeypatch.setattr(subprocess, "call", lambda argv: calls.append(argv) or 0)
    assert cli.main(["app", "--server.port", "8599"]) == 0
    assert calls == [[sys.executable, "-m", "specviz_app", "--server.port", "8599"]]
