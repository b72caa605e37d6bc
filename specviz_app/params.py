"""Run settings of the app and their URL form: defaults, limits, parsing and validation.

Pure Python (no streamlit): every value read from a URL is checked here. A value out of range is
clamped with a message; a value that is not a number, or an unknown model pair, is refused with
a message and the default is kept. Nothing raises.

The messages are the catalogue's section "params" (specviz.teaching.catalogue) in the language asked
for: from_query's is the link's own ?lang= unless one is given. A model name's problem is the
library's own sentence (models.name_problem, English), framed in that language.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from specviz.config import (
    ALGORITHMS,
    DEFAULT_ALGORITHM,
    DEFAULT_GAMMA,
    DEFAULT_WEIGHTS,
    DRAFTERS,
    GAMMA_MAX,
    GAMMA_MIN,
    PAPER_DRAFT,
    WEIGHT_FORMATS,
    DecodeOptions,
    drafter_kind,
    slug,
)
from specviz.engine import models
from specviz.teaching import catalogue

# Limits of the widgets. Tighter than specviz.config where a CPU demo needs it (max new tokens,
# temperature); the library still validates everything again.
TEMPERATURE_RANGE = (0.0, 2.0)
TOP_K_RANGE = (0, 1000)
TOP_P_RANGE = (0.05, 1.0)
# The widgets' "off": keep every token. The library's off is None (Settings.filters turns one into the other).
TOP_K_OFF, TOP_P_OFF = 0, 1.0
MAX_NEW_RANGE = (1, 256)
SEED_RANGE = (0, 2**31 - 1)
PROMPT_MAX_CHARS = 2000
DTYPE_CHOICES = ("float32", "bfloat16")  # the app's precisions (float32: greedy output identical to the target alone)
# The target's weights (specviz.engine.models.WEIGHT_FORMATS): the GGUF's blocks as shipped, or expanded to float32.
WEIGHTS_CHOICES = WEIGHT_FORMATS

EXAMPLE_PROMPTS = (
    "Repeat this text exactly: To be, or not to be, that is the question.",
    "List three fruits.",
    "Copy this list exactly: apple, banana, cherry, apple, banana, cherry.",
    "Write a haiku about the sea.",
    "Explain in one sentence why the sky is blue.",
)


@dataclass(frozen=True)
class Pair:
    key: str  # the URL form
    label: str
    target: str | None
    draft: str | None  # None: the default draft of the offline pair
    online: bool = False


def pairs() -> dict[str, Pair]:
    """The model pairs offered in the sidebar, by URL key. Reads models.DEFAULT_DRAFT at call time."""
    default = models.DEFAULT_DRAFT
    out = [Pair("offline", f"135M + {catalogue.drafter_words(default)[0]} (default)", models.OFFLINE_TARGET, None)]
    for kind in DRAFTERS.values():  # every registered kind the pair picker offers, but the default's own
        if kind.offered and kind.name != default:
            label = f"135M + {catalogue.drafter_words(kind.name)[0]}"
            out.append(Pair(f"offline-{kind.key}", label, models.OFFLINE_TARGET, kind.name))
    for label, (target, draft) in models.HUB_PAIRS.items():
        out.append(Pair(slug(label), f"Online: {label}", target, draft, online=True))
    out.append(Pair("custom", "Custom pair (type model names)", None, None))
    return {p.key: p for p in out}


def paper_applies(target: str | None, draft: str | None) -> bool:
    """Whether the "paper" preset changes this pair: the offline target with the hybrid or the draft
    head (the others already draft one chain: a model draft exactly gamma, the n-gram up to gamma)."""
    kind = drafter_kind(draft or models.DEFAULT_DRAFT)
    return target == models.OFFLINE_TARGET and kind is not None and kind.head and kind.name != PAPER_DRAFT


@dataclass(frozen=True)
class Settings:
    """Everything one run depends on, plus whether to run the baseline beside it."""

    pair: str = "offline"
    target: str = ""  # custom pair only
    draft: str = ""  # custom pair only: a model name, "ngram" or "self"
    gamma: int = DEFAULT_GAMMA
    temperature: float = 0.0
    top_k: int = TOP_K_OFF
    top_p: float = TOP_P_OFF
    max_new: int = 48
    seed: int = 0
    prompt: str = EXAMPLE_PROMPTS[0]
    baseline: bool = True
    dtype: str = "float32"  # the weights' precision (see DTYPE_CHOICES)
    weights: str = DEFAULT_WEIGHTS  # the target's weights: "shipped" (GGUF blocks) or "float32"
    algorithm: str = DEFAULT_ALGORITHM  # the drafting preset (config.ALGORITHMS): "fastest" or "paper"

    def model_names(self) -> tuple[str | None, str | None]:
        """(target, draft) as the library takes them; draft None means the offline default. The
        "paper" preset turns a draft that leaves Algorithm 1 (the head's tree and early stop, the
        hybrid's switching) into the draft head as the paper states it (config.PAPER_DRAFT)."""
        if self.pair == "custom":
            target, draft = self.target.strip() or None, self.draft.strip() or None
        else:
            p = pairs()[self.pair]
            target, draft = p.target, p.draft
        if self.algorithm == "paper" and paper_applies(target, draft):
            draft = PAPER_DRAFT
        return target, draft

    def run_key(self) -> tuple:
        """What a trace depends on: two settings with the same key give the same trace."""
        target, draft = self.model_names()
        if draft is None and (self.pair == "offline" or target == models.OFFLINE_TARGET):
            draft = models.DEFAULT_DRAFT
        return (
            target,
            draft,
            self.gamma,
            float(self.temperature),
            *self.filters().values(),
            self.max_new,
            self.seed,
            self.prompt,
            self.dtype,
            self.weights,
        )

    def filters(self) -> dict[str, int | float | None]:
        """top_k and top_p as the library takes them: None where the widget says off (TOP_K_OFF, TOP_P_OFF)."""
        return {
            "top_k": None if self.top_k == TOP_K_OFF else self.top_k,
            "top_p": None if self.top_p >= TOP_P_OFF else float(self.top_p),
        }

    def decode_options(self) -> DecodeOptions:
        """How the run decodes: γ, the sampling (filters set off as None), the seed and the length."""
        return DecodeOptions(
            gamma=self.gamma, temperature=float(self.temperature), **self.filters(), seed=self.seed,
            max_new_tokens=self.max_new,
        )  # fmt: skip

    def to_query(self) -> dict[str, str]:
        """The URL form. Custom model names only appear for the custom pair."""
        q = {k: str(v) for k, v in asdict(self).items() if k not in ("target", "draft", "baseline")}
        q["baseline"] = "1" if self.baseline else "0"
        if self.pair == "custom":
            q["target"], q["draft"] = self.target, self.draft
        return q


DEFAULTS = Settings()
# The numeric settings: their type and range (a message names each as the catalogue's "name_<field>").
_NUMERIC = {
    "gamma": (int, (GAMMA_MIN, GAMMA_MAX)),
    "temperature": (float, TEMPERATURE_RANGE),
    "top_k": (int, TOP_K_RANGE),
    "top_p": (float, TOP_P_RANGE),
    "max_new": (int, MAX_NEW_RANGE),
    "seed": (int, SEED_RANGE),
}


def _parse_number(raw: str, kind: type, lo: float, hi: float, name: str, w: dict[str, str]) -> tuple[Any, str | None]:
    """Returns (value or None, message or None); `w`: the catalogue's "params" in the language asked for."""
    text, shown = raw.strip(), repr(raw[:40])
    try:
        value = float(text)
    except ValueError:
        return None, w["not_number"].format(name=name, raw=shown)
    if not math.isfinite(value):
        return None, w["not_finite"].format(name=name, raw=shown)
    if kind is int and value != int(value):
        return None, w["not_whole"].format(name=name, raw=shown)
    value = kind(value)
    if not lo <= value <= hi:
        clamped = kind(min(max(value, lo), hi))
        return clamped, w["outside"].format(name=name, value=value, lo=kind(lo), hi=kind(hi), clamped=clamped)
    return value, None


def link_value(params: dict[str, str | list[str]], key: str) -> str | None:
    """The value a link gives `key`: the last one when the link repeats it, None when it has none."""
    v = params.get(key)
    if isinstance(v, list):
        return v[-1] if v else None
    return v


def _custom_names(
    params: dict[str, str | list[str]], values: dict[str, Any], base: Settings, w: dict[str, str]
) -> list[str]:
    """The link's target= and draft= into `values`, each only when it is a model name
    (models.name_problem: a Hugging Face id, an offline name, a draft strategy); the messages about
    those refused or left unused. A link naming models without pair= means the custom pair; with
    another pair they are not used, and the message says so."""
    messages: list[str] = []
    names = {key: v.strip()[:200] for key in ("target", "draft") if (v := link_value(params, key)) and v.strip()}
    for key, name in list(names.items()):
        if problem := models.name_problem(name, key):
            messages.append(w["name_refused"].format(key=key, problem=problem))
            del names[key]
    values.update(names)
    if not names or values.get("pair", base.pair) == "custom":
        return messages
    given = w["and"].join(f"{key}={name}" for key, name in names.items())
    if link_value(params, "pair") is None and "target" in names:
        values["pair"] = "custom"  # the models the link names are the pair it asks for
        return messages
    pair = values.get("pair", base.pair)
    messages.append(w["names_unused"].format(given=given, pair=repr(pair)))
    return messages


# What a link may say for a switch (?presenter=, ?baseline=): any case, spaces around ignored.
SWITCH_ON, SWITCH_OFF = ("1", "yes", "true", "on"), ("0", "no", "false", "off")


def link_switch(raw: str | None, name: str, default: bool, lang: str = "en") -> tuple[bool, str | None]:
    """A link's on/off value -> (on, message in `lang`): 1, yes, true, on mean on and 0, no, false, off
    mean off (any case); anything else keeps `default` and the message says what was not understood."""
    if raw is None:
        return default, None
    word = raw.strip().lower()
    if word in SWITCH_ON or word in SWITCH_OFF:
        return word in SWITCH_ON, None
    w = catalogue.words("params", lang)
    state = w["state_on"] if default else w["state_off"]
    return default, w["switch_not_understood"].format(name=name, raw=raw[:20], state=state)


def from_query(
    params: dict[str, str | list[str]], base: Settings = DEFAULTS, lang: str | None = None
) -> tuple[Settings, list[str]]:
    """URL parameters -> validated Settings and the messages to show about refused or clamped values,
    in `lang` (None: the language the link's ?lang= asks for, English without one)."""
    lang = catalogue.parse_language(params.get("lang"))[0] if lang is None else lang
    w = catalogue.words("params", lang)
    messages: list[str] = []
    values: dict[str, Any] = {}

    def get(key: str) -> str | None:
        return link_value(params, key)

    if (pair := get("pair")) is not None:
        if pair in pairs():
            values["pair"] = pair
        else:
            messages.append(w["bad_pair"].format(pair=repr(pair[:40]), pairs=", ".join(pairs())))
    messages += _custom_names(params, values, base, w)
    for key, (kind, (lo, hi)) in _NUMERIC.items():
        if (raw := get(key)) is not None:
            value, msg = _parse_number(raw, kind, lo, hi, w[f"name_{key}"], w)
            if msg:
                messages.append(msg)
            if value is not None:
                values[key] = value
    if (prompt := get("prompt")) is not None:
        if len(prompt) > PROMPT_MAX_CHARS:
            messages.append(w["prompt_too_long"].format(n=PROMPT_MAX_CHARS))
            prompt = prompt[:PROMPT_MAX_CHARS]
        values["prompt"] = prompt
    if (raw := get("dtype")) is not None:
        if raw in DTYPE_CHOICES:
            values["dtype"] = raw
        else:
            messages.append(w["bad_dtype"].format(raw=repr(raw[:20]), choices=", ".join(DTYPE_CHOICES)))
    if (raw := get("weights")) is not None:
        if raw in WEIGHTS_CHOICES:
            values["weights"] = raw
        else:
            messages.append(w["bad_weights"].format(raw=repr(raw[:20]), choices=", ".join(WEIGHTS_CHOICES)))
    if (raw := get("algorithm")) is not None:
        if raw in ALGORITHMS:
            values["algorithm"] = raw
        else:
            messages.append(w["bad_algorithm"].format(raw=repr(raw[:20]), choices=", ".join(ALGORITHMS)))
    if (raw := get("baseline")) is not None:
        values["baseline"], msg = link_switch(raw, "baseline", base.baseline, lang)
        messages += [msg] if msg else []
    settings = replace(base, **values)
    if settings.pair == "custom" and not settings.target:
        messages.append(w["no_custom_target"])
    return settings, messages


def from_trace_config(
    config: dict[str, Any], prompt: str, baseline: bool, lang: str = "en"
) -> tuple[Settings, list[str]]:
    """The sidebar settings that re-run a trace's config (clamped to the widget ranges); messages in `lang`."""
    target, draft = config.get("target"), config.get("draft")
    algorithm = "paper" if draft == PAPER_DRAFT else DEFAULT_ALGORITHM
    if algorithm == "paper":  # the paper's preset of the default pair
        draft = models.DEFAULT_DRAFT if target == models.OFFLINE_TARGET else draft
    pair, custom_target, custom_draft = "custom", target or "", draft or ""
    for p in pairs().values():
        if p.key == "custom":
            continue
        p_draft = models.DEFAULT_DRAFT if p.draft is None else p.draft
        if target == p.target and draft == p_draft:
            pair, custom_target, custom_draft = p.key, "", ""
            break
    query = {
        "pair": pair,
        "target": custom_target,
        "draft": custom_draft,
        "gamma": str(config.get("gamma") or DEFAULTS.gamma),
        "temperature": str(config.get("temperature", 0.0)),
        "top_k": str(config.get("top_k") or TOP_K_OFF),  # the library's None: the widget's off
        "top_p": str(config.get("top_p") or TOP_P_OFF),
        "max_new": str(config.get("max_new_tokens", DEFAULTS.max_new)),
        "seed": str(config.get("seed", 0)),
        "prompt": prompt or DEFAULTS.prompt,
        "baseline": "1" if baseline else "0",
        "algorithm": algorithm,
    }
    if config.get("dtype") in DTYPE_CHOICES:
        query["dtype"] = config["dtype"]
    if config.get("weights") in WEIGHTS_CHOICES:  # absent from traces made before the setting: the default
        query["weights"] = config["weights"]
    return from_query(query, lang=lang)


def field_names() -> list[str]:
    return [f.name for f in fields(Settings)]
