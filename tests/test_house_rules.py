"""House rules of docs/design.md that keep the code readable, checked on the source: Algorithm 1's
module stays in short functions, a page function stays thin (its logic lives in the library), and
a prompt is wrapped in the chat template in one place only (specviz/decoding/prompting.py).
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
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
    # Algorithm 1 and its loop (decoder.py), and the draft tree that extends its chain (branches.py)
    decoder = [ROOT / "specviz" / "decoding" / name for name in ("decoder.py", "branches.py")]
    assert long_functions(decoder, DECODER_FUNCTION_MAX) == []


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


# A measured figure: a number with a unit of time, size or throughput, a ratio with a decimal point or
# of ten and more (1.37x, 0.88×, 20x), or a share with a decimal point (1.05%). Not a figure: a round
# multiple (the 1× line of a chart, 4 x hidden), a dimension (49152 x 576, 1280 × 720), a setting's
# round share (cosine decay to 10%), a symbol's value (γ = 3), and text quoted from a page or a message
# ("3rd in line, about 8 s"). A setting written as code (TIMEOUT_S = 30) is code, not a comment.
FIGURE = re.compile(
    r"(?<![\w.])(?:"
    r"\d+(?:[.,]\d+)?\s?(?:ms|µs|s|min|GB/s|MB/s|GB|MB|kB|KB|GiB|MiB|KiB|tok/s|tokens/s)(?![\w/])"
    r"|\d+\.\d+[x×](?!\w)|\d{2,}[x×](?!\w)|\d+\.\d+\s?%"
    r")"
)
QUOTED = re.compile(r'(?<!")"(?!")[^"\n]*"(?!")|`[^`\n]*`|(?<![\w\'])\'(?!\')[^\'\n]*\'(?![\w\'])')
FIGURE_LINES_MAX = 5  # a handful: measured figures belong in docs/benchmarks.md, with the CPU and the date


def comment_and_docstring_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of every comment and every docstring line of a module, by its tokens."""
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline))
    found = []
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.COMMENT:
            found.append((tok.start[0], tok.string))
        elif tok.type == tokenize.STRING and i + 1 < len(tokens) and tokens[i + 1].type == tokenize.NEWLINE:
            before = [t for t in tokens[:i] if t.type not in (tokenize.NL, tokenize.COMMENT)]
            if not before or before[-1].type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
                found += [(tok.start[0] + k, line) for k, line in enumerate(tok.string.splitlines())]
    return found


def figure_lines(folders: list[str]) -> list[str]:
    """'file:line text' for every comment or docstring line that carries a measured figure."""
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for number, text in comment_and_docstring_lines(path):
                if FIGURE.search(QUOTED.sub("", text)):
                    found.append(f"{path.relative_to(ROOT)}:{number} {text.strip()}")
    return found


def test_measured_figures_live_in_the_benchmarks_not_in_comments():
    found = figure_lines(["specviz", "specviz_app"])
    assert len(found) <= FIGURE_LINES_MAX, "move these to docs/benchmarks.md:\n" + "\n".join(found)


def test_the_rule_finds_a_measured_figure_and_leaves_settings_alone(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        '"""A module.\n\nA step took 37.8 ms on a CPU.\n"""\n\n'
        "TIMEOUT_S = 30  # a setting, in code\n"
        "GAMMA = 3  # γ = 3 drafts; decay to 10%; the 1× line; 49152 x 576\n"
        'MESSAGE = "about 8 s"  # says "3rd in line, about 8 s"\n'
        "# the hybrid read 1.37x against 1.29x, 20x faster, 1.05% of the time, near 100 MB\n"
        'def f():\n    \'\'\'Builds in about 15 s.\'\'\'\n\n\ndef g():\n    """Said "1.00×", in 9 s."""\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert [line.split(" ")[0] for line in figure_lines(["pkg"])] == [
        "pkg/m.py:3",
        "pkg/m.py:9",
        "pkg/m.py:11",
        "pkg/m.py:15",
    ]


def kinds_named(path) -> set[str]:
    """The registered drafter kinds (specviz.config.DRAFTERS) a module names as string literals."""
    import ast

    from specviz.config import DRAFTERS

    names = set(DRAFTERS)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names}


def test_the_drafter_kinds_are_listed_in_one_registry():
    """Adding a drafter touches its own module and one line of specviz.config.DRAFTERS: no other module
    under specviz/ or specviz_app/ names three or more of the kinds (issue 49, item 1)."""
    root = Path(__file__).resolve().parent.parent
    listing = {
        str(p.relative_to(root)): sorted(found)
        for folder in ("specviz", "specviz_app")
        for p in (root / folder).rglob("*.py")
        if p.name != "config.py" and len(found := kinds_named(p)) >= 3
    }
    assert listing == {}


# Tests wait for the state they need (conftest.wait_for, an event, a fake clock), never for seconds:
# a sleep long enough on a busy machine makes the suite slow, and one short enough makes it flaky.
SLEEPS_MAX = 5  # conftest.wait_for's poll is one


def sleep_calls(folder: str) -> list[tuple[str, float | None]]:
    """('file:line', its seconds when written as a literal, else None) for every call of time.sleep
    (time.sleep under any name of the module, or sleep imported from time) under `folder`."""
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules, sleeps = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules |= {alias.asname or alias.name for alias in node.names if alias.name == "time"}
            elif isinstance(node, ast.ImportFrom) and node.module == "time":
                sleeps |= {alias.asname or alias.name for alias in node.names if alias.name == "sleep"}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            by_module = isinstance(func, ast.Attribute) and func.attr == "sleep"
            by_module = by_module and isinstance(func.value, ast.Name) and func.value.id in modules
            if by_module or (isinstance(func, ast.Name) and func.id in sleeps):
                try:
                    seconds = float(ast.literal_eval(node.args[0])) if node.args else None
                except (ValueError, TypeError, SyntaxError):
                    seconds = None  # an expression: its value is known only when it runs
                found.append((f"{path.relative_to(ROOT)}:{node.lineno}", seconds))
    return found


def test_tests_wait_for_the_state_not_for_seconds():
    found = sleep_calls("tests")
    assert found, "not even conftest.wait_for's sleep was found: the rule no longer reads the tests"
    assert len(found) <= SLEEPS_MAX, f"at most {SLEEPS_MAX} sleeps in the tests; wait for the state instead: {found}"
    assert [(where, s) for where, s in found if s is not None and s >= 1] == [], "a test sleeps a second or more"


def test_the_rule_finds_every_way_of_sleeping(tmp_path, monkeypatch):
    (tmp_path / "tests" / "sub").mkdir(parents=True)
    (tmp_path / "tests" / "a.py").write_text(
        "import time\nimport time as clock\nfrom time import sleep as nap\n\n"
        "def f(n):\n    time.sleep(1)\n    clock.sleep(n / 2)\n    nap(0.25)\n    page.wait_for_timeout(1000)\n",
        encoding="utf-8",
    )
    # Spaced as "sleep (": a grep of the tests for "sleep(" finds their real calls only.
    (tmp_path / "tests" / "sub" / "b.py").write_text(
        "from time import sleep\nimport asyncio\n\nsleep (2.5)\nasyncio.sleep (9)\n", encoding="utf-8"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert sleep_calls("tests") == [
        ("tests/a.py:6", 1.0),
        ("tests/a.py:7", None),
        ("tests/a.py:8", 0.25),
        ("tests/sub/b.py:4", 2.5),
    ]


# `./dev.sh test` runs the browser tests from the files its BROWSER_FILES names (collecting only
# those); a test marked `browser` anywhere else would run in neither part.
def browser_files_outside_the_list() -> list[str]:
    listed = re.search(r'^BROWSER_FILES="([^"]*)"', (ROOT / "dev.sh").read_text(encoding="utf-8"), re.M)
    assert listed, "dev.sh no longer names its BROWSER_FILES"
    places = [ROOT / name for name in listed.group(1).split()]
    mark = "mark." + "browser"  # spelled in two parts, so this file does not count as marked
    marked = [path for path in sorted((ROOT / "tests").rglob("test_*.py")) if mark in path.read_text()]
    inside = lambda path: any(path == place or place in path.parents for place in places)  # noqa: E731
    return [str(path.relative_to(ROOT)) for path in marked if not inside(path)]


def test_every_browser_test_is_in_a_file_the_browser_part_collects():
    assert browser_files_outside_the_list() == [], "add the file to dev.sh's BROWSER_FILES"


def test_the_rule_finds_a_browser_test_outside_the_list(tmp_path, monkeypatch):
    (tmp_path / "tests" / "browser").mkdir(parents=True)
    (tmp_path / "dev.sh").write_text('BROWSER_FILES="tests/browser tests/test_b.py"\n', encoding="utf-8")
    marked = "import pytest\npytestmark = pytest." + "mark." + "browser\n"
    for name in ("browser/test_a.py", "test_b.py", "test_c.py"):
        (tmp_path / "tests" / name).write_text(marked, encoding="utf-8")
    (tmp_path / "tests" / "test_d.py").write_text("def test_d():\n    pass\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert browser_files_outside_the_list() == ["tests/test_c.py"]


# The app's server is one wing (issue 49, item 3): its modules live in specviz_app/serving/, and the
# top of specviz_app/ keeps the router and what every page shares (docs/design.md, section 2).
APP_TOP_MAX = 10  # modules directly in specviz_app/, __init__.py and __main__.py included
SERVING_MODULES = ("asgi", "background", "health", "launch", "malloc", "replicas", "server", "shared_runs", "ws_client")


def test_the_server_is_one_wing_and_few_modules_sit_at_the_apps_top():
    app = ROOT / "specviz_app"
    top = sorted(p.name for p in app.glob("*.py"))
    assert len(top) <= APP_TOP_MAX, f"at most {APP_TOP_MAX} modules directly in specviz_app/, found {top}"
    assert {p.stem for p in (app / "serving").glob("*.py")} >= set(SERVING_MODULES)
    strays = [p for p in app.rglob("*.py") if p.stem in SERVING_MODULES and p.parent != app / "serving"]
    assert strays == [], "a serving module outside specviz_app/serving/"
