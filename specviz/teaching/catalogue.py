"""The message catalogue: every word the app and its charts show, one catalogue per language.

Home: `specviz/assets/words/<language>/<section>.json`, one file per section (a page, the sidebar,
the charts, ...), a flat object of message keys to texts. Texts are `str.format` templates
(`"{n} iterations"`); a language's text for a key has the same fields as the English one
(tests/test_catalogue.py checks every key and field in both languages). The model's output and
the user's prompt are never translated; they are data, not words of the app.

    from specviz.teaching.catalogue import words
    w = words("sidebar", lang)        # the section's texts in lang, English where lang has none
    w["run"], w["seed_help"].format(seed=3)

A language that lacks a key falls back to English, so a missing translation shows English rather
than breaking a page; the tests, not the reader, catch it. The Lesson's own text (its steps) lives
in assets/lesson/lesson.<language>.json: it is the lesson's content, not the app's words.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from specviz.errors import SpecvizError
from specviz.shipped import ASSETS

HOME = ASSETS / "words"
DEFAULT = "en"
# Each language by its own name, as the language control shows it.
LANGUAGES = {"en": "English", "zh": "中文 Chinese"}

# Words a Chinese text may keep in Latin letters: names of models, methods, units, formats and the
# symbols of the formulas, as a Chinese textbook on the subject writes them.
LATIN_KEPT = {
    "kv", "gpu", "cpu", "json", "csv", "eagle", "eagle-2", "eagle-3", "n-gram", "ngram", "token", "tokens",
    "top-k", "top-p", "float32", "bfloat16", "bf16", "smollm2", "smollm2-135m-instruct", "qwen2.5", "gpt-2",
    "pythia", "gpt-2 xl", "transformers", "streamlit", "softmax", "argmax", "ms", "tok/s", "flashattention",
    "pagedattention", "hugging", "face", "url", "id", "ids", "lora", "mlp", "p", "q", "r", "k", "v", "c",
    "min", "max", "norm", "log", "exp", "ln", "x", "rms", "vllm", "gpt-fast", "oom", "ram", "cuda", "h200",
    "hf", "pytorch", "torch", "ttft", "jsonl", "prometheus", "leviathan", "et", "al", "xl", "english", "chinese",
    "ai", "ok", "api", "gb", "mb", "kb", "s", "gguf", "q4", "q8", "q4_1", "q8_0", "specviz", "llama.cpp", "llama",
    "cpp", "ggml-org",
}  # fmt: skip


def language_or_default(value: object) -> str:
    """`value` when it is a language of the catalogue, else English."""
    return value if isinstance(value, str) and value in LANGUAGES else DEFAULT


def parse_language(raw) -> tuple[str, str | None]:
    """A link's ?lang= value -> (language, message): any case, spaces around ignored; a language the
    app is not written in shows English, and the message (in both languages, since the reader's is
    unknown) names the ones it is."""
    if raw is None:
        return DEFAULT, None
    if isinstance(raw, list):
        raw = raw[-1] if raw else ""
    code = str(raw).strip().lower()
    if code in LANGUAGES:
        return code, None
    offered = " or ".join(f"{name} ({key})" for key, name in LANGUAGES.items())
    return (
        DEFAULT,
        f"lang={str(raw)[:20]} is not a language of this app: {offered}; showing English. 不支持该语言，显示英文。",
    )


def sections() -> list[str]:
    """The sections of the catalogue: the names of the English files."""
    return sorted(p.stem for p in (HOME / DEFAULT).glob("*.json"))


@cache
def _read(path: Path) -> dict[str, str]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecvizError(f"The catalogue file {path} could not be read ({exc}). Reinstall specviz.") from exc
    if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
        raise SpecvizError(f"The catalogue file {path} is not an object of texts. Reinstall specviz.")
    return loaded


def raw(section: str, lang: str) -> dict[str, str]:
    """Exactly what `lang`'s file of `section` holds (no fallback): for the tests and translators."""
    path = HOME / lang / f"{section}.json"
    return _read(path) if path.is_file() else {}


def words(section: str, lang: str = DEFAULT) -> dict[str, str]:
    """The texts of `section` in `lang`, English for any key `lang` lacks (and for an unknown language)."""
    english = raw(section, DEFAULT)
    if not english:
        raise SpecvizError(f"The catalogue has no section {section!r} (specviz/assets/words/en/{section}.json).")
    lang = language_or_default(lang)
    return english if lang == DEFAULT else {**english, **raw(section, lang)}


def drafter_words(name: object, lang: str = DEFAULT) -> tuple[str, str]:
    """A drafter's label and one-line help in `lang`: the registered kind's (specviz.config.DRAFTERS,
    section "drafters", keyed by its key), else its name as given and no help (a model by name)."""
    from specviz.config import drafter_kind

    kind = drafter_kind(name)
    said = words("drafters", lang)
    if kind is None or kind.key not in said:
        return str(name), ""
    return said[kind.key], said.get(f"{kind.key}_help", "")
