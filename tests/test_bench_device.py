"""`python -m specviz bench --random-weights` (specviz.labs.bench_device), the device check a GPU
session runs, checked on the CPU with a tiny shape so that it is known to run before a GPU's minutes
are spent on it:

- its SmolLM2-135M shapes are the offline target's (its converted config.json);
- it runs through `bench`, prints the step table with the roofline, the four decodes, the
  prediction at a given τ and the exactness lines, and on the CPU specviz's greedy tokens equal
  transformers' generate() with either cache.
"""

from __future__ import annotations

import json

from specviz.labs import bench
from specviz.labs.bench_device import SHAPES


def test_the_real_shapes_are_the_offline_targets():
    from specviz.engine.models import prepare_offline_target

    config = json.loads((prepare_offline_target() / "config.json").read_text())
    for key, value in SHAPES["smollm2-135m"].items():
        if key == "rope_theta":
            assert config.get("rope_parameters", {}).get("rope_theta", config.get("rope_theta")) == value
        elif key == "rms_norm_eps":
            assert abs(config[key] - value) < 1e-9
        else:
            assert config[key] == value, key


def test_the_device_check_runs_on_the_cpu(capsys):
    argv = ["--random-weights", "--device", "cpu", "--shape", "tiny", "--threads", "1"]
    argv += ["--new-tokens", "8", "--prompts", "2", "--reps", "1", "--rows", "1,3", "--tau", "1.8"]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "random-tiny on " in out and "forward: lean" in out
    for line in ("roofline:", "lean forward", "static step, eager", "transformers eager"):
        assert line in out
    for method in ("specviz target alone", "specviz default", "transformers generate", "transformers static cache"):
        assert method in out
    assert "at τ 1.80" in out
    assert "greedy tokens equal to transformers' generate (dynamic cache): 2 of 2 prompts" in out
    assert "greedy tokens equal to transformers' generate (static cache): 2 of 2 prompts" in out
    assert "lean forward against the eager static step" in out and "same argmax True" in out
