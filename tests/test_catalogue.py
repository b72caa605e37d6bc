"""The message catalogue (specviz.teaching.catalogue): every key in every language, with the same
format fields, and Chinese texts written in Chinese (issue 48: the whole app in two languages)."""

from __future__ import annotations

import re
import string

import pytest

from specviz.errors import SpecvizError
from specviz.teaching import catalogue

pytestmark = pytest.mark.quick


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("section", catalogue.sections())
def test_every_section_has_every_key_in_both_languages_with_the_same_fields(section):
    en, zh = catalogue.raw(section, "en"), catalogue.raw(section, "zh")
    assert en, f"specviz/assets/words/en/{section}.json is empty"
    assert sorted(set(en) - set(zh)) == [], f"keys of {section} without a Chinese text"
    assert sorted(set(zh) - set(en)) == [], f"Chinese keys of {section} that English does not have"
    differ = [k for k in en if fields(en[k]) != fields(zh[k])]
    assert differ == [], f"{section}: the Chinese text names other fields than the English one"


@pytest.mark.parametrize("section", catalogue.sections())
def test_chinese_texts_are_written_in_chinese(section):
    untranslated = []
    for key, text in catalogue.raw(section, "zh").items():
        plain = re.sub(r"\{[^}]*\}|<[^>]+>|`[^`]*`|\$[^$]*\$", " ", text)  # fields, markup, code, formulas
        latin = [w for w in re.findall(r"[A-Za-z][A-Za-z0-9.\-/]*[A-Za-z0-9]|[A-Za-z]", plain)]
        unknown = [w for w in latin if w.lower().strip(".-/") not in catalogue.LATIN_KEPT and len(w) > 1]
        if unknown and not re.search(r"[\u4e00-\u9fff]", text):
            untranslated.append(f"{key}: {text!r}")
        elif len(unknown) >= 3:  # a sentence left in English inside a Chinese one
            untranslated.append(f"{key}: {unknown}")
    assert untranslated == [], f"{section}: texts not in Chinese:\n" + "\n".join(untranslated)


def test_an_unknown_language_and_a_missing_key_fall_back_to_english():
    assert catalogue.words("charts", "fr") == catalogue.words("charts", "en")
    assert catalogue.language_or_default("fr") == "en" and catalogue.language_or_default("zh") == "zh"
    with pytest.raises(SpecvizError, match="no section"):
        catalogue.words("no-such-page", "zh")
