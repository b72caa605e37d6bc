"""Block verification in the decoder (DecodeOptions.rule "block", specviz.decoding.block): its trace
is valid and says what happened, a tampered one is refused, a tree drafter drafts a chain, and at
T = 0 it writes exactly the exact rule's greedy text on the offline target (slow)."""

from __future__ import annotations

import copy

import pytest

from specviz.config import DecodeOptions
from specviz.decoding.decoder import speculative_generate
from specviz.errors import TraceError
from specviz.traces.trace import Trace, correction_status, validate

PROMPT = [3, 1, 4, 1, 5]


def _sampled(tiny_pair, seed: int, rule: str = "block") -> Trace:
    target, draft = tiny_pair
    options = DecodeOptions(gamma=3, temperature=1.0, seed=seed, max_new_tokens=24, rule=rule)
    return speculative_generate(PROMPT, target=target, draft=draft, options=options)


@pytest.mark.quick
def test_a_sampled_block_trace_is_valid_and_records_the_block_numbers(tiny_pair):
    kinds, kept_then_resampled = set(), 0
    for seed in range(6):
        trace = _sampled(tiny_pair, seed)
        validate(trace.to_dict())
        assert trace.config["rule"] == "block"
        for it in trace.iterations:
            for d in it["drafts"]:
                assert 0 <= d["block"]["h"] <= 1 and 0 <= d["block"]["weight"] <= 1
            corr = it["correction"]
            if corr is not None:
                kinds.add(corr["kind"])
                if corr["kind"] == "block_resample":
                    assert correction_status(it) == "resampled"  # the pages colour it as a resample
                    kept_then_resampled += it["accepted_count"] > 0
    assert {"block_resample", "bonus"} <= kinds and "resample" not in kinds
    assert kept_then_resampled > 0  # the block residual after a kept draft, where it is not the token rule's


@pytest.mark.quick
def test_validation_refuses_a_block_trace_whose_draws_disagree_with_its_verdict(tiny_pair):
    data = _sampled(tiny_pair, 0).to_dict()
    it = next(i for i in data["iterations"] if i["correction"]["kind"] == "block_resample" and i["drafts"])
    n = it["accepted_count"]
    bad = copy.deepcopy(data)
    bad_it = bad["iterations"][it["index"]]
    bad_it["drafts"][n]["r"] = 0.0  # its stop test now passes: it should have been kept
    bad_it["drafts"][n]["block"]["h"] = max(bad_it["drafts"][n]["block"]["h"], 0.5)
    with pytest.raises(TraceError, match="should have been kept"):
        validate(bad)
    bad = copy.deepcopy(data)
    bad["iterations"][it["index"]]["correction"]["kind"] = "resample"
    with pytest.raises(TraceError, match="block_resample"):
        validate(bad)
    bad = copy.deepcopy(data)
    bad["config"]["rule"] = "exact"
    with pytest.raises(TraceError, match="block"):
        validate(bad)


@pytest.mark.quick
def test_greedy_block_equals_greedy_exact_on_tiny_models(tiny_pair):
    target, draft = tiny_pair
    outputs = {}
    for rule in ("exact", "block"):
        options = DecodeOptions(gamma=4, temperature=0, max_new_tokens=32, rule=rule)
        trace = speculative_generate(PROMPT, target=target, draft=draft, options=options)
        validate(trace.to_dict())
        outputs[rule] = trace.output_token_ids
    assert outputs["block"] == outputs["exact"]


@pytest.mark.slow
def test_greedy_block_equals_the_exact_rule_on_the_offline_target(offline_target, random_draft_for_offline):
    """The random tiny draft disagrees often (every stop point runs); the default draft, a tree
    drafter, drafts a chain under rule "block" (config.tree_mode "off")."""
    for draft in (random_draft_for_offline, None):
        outputs = {}
        for rule in ("exact", "block"):
            options = DecodeOptions(gamma=3, temperature=0, max_new_tokens=24, rule=rule)
            trace = speculative_generate(
                "Once upon a time, a robot", target=offline_target, draft=draft, options=options
            )
            validate(trace.to_dict())
            outputs[rule] = trace.output_token_ids
            if rule == "block":
                assert trace.config["tree_mode"] == "off"
                assert not any("tree" in it for it in trace.iterations)
        assert outputs["block"] == outputs["exact"]


@pytest.mark.quick
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_inspector_and_hover_cards_say_block_verification(tiny_pair, lang):
    from specviz.teaching.charts.step import step_view
    from specviz.teaching.charts.tokens import hover_card, token_rows
    from specviz.teaching.charts.words import words

    w = words(lang)
    trace = _sampled(tiny_pair, 0)
    i = next(it["index"] for it in trace.iterations if it["correction"]["kind"] == "block_resample")
    view = step_view(trace, i + 1, lang)
    assert view.correction.kind == "resampled"
    assert view.correction.title == w["step_block_resample_title"]
    assert "w = " in view.correction.text
    assert "w = " in view.correction.figure.layout.title.text
    assert w["residual_block_raw"] in {bar.name for bar in view.correction.figure.data}
    cards = [hover_card(row, trace.extra, lang=lang) for row in token_rows(trace) if row["is_draft"]]
    head = w["stream_block"].split(":")[0].split("：")[0]
    assert cards and all(head in card for card in cards)
    # The drafts after the last stop test that passed each had a test of their own, which failed: the
    # page says so, never the token rule's "discarded unchecked".
    later = [it for it in trace.iterations if it["accepted_count"] + 1 < len(it["drafts"])]
    assert later, "no iteration left drafts after the one its block ended at"
    for it in later:
        note = step_view(trace, it["index"] + 1, lang).discarded_note
        n = len(it["drafts"]) - it["accepted_count"] - 1
        key = "step_block_discarded_one" if n == 1 else "step_block_discarded"
        assert note == w[key].format(n=n, tokens=note[note.index("“") : note.rindex("”") + 1]), note


@pytest.mark.quick
def test_the_csv_keeps_every_block_draw(tiny_pair):
    """Under block verification a draft after the stop met its stop test too: its r is kept."""
    import csv
    import io

    trace = _sampled(tiny_pair, 1)
    rows = [r for r in csv.DictReader(io.StringIO(trace.to_csv())) if r["status"] == "discarded"]
    assert rows and all(r["r"] != "" for r in rows)
