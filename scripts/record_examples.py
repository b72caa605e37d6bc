"""Record the app's shipped recordings with the offline target: the gallery's example traces
(assets/examples/), the lesson's main example and its weak-draft contrast (assets/lesson_*.json)
and the race of drafters (assets/race.json).

Re-run it when the default draft or the trace schema changes:

    PYTHONPATH=. HF_HUB_OFFLINE=1 python scripts/record_examples.py [--threads 1] [--only NAME]

Each example is a speculative trace <name>.json and its target-only baseline <name>.baseline.json
on the same settings. The first example uses the app's default settings, so the app opens on it.

--threads defaults to 1: on a shared CPU, torch's intra-op threads spin against each other and a
multi-token verify pass became ten times slower than on one thread (8 s against 0.7 s), which
would make every example's timeline say the opposite of what a quiet machine shows.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz.config import DecodeOptions  # noqa: E402
from specviz.decoding.decoder import autoregressive_generate, speculative_generate  # noqa: E402
from specviz.engine import models  # noqa: E402
from specviz.shipped import ASSETS  # noqa: E402
from specviz_app.params import DEFAULTS, EXAMPLE_PROMPTS  # noqa: E402

OUT = ASSETS / "examples"

# name, title, note, draft (None: the default draft), prompt, gamma, temperature, seed, max new tokens
EXAMPLES = [
    (
        "01-default",
        "The default settings: copying a line, greedy",
        "The app's starting point. Copying text is easy to predict, so many drafts pass.",
        None,
        DEFAULTS.prompt,
        DEFAULTS.gamma,
        DEFAULTS.temperature,
        DEFAULTS.seed,
        DEFAULTS.max_new,
    ),
    (
        "02-sampled",
        "Sampling at temperature 0.8: a haiku",
        "With sampling, r decides: a draft passes when r < min(1, p/q). Free text is harder to guess.",
        None,
        EXAMPLE_PROMPTS[3],
        4,
        0.8,
        1,
        40,
    ),
    (
        "03-self-draft",
        "The target drafting for itself: everything is accepted",
        "q equals p, so β = 1 at every position and each iteration ends with a bonus token. No speedup: "
        "the draft costs as much as the target.",
        "self",
        EXAMPLE_PROMPTS[1],
        4,
        0.7,
        0,
        32,
    ),
    (
        "04-ngram-gamma6",
        "n-gram draft, γ = 6: copying a list",
        "Prompt lookup proposes what followed the last matching n-gram. Long guesses pay off on repetitive text.",
        "ngram",
        EXAMPLE_PROMPTS[2],
        6,
        0.0,
        0,
        48,
    ),
]


# The lesson: a free-text prompt none of the drafts was trained on, sampled, so that the iteration it
# teaches shows the algorithm's random choices: a draft accepted against a drawn r with p/q below 1,
# a rejection with r >= p/q, a residual spread over several tokens, and both routes to the output
# (specviz.teaching.charts.lesson.sampled_lessons; greedy decoding showed none of them, issue 35). The main
# example drafts as Algorithm 1 states it (config.PAPER_DRAFT: one chain of gamma drafts, no tree, no
# early stop), the contrast with the distilled 3-layer draft on the same prompt and settings.
# Temperature 0.7 came from a search over 0.6-1.0: there nearly every seed shows all of it. The seed
# is chosen when recording (representative_seed): a typical run of the head being shipped, not its
# luckiest, whatever head that is.
LESSON_PROMPT = "Explain why the sky is blue to a curious child."
LESSON_SETTINGS = {"gamma": 3, "temperature": 0.7, "max_new_tokens": 48}
LESSON_SEEDS = range(10)  # the seeds the main example's seed is chosen from
CONTRAST_GAMMA = 6  # a weak draft asked for many guesses: most are wasted, each one costs a draft step
RACE_PROMPT = "Write a short story about a fox who wants to fly."


def untaught(spec) -> list[str]:
    """What the lesson says that the iteration it would show of `spec` does not show (none: it teaches)."""
    from specviz.teaching.charts import lesson as lesson_charts

    index = lesson_charts.pick_iterations(spec.iterations)["resample"]
    shown = lesson_charts.sampled_lessons(spec.iterations[index]) if index is not None else {}
    taught = ("accepted_by_r", "rejected_by_r", "legible", "residual", "both_routes")
    return [name for name in taught if not shown.get(name)]


def check_teaches(spec) -> None:
    """Stop before writing a main example whose chosen iteration does not show what the lesson says."""
    if missing := untaught(spec):
        raise SystemExit(f"The lesson example shows no {', '.join(missing)}: choose another seed or temperature.")


def representative_seed(target, draft) -> int:
    """The main example's seed: of LESSON_SEEDS, those whose run shows everything the lesson teaches,
    the one with the median tokens per iteration (the lower middle of an even count). A typical run:
    the lesson's race then shows what this head usually does on this prompt, not its best."""
    runs = []
    for seed in LESSON_SEEDS:
        spec = speculative_generate(LESSON_PROMPT, target=target, draft=draft,
                                    options=DecodeOptions(**LESSON_SETTINGS, seed=seed))  # fmt: skip
        tau = spec.summary["new_tokens"] / spec.summary["iterations"]
        teaches = not untaught(spec)
        print(f"  seed {seed}: {tau:.2f} tokens per iteration{'' if teaches else ', does not teach'}")
        if teaches:
            runs.append((tau, seed))
    if not runs:
        raise SystemExit("No seed's run shows everything the lesson teaches: choose another temperature.")
    tau, seed = sorted(runs)[(len(runs) - 1) // 2]
    print(f"  the median of {len(runs)}: seed {seed}, {tau:.2f} tokens per iteration")
    return seed


def decode_and_time(prompt, target, draft, options, check=None):
    """A recording's run and its baseline, after a warm-up (so its timings hold no one-off start-up
    costs), with their timed pairs; check(spec) may refuse the run before it is timed."""
    speculative_generate(prompt, target=target, draft=draft, options=replace(options, max_new_tokens=4))
    spec = speculative_generate(prompt, target=target, draft=draft, options=options)
    if check is not None:
        check(spec)
    base = autoregressive_generate(prompt, target=target, options=options)
    again_spec = partial(speculative_generate, prompt, target=target, draft=draft, options=options)
    time_pairs(spec, base, again_spec, partial(autoregressive_generate, prompt, target=target, options=options))
    return spec, base


def record_lesson(target) -> None:
    from specviz.config import PAPER_DRAFT
    from specviz.teaching.lesson import CONTRAST_TRACE, MAIN_TRACE, race_numbers

    seed = representative_seed(target, PAPER_DRAFT)
    for path, draft, gamma in ((MAIN_TRACE, PAPER_DRAFT, 3), (CONTRAST_TRACE, models.TRAINED_DRAFT, CONTRAST_GAMMA)):
        options = DecodeOptions(**{**LESSON_SETTINGS, "gamma": gamma, "seed": seed})
        check = check_teaches if path == MAIN_TRACE else None
        spec, base = decode_and_time(LESSON_PROMPT, target, draft, options, check)
        spec.extra["recorded_with"] = f"{spec.config['device']}, {torch_threads()} torch thread(s)"
        race = race_numbers(spec, base)
        print(f"{path.name}: draft {spec.config['draft']}, {race['speedup']:.2f}x on {race['tokens']} tokens")
        if path == MAIN_TRACE and race["speedup"] < 1:  # the lesson's first race must show the idea paying
            raise SystemExit(
                f"The lesson's main example ran {race['speedup']:.2f}x its target alone: nothing written. Record "
                "it on a quiet machine, or choose another temperature (LESSON_SETTINGS)."
            )
        path.write_text(spec.to_json(indent=None), encoding="utf-8")
        path.with_name(path.stem + ".baseline.json").write_text(base.to_json(indent=None), encoding="utf-8")


def record_race(target) -> None:
    import json

    from specviz.labs.race import run_race

    result = run_race(RACE_PROMPT, target=target, gamma=DEFAULTS.gamma, temperature=0.0, max_new_tokens=48)
    (ASSETS / "race.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for r in result["rows"]:
        print(f"race {r['draft']}: {r['speedup']:.2f}x, {r['tokens_per_iteration']:.2f} tokens per iteration")


def time_pairs(spec, base, run_speculative, run_target_alone) -> None:
    """The recording and its baseline are the first timed pair; time the rest the app would
    (specviz.traces.speedup), so a shipped example shows its speedup with its spread like a fresh run."""
    from specviz.traces import speedup

    timing = speedup.start_timing(spec, base)
    while len(timing["pairs"]) < timing["wanted"]:
        timing["pairs"].append(speedup.time_pair(run_speculative, run_target_alone, len(timing["pairs"]), traced=True))
    print(f"  speedup {speedup.speedup_spread(spec, base).text()}")


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="record only this: an example's name, 'lesson' or 'race'")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    OUT.mkdir(parents=True, exist_ok=True)
    target = models.load_model(models.OFFLINE_TARGET)
    if args.only in (None, "lesson"):
        record_lesson(target)
    if args.only in (None, "race"):
        record_race(target)
    for name, title, note, draft, prompt, gamma, temperature, seed, max_new in EXAMPLES:
        if args.only and name != args.only:
            continue
        options = DecodeOptions(gamma=gamma, temperature=temperature, seed=seed, max_new_tokens=max_new)
        spec, base = decode_and_time(prompt, target, draft, options)
        s = spec.summary
        spec.extra["example"] = {
            "title": title,
            "note": f"{note} Acceptance {s['acceptance_rate']:.0%}, α {s['alpha']:.2f}, "
            f"{s['mean_accepted_length']:.2f} tokens per iteration, draft {spec.config['draft']}.",
            "recorded_with": f"{spec.config['device']}, {torch_threads()} torch thread(s)",
        }
        (OUT / f"{name}.json").write_text(spec.to_json(indent=None), encoding="utf-8")
        (OUT / f"{name}.baseline.json").write_text(base.to_json(indent=None), encoding="utf-8")
        print(f"{name}: {s['new_tokens']} tokens, acceptance {s['acceptance_rate']:.2f}, alpha {s['alpha']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
