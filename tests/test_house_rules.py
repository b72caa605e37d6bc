"""House rules of docs/design.md that keep the code readable, checked on the source: Algorithm 1's
module stays in short functions, a page function stays thin (its logic lives in the library), and
a prompt is wrapped in the chat template in one place only (specviz/decoding/prompting.py).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick

ROOT = Path(__file__).resolve().parents[1]
DECODER_FUNCTION_MAX = 40  # lines, decorators and docstring included
FUNCTION_MAX = 60  # any function outside the tests: a page's, the library's, a script's
PAGE_MODULE_MAX = 200  # lines of one page file: more is a page doing the library's work


def long_functions(paths: list[Path], limit: int) -> list[str]:
    """'file:line name (n lines)' for every function or method longer than `limit` lines."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = node.end_lineno - first + 1
                if lines > limit:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_of_the_decoder_is_over_40_lines():
    assert long_functions([ROOT / "specviz" / "decoding" / "decoder.py"], DECODER_FUNCTION_MAX) == []


def test_no_function_outside_the_tests_is_over_60_lines():
    sources = [
        ROOT / "app.py",
        *(p for folder in ("specviz", "specviz_app", "scripts") for p in (ROOT / folder).rglob("*.py")),
    ]
    assert len(sources) > 60, "the sources were not found"
    assert long_functions(sorted(sources), FUNCTION_MAX) == []


def test_no_page_module_is_over_200_lines():
    pages = sorted((ROOT / "specviz_app" / "app_pages").glob("*.py"))
    assert pages, "no pages found"
    lengths = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in pages}
    long_pages = [f"{name} ({n} lines)" for name, n in lengths.items() if n > PAGE_MODULE_MAX]
    assert long_pages == []


def test_the_rule_finds_a_long_function(tmp_path, monkeypatch):
    long_one = tmp_path / "x.py"
    body = "".join(f"    a{i} = {i}\n" for i in range(39))  # with its decorator and def: 41 lines
    long_one.write_text(f"def short():\n    pass\n\n\n@decorated\ndef long():\n{body}", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert long_functions([long_one], DECODER_FUNCTION_MAX) == ["x.py:6 long (41 lines)"]


# The one other caller of apply_chat_template: it reads the template's user-turn prefix so the target
# can write prompts of its own (Magpie); it wraps no prompt.
CHAT_TEMPLATE_HOMES = ["specviz/decoding/prompting.py", "specviz/training/self_prompts.py"]


def chat_template_callers(folders: list[str]) -> list[str]:
    """Files under `folders` that call `.apply_chat_template(...)`."""
    found = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    if node.func.attr == "apply_chat_template":
                        found.add(path.relative_to(ROOT).as_posix())
    return sorted(found)


def test_prompts_meet_the_chat_template_in_one_place():
    assert chat_template_callers(["specviz", "specviz_app"]) == CHAT_TEMPLATE_HOMES


def test_the_rule_finds_a_second_chat_template(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "prompting.py").write_text("def ids(tok, p):\n    return tok.apply_chat_template(p)\n")
    (tmp_path / "pkg" / "page.py").write_text("ids = tokenizer.apply_chat_template([m], tokenize=True)\n")
    (tmp_path / "pkg" / "other.py").write_text("ids = tokenizer(text)\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert chat_template_callers(["pkg"]) == ["pkg/page.py", "pkg/prompting.py"]
