"""One vocabulary of acceptance: the labels live in specviz.teaching.glossary, and no page, chart or app
module spells an acceptance quantity on its own (where it would drift from the definition)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from specviz.teaching import glossary

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [
    *(ROOT / "specviz_app" / "app_pages").glob("*.py"),
    *(ROOT / "specviz_app").glob("*.py"),
    *(ROOT / "specviz" / "teaching" / "charts").glob("*.py"),
]
# Spellings of the glossary's quantities that pages used to write out themselves.
OWN_SPELLINGS = ("acceptance rate", "α (mean β)", "tokens / iteration", "mean accepted length", "α (expected")


def user_visible_strings(path: Path) -> list[str]:
    """String constants of a module, docstrings excluded (those explain code, not the page)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]


def own_spellings(paths) -> list[str]:
    found = []
    for path in paths:
        for text in user_visible_strings(path):
            found += [f"{path.name}: {text[:60]!r}" for s in OWN_SPELLINGS if s in text.lower()]
    return found


def test_pages_take_acceptance_words_from_the_glossary():
    assert own_spellings(SOURCES) == []


def test_the_check_finds_a_page_that_spells_its_own(tmp_path):
    page = tmp_path / "page.py"
    page.write_text('"""Docstrings may say acceptance rate."""\nst.metric("Acceptance rate", 1)\n')
    assert own_spellings([page]) == ["page.py: 'Acceptance rate'"]


def test_every_term_has_a_label_and_a_one_line_definition():
    terms = [v for v in vars(glossary).values() if isinstance(v, glossary.Term)]
    assert len(terms) >= 6
    for term in terms:
        assert term.label and term.definition and "\n" not in term.definition
    assert len({t.label for t in terms}) == len(terms)
