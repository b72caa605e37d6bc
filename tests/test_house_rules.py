"""House rules of docs/design.md that keep the code readable, checked on the source: Algorithm 1's
module stays in short functions, and a page function stays thin (its logic lives in the library).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DECODER_FUNCTION_MAX = 40  # lines, decorators and docstring included
PAGE_FUNCTION_MAX = 60


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
    assert long_functions([ROOT / "specviz" / "decoder.py"], DECODER_FUNCTION_MAX) == []


def test_no_page_function_is_over_60_lines():
    pages = sorted((ROOT / "specviz_app" / "app_pages").glob("*.py"))
    assert pages, "no pages found"
    assert long_functions(pages, PAGE_FUNCTION_MAX) == []


def test_the_rule_finds_a_long_function(tmp_path, monkeypatch):
    long_one = tmp_path / "x.py"
    body = "".join(f"    a{i} = {i}\n" for i in range(39))  # with its decorator and def: 41 lines
    long_one.write_text(f"def short():\n    pass\n\n\n@decorated\ndef long():\n{body}", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert long_functions([long_one], DECODER_FUNCTION_MAX) == ["x.py:6 long (41 lines)"]
