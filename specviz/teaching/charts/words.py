"""The words on the charts, per language: the catalogue's section "charts"
(specviz/assets/words/<language>/charts.json, read by specviz.teaching.catalogue). English is every
builder's default; a page passes its language (`zh`).

Templates use str.format fields; a language that lacks a key shows the English one.
"""

from __future__ import annotations

from specviz.teaching import catalogue


def words(lang: str = "en") -> dict[str, str]:
    """The chart words of `lang`, English where it has none (and for an unknown language)."""
    return catalogue.words("charts", lang)
