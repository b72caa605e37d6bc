"""The command line: generate writes a valid trace; validate accepts it and refuses bad files."""

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


@pytest.mark.slow
def test_generate_then_validate(tmp_path):
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
    checked = run_cli("validate", str(out))
    assert checked.returncode == 0 and "valid specviz.trace/1" in checked.stdout


def test_validate_refuses_a_truncated_file_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "specviz.trace/1", "iterations": [')
    done = run_cli("validate", str(bad))
    assert done.returncode == 2
    assert "not valid JSON" in done.stderr and "Traceback" not in done.stderr


def test_generate_refuses_bad_settings_without_a_traceback():
    done = run_cli("generate", "--prompt", "hi", "--gamma", "0")
    assert done.returncode == 2
    assert "gamma must be a whole number from 1 to 16" in done.stderr and "Traceback" not in done.stderr
    done = run_cli("generate", "--prompt", "", "--gamma", "2")
    assert done.returncode == 2 and "prompt is empty" in done.stderr


def test_unknown_offline_model_from_the_cli():
    done = run_cli("generate", "--prompt", "hi", "--target", "nobody/nothing-here")
    assert done.returncode == 2
    assert "not available offline" in done.stderr and "Traceback" not in done.stderr


def test_train_head_refuses_bad_feature_layers_without_a_traceback():
    done = run_cli("train-head", "--feature-layers", "1,mid", "--steps", "0")
    assert done.returncode == 2
    assert "--feature-layers" in done.stderr and "comma-separated list of integers, like 1,14" in done.stderr
    assert "Traceback" not in done.stderr


def test_train_head_refuses_a_missing_layer_before_writing_text(tmp_path):
    done = run_cli("train-head", "--feature-layers", "1,29", "--data", str(tmp_path / "data"))
    assert done.returncode == 2
    assert "error: --feature-layers: [29] are not decoder layers" in done.stderr and "0 to 28" in done.stderr
    assert not (tmp_path / "data").exists()  # refused before any text was written
    assert "Traceback" not in done.stderr
