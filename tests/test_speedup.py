"""specviz.traces.speedup: the speedup as the median of timed pairs with its range, c and v defined once and
read the same through every page's path, and Theory's prediction beside a measurement."""

from __future__ import annotations

import copy
import csv
import io

import pytest
from streamlit.testing.v1 import AppTest

from specviz.config import SPEEDUP_MAX_PAIRS, SPEEDUP_MIN_PAIRS
from specviz.labs import race, sweep, theory
from specviz.shipped import ASSETS
from specviz.traces import speedup
from specviz.traces.trace import Trace

APP = str(ASSETS.parent.parent / "specviz_app" / "app.py")


def run(new_tokens=10, wall_ms=100.0, iterations=5, drafted=10, draft_ms=10.0, verify_ms=80.0) -> dict:
    return dict(
        new_tokens=new_tokens, wall_ms=wall_ms, iterations=iterations, drafted=drafted, draft_ms=draft_ms,
        verify_ms=verify_ms,
    )  # fmt: skip


def pair(spec_wall: float, base_wall: float, **spec) -> dict:
    # The target alone: 10 tokens, 10 one-token steps, 9 ms a step in its passes.
    alone = run(new_tokens=10, wall_ms=base_wall, iterations=10, drafted=0, draft_ms=0.0, verify_ms=90.0)
    return speedup.pair_record(run(wall_ms=spec_wall, **spec), alone, speedup.SPECULATIVE_FIRST, True)


def example(name: str = "01-default") -> tuple[Trace, Trace]:
    folder = ASSETS / "examples"
    return (
        Trace.from_json((folder / f"{name}.json").read_bytes()),
        Trace.from_json((folder / f"{name}.baseline.json").read_bytes()),
    )


def test_the_speedup_is_the_median_pair_with_its_range():
    # Three pairs: the speculative run took 50, 100 and 40 ms where the target alone took 100 ms.
    pairs = [pair(50.0, 100.0), pair(100.0, 100.0), pair(40.0, 100.0)]
    spread = speedup.spread_of_pairs(pairs, wanted=5)
    assert (spread.median, spread.low, spread.high, spread.pairs, spread.wanted) == (2.0, 1.0, 2.5, 3, 5)
    assert not spread.complete
    assert speedup.spread_of_pairs(pairs).text() == "2.00× (1.00–2.50 over 3 pairs)"
    assert speedup.spread_of_pairs([]) is None


def test_a_trace_keeps_its_pairs_and_without_them_is_one_pair():
    trace, base = example()
    trace.extra.pop("timing", None)
    one = speedup.speedup_spread(trace, base)
    assert one.pairs == 1 and one.median == pytest.approx(
        (trace.summary["new_tokens"] / trace.summary["wall_ms"])
        / (base.summary["new_tokens"] / base.summary["wall_ms"])
    )
    trace.extra["timing"] = {"pairs": [pair(50.0, 100.0), pair(25.0, 100.0)], "wanted": 4}
    spread = speedup.speedup_spread(trace, base)
    # Of an even count, the median pair is the slower middle one: a pair really timed (2× and 4×: 2×).
    assert (spread.median, spread.pairs, spread.wanted) == (2.0, 2, 4)
    assert speedup.speedup(trace, base) == 2.0
    assert speedup.speedup_spread(trace, None) is None and speedup.speedup_spread(base, base) is None


def test_pairs_alternate_their_order_and_short_runs_get_more():
    assert [speedup.order_of_pair(i) for i in range(3)] == [
        speedup.SPECULATIVE_FIRST, speedup.TARGET_FIRST, speedup.SPECULATIVE_FIRST,
    ]  # fmt: skip
    assert speedup.pairs_wanted(0.1) == SPEEDUP_MAX_PAIRS
    assert speedup.pairs_wanted(100.0) == SPEEDUP_MIN_PAIRS
    assert SPEEDUP_MIN_PAIRS < speedup.pairs_wanted(2.0) < SPEEDUP_MAX_PAIRS
    assert speedup.pairs_wanted(2.0, timed_seconds=1.0) == SPEEDUP_MIN_PAIRS  # a server that wants the fewest
    assert speedup.pairs_wanted(2.0, timed_seconds=0.0) == 1  # one that wants no timing beyond the run's own
    assert speedup.pairs_wanted(2.0, timed_seconds=14.0) == 7
    calls = []

    def spec():
        calls.append("speculative")
        return Trace("speculative", {}, "", [1], [2], "", "max_new_tokens", [], run(), {})

    def alone():
        calls.append("alone")
        return Trace("autoregressive", {}, "", [1], [2], "", "max_new_tokens", [], run(drafted=0), {})

    first, second = speedup.time_pair(spec, alone, 0, True), speedup.time_pair(spec, alone, 1, True)
    assert calls == ["speculative", "alone", "alone", "speculative"]
    assert first["order"] == speedup.SPECULATIVE_FIRST and second["order"] == speedup.TARGET_FIRST


def test_c_and_v_are_over_the_target_alone_step():
    # Target alone: 90 ms of passes over 10 steps = 9 ms a step. Speculative: 10 ms of drafting over
    # 10 drafted tokens = 1 ms a draft (c = 1/9); 80 ms over 5 passes = 16 ms a pass (v = 16/9).
    costs = speedup.costs_of_pairs([pair(100.0, 100.0)])
    assert costs.step_ms == pytest.approx(9.0)
    assert costs.c == pytest.approx(1 / 9) and costs.v == pytest.approx(16 / 9)
    assert costs.iteration == pytest.approx(20 / 9)  # 100 ms over 5 iterations
    assert costs.alone_token == pytest.approx(10 / 9)  # 100 ms over 10 tokens
    # The median over pairs: a second pair with twice the draft time moves c to the middle.
    costs = speedup.costs_of_pairs([pair(100.0, 100.0), pair(100.0, 100.0, draft_ms=30.0), pair(100.0, 100.0)])
    assert costs.c == pytest.approx(1 / 9)
    assert speedup.costs_of_pairs([pair(100.0, 100.0, drafted=0)]).c is None


def test_one_run_gives_one_c_and_one_v_on_every_page_and_export():
    """Theory, Drafters (a race row), Sweep (a cell) and the exports read the same c and v for one run."""
    trace, base = example()
    costs = speedup.measured_costs(trace, base)
    shown = (f"{costs.c:.3f}", f"{costs.v:.2f}")
    point = theory.measured_point(trace, base)
    row = race.race_row(trace.config["draft"], trace, base)
    cell = sweep._cell(trace.config["gamma"], trace.config["temperature"], trace, base)
    back = Trace.from_json(trace.to_json())  # the JSON the Traces page downloads, read back
    for name, c, v in (
        ("theory", point["c"], point["v"]),
        ("drafters", row["c"], row["verify_cost"]),
        ("sweep", cell["c"], cell["verify_cost"]),
        ("trace export", *(lambda k: (k.c, k.v))(speedup.measured_costs(back, base))),
    ):
        assert (f"{c:.3f}", f"{v:.2f}") == shown, name
    race_csv = next(csv.DictReader(io.StringIO(race.race_to_csv({"config": race_config(trace), "rows": [row]}))))
    assert (f"{float(race_csv['c']):.3f}", f"{float(race_csv['verify_cost']):.2f}") == shown
    result = sweep.SweepResult(config={}, cells=[cell])
    sweep_csv = next(csv.DictReader(io.StringIO(result.to_csv())))
    assert (f"{float(sweep_csv['c']):.3f}", f"{float(sweep_csv['verify_cost']):.2f}") == shown
    # ... and the same speedup: one function computes it everywhere.
    assert row["speedup"] == cell["speedup"] == point["speedup"] == speedup.speedup(trace, base)
    # The Theory page prints them from the same trace (the first visit opens this example).
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("app_pages/theory.py").run()
    caption = next(c.value for c in at.caption if c.value.startswith("Current trace"))
    assert f"c = {shown[0]}" in caption and f"v = {shown[1]}" in caption, caption


def race_config(trace: Trace) -> dict:
    return {"gamma": trace.config["gamma"], "temperature": trace.config["temperature"]}


@pytest.mark.parametrize("name", ["01-default", "02-sampled", "03-self-draft", "04-ngram-gamma6"])
def test_every_example_has_its_prediction_within_range_or_a_named_gap(name):
    trace, base = example(name)
    explained = theory.explain_measurement(theory.measured_point(trace, base))
    assert explained.predicted == pytest.approx(
        theory.walltime_improvement(*(explained_inputs(trace, base)))
    )  # τ / (γc + v) with the run's own α, c and v
    sentence = explained.sentence()
    if explained.within:
        assert "inside the measured range" in sentence
    else:
        assert explained.causes or "timing noise" in sentence
        assert "Where the run parts from the formula" in sentence


def explained_inputs(trace, base):
    point = theory.measured_point(trace, base)
    return point["alpha"], point["gamma"], point["c"], point["v"]


def test_the_rows_account_for_the_whole_gap():
    """measured ≈ tokens per iteration ÷ cost of an iteration × the target alone's cost per token:
    the explanation's rows multiply back to the measured speedup (one pair, so no median between)."""
    trace, base = example()
    trace.extra.pop("timing", None)
    explained = theory.explain_measurement(theory.measured_point(trace, base))
    runs = {what: ran for what, _, ran in explained.rows}
    rebuilt = (
        runs["tokens per iteration"]
        / runs["cost of an iteration in target steps"]
        * runs["the target alone's cost per token in steps"]
    )
    assert rebuilt == pytest.approx(explained.measured, rel=1e-9)


def test_theory_never_says_pays_beside_a_measured_loss():
    """The default example's own α, c and v predict a gain; give it timed pairs that all lost and
    Theory, set to the trace's values, must warn of the loss instead of a green 'pays'."""
    from specviz_app.session import Loaded

    trace, base = example()
    lost = copy.deepcopy(trace)
    spec = trace.summary
    slow = dict(spec, wall_ms=spec["wall_ms"] * 3)  # the speculative run three times slower than it was
    lost.extra["timing"] = {
        "pairs": [speedup.pair_record(slow, base.summary, speedup.order_of_pair(i), True) for i in range(3)],
        "wanted": 3,
    }
    point = theory.measured_point(lost, base)
    assert point["speedup"] < 1 and theory.speedup_possible(point["alpha"], point["c"], point["v"])
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.session_state["loaded"] = Loaded(lost, base, "example: a run that lost", None)
    at.switch_page("app_pages/theory.py").run()
    at.button[[b.label for b in at.button].index("Use the current trace's α, γ, c, v")].click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not [s.value for s in at.success if "gives a speedup" in s.value]
    warning = next(w.value for w in at.warning if "this run measured a loss" in w.value)
    assert f"{point['speedup']:.2f}×" in warning and "over 3 pairs" in warning


class _Timing:
    """Stands in for a run's background.TimingPairs: the page only asks whether pairs still come."""

    def __init__(self) -> None:
        self.more = True

    def running(self) -> bool:
        return self.more

    def stop(self) -> None:
        self.more = False

    def join(self, timeout=None) -> None:
        pass


def batched_run(most_sessions: int = 3) -> tuple[Trace, Trace]:
    """The default example as the app's Run makes it now: decoded batched with other sessions',
    its own pair (streamed, batched) the first of three wanted; the batched pair reads 9×."""
    trace, base = example()
    for run_ in (trace, base):
        run_.config["batched"] = True
        run_.extra["batch"] = {"most_sessions": most_sessions}
    fast = dict(trace.summary, wall_ms=base.summary["wall_ms"] * trace.summary["new_tokens"] / 9 / 10)
    fast_base = dict(base.summary, new_tokens=10)
    first = speedup.pair_record(fast, fast_base, speedup.SPECULATIVE_FIRST, True, streamed=True, batched=True)
    trace.extra["timing"] = {"pairs": [first], "wanted": 3}
    return trace, base


def test_a_batched_run_shows_no_speedup_until_solo_pairs_then_only_theirs():
    """The page never shows the batched run's own timing: "n/a" with the library's words and the
    pairs still to come, the words that say it was batched, then the solo pairs' median as they come
    in (a batched pair takes no place among the three wanted)."""
    from specviz.teaching.charts.headline import batch_words
    from specviz_app import keys
    from specviz_app.session import Loaded

    trace, base = batched_run()
    assert speedup.pair_speedup(trace.extra["timing"]["pairs"][0]) == pytest.approx(9.0)
    timing = _Timing()
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.session_state[keys.LOADED] = Loaded(trace, base, "run here", None, timing)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    metric = at.metric[0]
    assert (metric.label, metric.value) == ("Speedup", "n/a")
    assert metric.help == speedup.ONLY_BATCHED and metric.proto.delta == "timing alone: 0 of 3 pairs in…"
    captions = [c.value for c in at.caption]
    said = batch_words(trace, base)
    assert said.startswith("Decoded together with 2 other sessions' runs") and "timed alone afterwards" in said
    assert any(said in c for c in captions), captions
    assert any("0 of 3 pairs in" in c and "once the first pair is in" in c for c in captions), captions

    pairs = trace.extra["timing"]["pairs"]
    pairs += [pair(50.0, 100.0), pair(40.0, 100.0)]  # 2.0× and 2.5×, timed alone
    at.run()
    assert at.metric[0].value == "2.00×"  # the solo pairs' median pair (the slower middle one), never the batched 9×
    assert at.metric[0].proto.delta == "2.00–2.50, timing: 2 of 3 pairs in…"
    assert any("2 of 3 pairs in, so far 2.00×" in c.value for c in at.caption)

    pairs.append(pair(100.0, 100.0))
    timing.more = False
    at.run()
    assert at.metric[0].value == "2.00×" and at.metric[0].proto.delta == "1.00–2.50 over 3 pairs"
    assert not any("Timing the speedup again" in c.value for c in at.caption)
    assert any(said in c.value for c in at.caption)  # the run stays marked as batched


def test_batch_words_come_from_the_trace_and_only_when_a_pass_was_shared():
    from specviz.teaching.charts.headline import batch_words

    trace, base = example()
    assert batch_words(trace, base) is None  # decoded alone
    trace, base = batched_run(most_sessions=1)
    assert batch_words(trace, base) is None  # batched, but no other session was decoding
    base.extra["batch"]["most_sessions"] = 2  # the baseline met another session's run
    assert batch_words(trace, base).startswith("Decoded together with another session's run (")
    assert batch_words(*batched_run(most_sessions=8)).startswith("Decoded together with 7 other sessions' runs")


def test_a_stored_batched_run_keeps_its_count_of_solo_pairs(tmp_path):
    """The trace store writes what is in as the run's timing: the solo pairs, the batched one aside."""
    from specviz.traces.trace_store import TraceStore, run_id

    trace, base = batched_run()
    trace.extra["timing"]["pairs"].append(pair(50.0, 100.0))
    store = TraceStore(tmp_path)
    trace_id = run_id(["a batched run"])
    store.put(trace_id, trace, base)
    again, _, _ = store.get(trace_id)
    assert again.extra["timing"]["wanted"] == 1 and len(again.extra["timing"]["pairs"]) == 2
    spread = speedup.speedup_spread(again, base)
    assert spread.complete and spread.median == pytest.approx(2.0)


def test_disturbed_pairs_take_no_place_and_leave_the_figures_while_others_are_in():
    """A pair a page was drawn beside (specviz_app.serving.background marks it disturbed) reads too low or
    too high: it does not count towards the pairs wanted, and the figures leave it out while any
    undisturbed solo pair is in. The run's own streamed first pair counts and is among the figures."""
    trace, base = example()
    streamed = speedup.pair_record(run(wall_ms=100.0), pair(0, 100.0)["target_alone"], "x", True, streamed=True)
    stalled_spec = dict(pair(80.0, 100.0), disturbed=True)  # 1.25×: the page stalled the speculative half
    stalled_base = dict(pair(25.0, 100.0), disturbed=True)  # 4.0×: it stalled the target alone
    quiet = [pair(50.0, 100.0), pair(50.0, 100.0)]  # 2.0× each
    trace.extra["timing"] = {"pairs": [streamed, stalled_spec, *quiet, stalled_base], "wanted": 4}
    assert speedup.timing_progress(trace) == (3, 4)  # the streamed pair and two quiet ones count
    spread = speedup.speedup_spread(trace, base)
    assert (spread.median, spread.pairs, spread.low, spread.high, spread.timed) == (2.0, 3, 1.0, 2.0, 3)
    assert not spread.complete
    trace.extra["timing"]["pairs"].append(pair(40.0, 100.0))  # 2.5×
    spread = speedup.speedup_spread(trace, base)
    assert (spread.median, spread.low, spread.high, spread.pairs, spread.timed) == (2.0, 1.0, 2.5, 4, 4)
    assert spread.complete
    costs = speedup.measured_costs(trace, base)
    assert costs.iteration == pytest.approx(50.0 / 5 / 9.0)  # the counted pairs' median, not a stalled one's
    # Only disturbed solo pairs (every other one batched): the figures fall back on them.
    alone = {"pairs": [dict(p, batched=True) for p in quiet] + [stalled_spec], "wanted": 0}
    trace.extra["timing"] = alone
    assert speedup.speedup_spread(trace, base).median == pytest.approx(1.25)


def spread_of(ratios: list[float]) -> speedup.Spread:
    """The spread of pairs whose target alone took 100 ms for 10 tokens and each speculative run
    was `ratio` times faster."""
    return speedup.spread_of_pairs([pair(100.0 / r, 100.0) for r in ratios])


@pytest.mark.parametrize("ratios", [[0.8, 1.1, 1.3, 1.4], [1.9], [2.0, 1.5], [1.0, 3.0, 1.2, 0.9, 1.1]])
def test_the_speedup_and_both_tok_s_come_from_one_pair(ratios):
    """Issue 35: the headline showed the first pair's tok/s (8.2 and 10.3: 0.80×) beside the other
    pairs' median (1.11×). Now both tok/s are the median pair's, so they divide to the speedup, which
    lies in the range of all the pairs, first included."""
    spread = spread_of(ratios)
    assert spread.speculative_tok_s / spread.target_tok_s == pytest.approx(spread.median)
    assert spread.low == pytest.approx(min(ratios)) and spread.high == pytest.approx(max(ratios))
    assert spread.low <= spread.median <= spread.high and spread.pairs == len(ratios)
    assert spread.median == pytest.approx(sorted(ratios)[(len(ratios) - 1) // 2])  # a real pair's: the lower middle
    assert spread.target_tok_s == pytest.approx(100.0)  # 10 tokens in 100 ms
    assert (spread.target_tokens, spread.target_ms) == (10, 100.0)


def test_the_first_pair_is_among_the_figures_and_the_count_is_the_timing_lines():
    """Issue 35: the first (streamed) pair read 0.80× outside the range '1.09–1.40 over 4 pairs',
    and the timing line counted '1 of 5' while the result said 'over 4'. Every counted pair is in the
    figures now, and the count they show is the one the timing line reaches."""
    trace, base = example()
    first = speedup.pair_record(run(wall_ms=125.0), pair(0, 100.0)["target_alone"], "x", True, streamed=True)
    trace.extra["timing"] = {"pairs": [first], "wanted": 5}
    assert speedup.timing_progress(trace) == (1, 5)
    trace.extra["timing"]["pairs"] += [pair(100.0 / r, 100.0) for r in (1.09, 1.40, 1.2, 1.3)]
    spread = speedup.speedup_spread(trace, base)
    assert spread.low == pytest.approx(0.8)  # the first pair is in the range
    assert speedup.timing_progress(trace) == (5, 5) and (spread.pairs, spread.timed, spread.wanted) == (5, 5, 5)
    assert spread.complete and spread.median == pytest.approx(1.2)


def test_a_speedup_is_sure_when_its_pairs_agree_within_ten_percent():
    assert speedup.SURE_WITHIN == 0.10
    assert spread_of([1.9, 2.0, 2.1]).sure and spread_of([2.0]).sure
    assert not spread_of([0.8, 1.2, 1.3]).sure and not spread_of([1.0, 1.05, 1.2]).sure


def test_the_headline_numbers_divide_to_the_speedup_and_words_use_the_same_figure():
    """The Playground's headline as the charts build it: speedup ≈ speculative tok/s ÷ target tok/s
    as printed (within 3%), a wide range named in words, and the loss sentence never printed under
    a speedup that reads 1.00× or more."""
    from specviz.teaching.charts.headline import headline_metrics, passes_versus_time, sureness

    trace, base = example()
    s = trace.summary
    for ratios in ([0.8, 1.1, 1.3, 1.4], [1.9, 1.96, 2.12], [0.9, 0.97, 0.99], [0.25, 0.3, 0.31], [14.0, 15.0, 16.0]):
        timed = copy.deepcopy(trace)
        # Each pair on a machine k times slower than the first: the ratios stay, the tok/s do not.
        pairs = [pair(100.0 * k / r, 100.0 * k) for k, r in enumerate(ratios, 1)]
        timed.extra["timing"] = {"pairs": pairs, "wanted": 3}
        metrics = {m.label: m for m in headline_metrics(timed, base)[0]}
        shown = float(metrics["Speedup"].value.rstrip("×"))
        spec, alone = float(metrics["Speculative tok/s"].value), float(metrics["Target-only tok/s"].value)
        assert spec / alone == pytest.approx(shown, rel=0.03), (ratios, spec, alone, shown)
        low, high = (float(x) for x in metrics["Speedup"].note.split(" over ")[0].split("–"))
        assert low <= shown <= high and metrics["Speedup"].note.endswith(f"over {len(ratios)} pairs")
        assert (low, high) == (round(min(ratios), 2), round(max(ratios), 2))
        words = sureness(speedup.speedup_spread(timed, base))
        assert (words is None) == speedup.speedup_spread(timed, base).sure
        loss = passes_versus_time(timed, base)
        assert (loss is not None) == (shown < 1 and s["target_calls"] < s["new_tokens"])
        if loss:
            assert f"({metrics['Speedup'].value})" in loss
    wide = copy.deepcopy(trace)
    wide.extra["timing"] = {"pairs": [pair(100.0 / r, 100.0) for r in (0.8, 1.1, 1.3, 1.4)], "wanted": 4}
    assert "from 0.80× to 1.40×" in sureness(speedup.speedup_spread(wide, base))
    # 0.997× prints as 1.00×: no sentence may call that a loss beside it.
    close = copy.deepcopy(trace)
    close.extra["timing"] = {"pairs": [pair(100.0 / 0.997, 100.0)], "wanted": 1}
    assert headline_metrics(close, base)[0][0].value == "1.00×" and passes_versus_time(close, base) is None


def test_the_playground_draws_its_numbers_from_the_pairs_as_they_come():
    """In the app (AppTest): while pairs come in, the headline is redrawn with the timing line from
    the same pairs (the chip's count, the note's count and the tok/s of the median pair); when they
    are all in, the note's count is the chip's last count."""
    from specviz_app import keys
    from specviz_app.session import Loaded

    trace, base = example()
    first = speedup.pair_record(run(wall_ms=125.0), pair(0, 100.0)["target_alone"], "x", True, streamed=True)
    trace.extra["timing"] = {"pairs": [first], "wanted": 3}  # 0.80×: the run itself, streamed
    timing = _Timing()
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.session_state[keys.LOADED] = Loaded(trace, base, "run here", None, timing)
    at.run()
    assert not at.exception, [e.value for e in at.exception]

    def read() -> tuple[dict, list[str]]:
        return {m.label: m for m in at.metric}, [c.value for c in at.caption]

    metrics, captions = read()
    assert metrics["Speedup"].value == "0.80×" and metrics["Speedup"].proto.delta == "timing: 1 of 3 pairs in…"
    assert (metrics["Speculative tok/s"].value, metrics["Target-only tok/s"].value) == ("80.0", "100")
    assert any("1 of 3 pairs in, so far 0.80×" in c for c in captions), captions
    trace.extra["timing"]["pairs"] += [pair(100.0 / 1.4, 100.0), pair(100.0 / 1.2, 100.0)]
    timing.more = False
    at.run()
    metrics, captions = read()
    assert metrics["Speedup"].value == "1.20×" and metrics["Speedup"].proto.delta == "0.80–1.40 over 3 pairs"
    assert (metrics["Speculative tok/s"].value, metrics["Target-only tok/s"].value) == ("120", "100")
    assert any("How sure" in c and "from 0.80× to 1.40×" in c for c in captions), captions
    assert not any("Timing the speedup again" in c for c in captions)
    # The Timeline: the same figure, range and count, and its chart (the run itself) one of those pairs.
    at.switch_page("app_pages/timeline.py").run()
    assert not at.exception, [e.value for e in at.exception]
    metrics, captions = read()
    assert (metrics["Speedup"].value, metrics["Speedup"].proto.delta) == ("1.20×", "0.80–1.40 over 3 pairs")
    assert any("The chart shows the first of the 3 timed pairs" in c for c in captions), captions


def test_spent_retries_keep_the_earliest_disturbed_pairs_so_the_count_is_the_one_promised():
    """Issue 35: a busy server, every further pair met a page, and the timing line's '1 of 3'
    ended as one pair. keep_disturbed counts the earliest disturbed pairs until the run has the
    pairs it wanted; a batched pair is never kept."""
    first = pair(50.0, 100.0)
    stalled = [dict(pair(100.0 / r, 100.0), disturbed=True) for r in (1.5, 3.0, 1.8)]
    batched = dict(pair(10.0, 100.0), disturbed=True, batched=True)
    timing = {"pairs": [first, batched, *stalled], "wanted": 3}
    assert len(speedup.counted_pairs(timing["pairs"])) == 1
    speedup.keep_disturbed(timing)
    assert [bool(p.get("kept")) for p in timing["pairs"]] == [False, False, True, True, False]
    counted = speedup.counted_pairs(timing["pairs"])
    assert len(counted) == 3 and batched not in counted
    spread = speedup.spread_of_pairs(speedup.figure_pairs(timing["pairs"]), timing["wanted"])
    assert spread.complete and (spread.pairs, spread.median) == (3, 2.0) and spread.high == pytest.approx(3.0)


def test_a_speedup_timed_under_load_says_so_on_every_page():
    """A run whose figures had to count pairs timed while pages drew (a busy server) was shown as a clean
    figure, to its viewer and to every later visitor of its shared recording (issue 59)."""
    from specviz.teaching.charts.headline import range_note, sureness

    trace, base = example()
    quiet = [pair(50.0, 100.0), pair(40.0, 100.0), pair(45.0, 100.0)]
    trace.extra["timing"] = {"pairs": quiet, "wanted": 3}
    clean = speedup.speedup_spread(trace, base)
    assert not clean.under_load and "under load" not in range_note(clean)
    busy = [dict(p, disturbed=True) for p in quiet]
    trace.extra["timing"] = {"pairs": busy, "wanted": 3}
    speedup.keep_disturbed(trace.extra["timing"])  # the retries spent: the disturbed pairs are counted
    loaded = speedup.speedup_spread(trace, base)
    assert loaded.under_load and loaded.median == clean.median
    assert range_note(loaded).endswith(", measured under load") and range_note(loaded, "zh").endswith("在负载下测得")
    assert sureness(loaded).startswith("Measured under load") and "在负载下测得" in sureness(loaded, "zh")
    # One undisturbed pair among them: the figures use it alone, and it is clean again.
    unkept = [dict(p, disturbed=True) for p in quiet[:2]]  # disturbed, retries not yet spent: not counted
    trace.extra["timing"] = {"pairs": [*unkept, quiet[2]], "wanted": 1}
    assert not speedup.speedup_spread(trace, base).under_load
