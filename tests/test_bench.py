"""The benchmark command, run tiny on random models (one prompt, one gamma, one repetition),
and its formula against the paper's check values."""

from __future__ import annotations

import json

import pytest

from specviz.config import DRAFTERS
from specviz.labs import roofline
from specviz.labs.bench import expected_tokens, predicted_speedup


def test_formula_matches_the_paper():
    # Leviathan et al. Table 4: alpha = .75, gamma = 7, c = .02 gives about 3.2x expected.
    assert predicted_speedup(0.75, 7, 0.02) == pytest.approx(3.16, abs=0.01)
    assert expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(1.0, 4) == 5.0
    assert expected_tokens(0.5, 1) == pytest.approx(1.5)


def test_bench_tiny(tmp_path):
    from conftest import tiny_target_folder
    from specviz.config import DecodeOptions
    from specviz.engine.models import LoadedModel, load_model
    from specviz.labs.bench import main
    from specviz.training.train_draft import TrainConfig, make_draft

    target_dir = tiny_target_folder(tmp_path / "target")
    target = load_model(str(target_dir))
    draft = make_draft(
        LoadedModel("t", target.model, target.tokenizer, "cpu", "float32"),
        TrainConfig(hidden=32, layers=1, intermediate=64),
    )
    draft.save_pretrained(tmp_path / "draft")
    target.tokenizer.save_pretrained(tmp_path / "draft")

    out = tmp_path / "bench" / "result.json"
    argv = ["--target", str(target_dir), "--drafts", f"{tmp_path / 'draft'},ngram", "--gammas", "2"]
    argv += ["--temperatures", "0,1", "--reps", "1", "--max-new-tokens", "6", "--prompts", "1", "--out", str(out)]
    assert main(argv) == 0

    report = json.loads(out.read_text())
    assert report["schema"] == "specviz.bench/2"
    assert report["hardware"]["cpu"] and report["hardware"]["torch_threads"] >= 1
    assert {"torch", "transformers", "python"} <= set(report["versions"])
    model_run, ngram_run = report["runs"]
    assert [model_run["draft"], ngram_run["draft"]] == [str(tmp_path / "draft"), "ngram"]
    assert set(model_run["baseline"]) == {"0.0", "1.0"} and set(model_run["best"]) == {"0.0", "1.0"}
    # transformers' generate() and its prompt lookup on the same model, side by side in the same run.
    assert report["settings"]["kernels"] == "packed" and set(report["target_alone"]) == {"0.0", "1.0"}
    assert report["settings"]["kernel_choice"]["source"].startswith("forced")
    assert report["settings"]["tree"] == "branches" == DecodeOptions().tree_mode  # the tree it measured
    assert "draft tree: branches" in out.with_suffix(".md").read_text()
    for run in (model_run, ngram_run):
        for t, base in run["baseline"].items():
            assert base["hf_generate_tokens_per_s"] > 0 and base["hf_lookup_tokens_per_s"] > 0
            for row in (r for r in run["results"] if str(r["temperature"]) == t):
                untraced = row["tokens_per_s"]["untraced"]
                fastest = max(base["tokens_per_s"], base["hf_generate_tokens_per_s"])
                assert row["speedup_over_fastest_alone"] == pytest.approx(untraced / fastest)
                assert row["over_hf_generate"] == pytest.approx(untraced / base["hf_generate_tokens_per_s"])
                assert row["over_hf_lookup"] == pytest.approx(untraced / base["hf_lookup_tokens_per_s"])
                assert row["fastest_alone"] == (
                    "transformers generate()" if base["hf_generate_tokens_per_s"] > base["tokens_per_s"] else "specviz"
                )
    first = model_run["baseline"]["0.0"]
    assert report["target_alone"]["0.0"]["specviz_over_hf_generate"] == pytest.approx(
        first["tokens_per_s"] / first["hf_generate_tokens_per_s"]
    )
    for row in ngram_run["results"]:
        assert "hf" not in row["tokens_per_s"] and row["specviz_over_hf"] is None  # no assistant model to compare
    # The roofline: the target's bytes a step are its weights (one copy), the fraction is bytes / step / bandwidth.
    roof = report["roofline"]
    weights = sum(p.numel() * p.element_size() for p in {id(p): p for p in target.model.parameters()}.values())
    embedding = target.model.get_input_embeddings().weight
    tied = target.model.get_output_embeddings().weight is embedding
    expected = weights - (0 if tied else embedding.numel() * embedding.element_size())
    assert roof["bandwidth_gb_s"] > 0 and roof["target"]["bytes_per_step"] == expected
    assert len(roof["bandwidth_samples_gb_s"]) == 2 and roof["bandwidth_gb_s"] == max(roof["bandwidth_samples_gb_s"])
    assert roof["target"]["step_beside_sum"]["pairs"] == roofline.STEP_PAIRS
    for t, share in roof["target"]["by_temperature"].items():
        assert share["step_ms"] == pytest.approx(model_run["baseline"][t]["target_step_ms"], abs=0.01)
        bytes_per_s = expected / (share["step_ms"] / 1e3)
        assert share["fraction"] == pytest.approx(bytes_per_s / (roof["bandwidth_gb_s"] * 1e9), rel=0.02)
    assert list(roof["drafts"]) == [str(tmp_path / "draft")]  # the n-gram reads no weights
    assert "of the roofline" in out.with_suffix(".md").read_text()
    assert len(model_run["results"]) == 2
    for row in model_run["results"]:
        assert len(row["acceptance_by_position"]) == row["gamma"] == len(row["beta_by_position"])
        assert row["verify_over_target_step"] > 0
        # Float32 greedy: every prompt's output is the target's own; sampled runs are other samples.
        assert row["sameness"] == ({"identical": 1} if row["temperature"] == 0 else {"different_samples": 1})
        assert set(row["tokens_per_s"]) == {"traced", "untraced", "hf"}
        assert all(v > 0 for v in row["tokens_per_s"].values())
        for key in ("speedup", "acceptance_rate", "mean_accepted_length", "alpha", "c", "predicted_speedup"):
            assert row[key] is not None, key
        assert row["efficiency"] == pytest.approx(row["speedup"]["untraced"] / row["predicted_speedup"])
        assert 0.0 <= row["alpha"] <= 1.0 and row["c"] > 0
        assert row["specviz_over_hf"] == pytest.approx(row["tokens_per_s"]["untraced"] / row["tokens_per_s"]["hf"])
    table = out.with_suffix(".md").read_text()
    for column in (
        "tokens/s untraced",
        "speedup",
        "acceptance rate",
        "mean accepted length",
        "α",
        "| c |",
        "predicted speedup",
        "efficiency",
        "tracing overhead",
        "specviz / HF",
        "acceptance by position",
        "verify / step",
        "output vs target alone",
        "packed",
        "speedup over the fastest target alone",
        "× HF generate()",
        "× HF prompt lookup",
        "transformers generate()",
        "Hardware",
    ):
        assert column in table
    assert "n/a |" in table and "n/ax" not in table  # the n-gram has no HF figure: "n/a", never "n/ax"


@pytest.mark.parametrize(
    "name", [k.name for k in DRAFTERS.values() if k.model_free]
)  # hybrid-suffix and staged among them
def test_bench_loads_no_model_for_a_named_draft(monkeypatch, name):
    """A draft the decoder builds from its name (specviz.drafters.resolve.needs_no_model) reaches the
    bench as its name: the bench does not try to load it as a model."""
    from types import SimpleNamespace

    from specviz.engine import models
    from specviz.labs import bench

    loaded, given = [], []

    class Stop(Exception):
        pass

    def record_bench(target, draft, *rest, **kw):
        given.append(draft)
        raise Stop  # the draft as the bench would run it is all this test reads

    monkeypatch.setattr(models, "load_model", lambda n, **kw: loaded.append(n))
    monkeypatch.setattr(bench, "Bench", record_bench)
    args = SimpleNamespace(no_hf=False, max_new_tokens=4, seed=0, reps=1, tree="branches")
    target = SimpleNamespace(device="cpu", dtype="float32")
    with pytest.raises(Stop):
        bench._sweep_draft(args, target, name, ["hi"], [0.0], [2], None, lambda m: None, {})
    assert loaded == [] and given == [name]


@pytest.mark.parametrize("tree", ["dynamic", "off"])
def test_bench_decodes_with_the_tree_asked_for_and_records_it(monkeypatch, tmp_path, tree):
    """`bench --tree dynamic` times the dynamic tree: a speculative decode gets that tree, and the flag
    reaches the run (test_bench_tiny checks the report names the default's tree)."""
    from specviz.decoding import decoder
    from specviz.labs import bench

    trees = []

    def fake_generate(ids, target, draft=None, options=None, trace=True):
        trees.append(options.tree)
        raise RuntimeError("stop: the options are all this test reads")

    monkeypatch.setattr(decoder, "speculative_generate", fake_generate)
    fake = bench.Bench.__new__(bench.Bench)
    fake.target, fake.draft, fake.plain, fake.tree = None, "hybrid", None, tree
    fake.prompt_ids, fake.max_new_tokens, fake.seed = [[1, 2]], 4, 0
    with pytest.raises(RuntimeError, match="stop"):
        fake.run("untraced", 1.0, 3)
    assert trees == [tree]
    parser_trees = []
    monkeypatch.setattr(bench, "_main", lambda args: parser_trees.append(args.tree) or 0)
    assert bench.main(["--tree", tree]) == 0 and parser_trees == [tree]
    assert bench.main([]) == 0 and parser_trees[-1] == "branches"  # the default: DecodeOptions' own tree


def test_bench_refuses_bad_prompt_count(capsys):
    from specviz.labs.bench import main

    assert main(["--prompts", "0"]) == 2
    assert "--prompts" in capsys.readouterr().err


def test_speedup_over_the_fastest_target_alone():
    """A speedup over a slower way of running the target alone is no gain: when transformers'
    generate() runs the target alone faster than specviz does, the second speedup is over it."""
    from specviz.labs.bench import _row

    class FakeTrace:
        def __init__(self):
            self.iterations = []
            self.summary = {"iterations": 2, "drafted": 4, "accepted": 2, "new_tokens": 4}
            self.summary.update(draft_ms=4.0, verify_ms=80.0)

    run = {"tokens_per_s": 30.0, "tokens": 4, "traces": [FakeTrace()]}
    runs = {"traced": [run], "untraced": [run]}
    slower_hf = _row(0.0, 2, runs, base_tps=20.0, target_ms=40.0, hf=False, hf_generate_tps=15.0)
    assert slower_hf["speedup"]["untraced"] == pytest.approx(1.5)
    assert slower_hf["speedup_over_fastest_alone"] == pytest.approx(1.5)
    assert slower_hf["over_hf_generate"] == pytest.approx(2.0)
    assert slower_hf["fastest_alone"] == "specviz"
    faster_hf = _row(0.0, 2, runs, base_tps=20.0, target_ms=40.0, hf=False, hf_generate_tps=25.0)
    assert faster_hf["speedup"]["untraced"] == pytest.approx(1.5)
    assert faster_hf["speedup_over_fastest_alone"] == pytest.approx(1.2)
    assert faster_hf["fastest_alone"] == "transformers generate()"
    no_hf = _row(0.0, 2, runs, base_tps=20.0, target_ms=40.0, hf=False)
    assert no_hf["speedup_over_fastest_alone"] == pytest.approx(1.5) and no_hf["over_hf_generate"] is None


def test_bench_and_held_out_prompts_are_in_no_training_pool():
    """The bench measures on text no recipe trains on, and the held-out set on text no choice was
    made on either (specviz.labs.bench); the two sets do not overlap."""
    from specviz.labs.bench import HELD_OUT_PROMPTS, PROMPTS
    from specviz.training import prompt_pool as pool

    topics, formats = pool.TOPICS + pool.MORE_TOPICS, pool.FORMATS + pool.MORE_FORMATS
    pools = {f.format(t=t) for t in topics for f in formats} | set(pool.STANDALONE + pool.MORE_STANDALONE)
    assert set(pool.head_prompts(100, 0)) <= pools and set(pool.build_prompts(100, 0)) <= pools
    assert not pools & set(PROMPTS) and not pools & set(HELD_OUT_PROMPTS)
    assert not set(PROMPTS) & set(HELD_OUT_PROMPTS) and len(set(HELD_OUT_PROMPTS)) == 8
