"""The layers' import rules of docs/design.md, checked on the source (and, for torch, by importing).

Each rule is a function over the parsed sources, so the failing test names the file and the import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.quick  # the developer's loop: ./dev.sh test quick

ROOT = Path(__file__).resolve().parents[1]


def imports_of(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved against its package)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def modules_imported(path: Path, modules: set[str]) -> set[str]:
    """The modules of `modules` a file imports, at import time or inside a function (a deferred import
    closes a circle all the same). `from pkg import sub` imports the submodule sub, not pkg's
    __init__; `from pkg import name` of anything else takes the name from pkg's __init__."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            subs = {f"{node.module}.{a.name}" for a in node.names}
            names |= subs if subs <= modules else subs | {node.module}
    return names & modules


def import_graph(package: str) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports."""
    files = {module_name(p): p for p in (ROOT / package).rglob("*.py")}
    return {m: modules_imported(p, set(files)) - {m} for m, p in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def streamlit_importers(package: str) -> list[str]:
    return [
        module_name(p)
        for p in (ROOT / package).rglob("*.py")
        if any(i == "streamlit" or i.startswith("streamlit.") for i in imports_of(p))
    ]


def private_calls_across_modules(folder: str) -> list[str]:
    """`module._name(...)` calls in `folder` that reach into another module's private function."""
    bad = []
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                f = node.func
                if f.attr.startswith("_") and not f.attr.startswith("__") and isinstance(f.value, ast.Name):
                    if f.value.id not in ("self", "cls", "st"):
                        bad.append(f"{path.relative_to(ROOT)}: {f.value.id}.{f.attr}")
    return bad


def app_importers(package: str) -> list[str]:
    return [
        module_name(p)
        for p in (ROOT / package).rglob("*.py")
        if any(i == "specviz_app" or i.startswith("specviz_app.") for i in imports_of(p))
    ]


def test_library_never_imports_streamlit_or_the_app():
    assert streamlit_importers("specviz") == []
    assert app_importers("specviz") == []


def test_no_import_circles():
    for package in ("specviz", "specviz_app"):
        assert cycles(import_graph(package)) == [], package


def test_pages_call_no_private_function_of_another_module():
    assert private_calls_across_modules("specviz_app/app_pages") == []


# The library's floors, bottom up (docs/design.md, section 2): what each subpackage may import from
# specviz. The basics are config.py, errors.py and shipped.py; the entry points (__init__, __main__,
# cli) sit on top and may import anything.
BASICS = ("config", "errors", "shipped")
MAY_IMPORT = {
    "engine": {*BASICS},
    "traces": {*BASICS},
    "serving": {*BASICS, "engine"},
    "drafters": {*BASICS, "engine"},
    "decoding": {*BASICS, "engine", "serving", "drafters", "traces"},
    "labs": {*BASICS, "engine", "serving", "drafters", "decoding", "traces"},
    "training": {*BASICS, "engine", "serving", "drafters", "decoding", "traces", "labs"},
    "teaching": {*BASICS, "engine", "traces", "labs"},
}
ENTRY_POINTS = ("__init__", "__main__", "cli")


def room(module: str) -> str:
    """specviz.engine.models -> "engine"; specviz.config -> "config"; specviz -> "__init__"."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward_imports(package: str = "specviz") -> list[str]:
    """Imports of one subpackage from another it may not import: an arrow that runs back up the floors
    (deferred imports count). A basic may import only another basic."""
    graph = import_graph(package)
    bad = []
    for module, imported in sorted(graph.items()):
        here = room(module)
        if here in ENTRY_POINTS:
            continue
        allowed = set(BASICS) if here in BASICS else MAY_IMPORT.get(here)
        if allowed is None:
            bad.append(f"{module}: in no floor of MAY_IMPORT")
            continue
        bad += [f"{module} -> {m}" for m in sorted(imported) if room(m) != here and room(m) not in allowed]
    return bad


def test_no_import_runs_back_up_the_floors():
    assert upward_imports() == []


def house_faults(package: str = "specviz") -> list[str]:
    """What breaks "folders by job": a module standing directly in the package that is neither a
    basic nor an entry point, a folder that is no floor of MAY_IMPORT (or a floor with no folder),
    and a folder whose __init__.py does not say its job (a docstring of a sentence or more)."""
    root = ROOT / package
    faults = [
        f"{package}/{p.name}: not a basic" for p in sorted(root.glob("*.py")) if p.stem not in {*BASICS, *ENTRY_POINTS}
    ]
    folders = {p.parent.name for p in root.glob("*/__init__.py")}
    faults += [f"{package}/{f}/: in no floor" for f in sorted(folders - set(MAY_IMPORT))]
    faults += [f"{package}/{f}/: missing" for f in sorted(set(MAY_IMPORT) - folders)]
    for folder in sorted(folders):
        doc = ast.get_docstring(ast.parse((root / folder / "__init__.py").read_text(encoding="utf-8")))
        if not doc or len(doc) < 80:
            faults.append(f"{package}/{folder}/__init__.py: says nothing of its job")
    return faults


def test_the_library_is_folders_by_job(tmp_path, monkeypatch):
    """Only the basics and the entry points stand directly in specviz/; every subpackage says its job."""
    assert house_faults() == []
    planted = tmp_path / "lib"
    for folder in (*MAY_IMPORT, "misc"):
        (planted / folder).mkdir(parents=True)
        doc = "" if folder == "labs" else f'"""The {folder}: {"what this folder does, in a sentence. " * 3}"""\n'
        (planted / folder / "__init__.py").write_text(doc)
    (planted / "engine" / "__init__.py").unlink()  # a floor with no package
    for name in (*BASICS, "cli", "helpers"):
        (planted / f"{name}.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert house_faults("lib") == [
        "lib/helpers.py: not a basic",
        "lib/misc/: in no floor",
        "lib/engine/: missing",
        "lib/labs/__init__.py: says nothing of its job",
    ]


# The app's folders (docs/design.md, section 2): what each may import of specviz_app. "top" is the
# modules standing directly in specviz_app/ (app.py, the sidebar, session, render, ...): they may
# import every folder but the pages. The server's wing is the ground floor: it knows no page, no
# run and no control. A page is imported by no module (app.py names its file for st.navigation).
APP_MAY_IMPORT = {
    "top": {"top", "serving", "runs", "controls"},
    "serving": {"serving"},
    "runs": {"top", "serving", "runs"},
    "controls": {"top", "controls"},
    "app_pages": {"top", "runs", "controls"},
}


def app_room(module: str) -> str:
    """specviz_app.serving.health -> "serving"; specviz_app.render and specviz_app -> "top"."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else "top"


def app_wing_faults(package: str = "specviz_app") -> list[str]:
    """Imports between the app's folders that APP_MAY_IMPORT does not allow (deferred ones count),
    and a folder of the app that is in no row of it."""
    folders = {p.parent.name for p in (ROOT / package).glob("*/*.py")}
    bad = [f"{package}/{f}/: in no row of APP_MAY_IMPORT" for f in sorted(folders - set(APP_MAY_IMPORT))]
    for module, imported in sorted(import_graph(package).items()):
        allowed = APP_MAY_IMPORT.get(app_room(module), set())
        bad += [f"{module} -> {m}" for m in sorted(imported) if app_room(m) not in allowed]
    return bad


def test_the_apps_folders_import_only_what_their_row_allows(tmp_path, monkeypatch):
    """The server's wing imports nothing else of the app, and no module imports a page; each fails
    on a planted break."""
    assert app_wing_faults() == []
    planted = tmp_path / "app"
    for folder in ("serving", "runs", "app_pages", "misc"):
        (planted / folder).mkdir(parents=True)
        (planted / folder / "__init__.py").write_text("")
    (planted / "__init__.py").write_text("")
    (planted / "render.py").write_text("from app.runs import running\n")  # allowed: the top reads the runs
    (planted / "runs" / "running.py").write_text("from app import render\nfrom app.serving import gate\n")
    (planted / "serving" / "gate.py").write_text("def later():\n    from app.runs import running\n")
    (planted / "app_pages" / "page.py").write_text("from app import render\n")
    (planted / "sidebar.py").write_text("from app.app_pages import page\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert app_wing_faults("app") == [
        "app/misc/: in no row of APP_MAY_IMPORT",
        "app.serving.gate -> app.runs.running",
        "app.sidebar -> app.app_pages.page",
    ]


# What imports without torch: the traces and everything a learner sees (so the app, the notebook and
# the charts read a trace without loading torch), the paper's formulas, and the app's settings.
TORCH_FREE_FOLDERS = ("traces", "teaching")
TORCH_FREE = ("specviz.labs.theory", "specviz_app.params")


def torch_free_modules() -> list[str]:
    found = [module_name(p) for folder in TORCH_FREE_FOLDERS for p in sorted((ROOT / "specviz" / folder).rglob("*.py"))]
    return [*found, *TORCH_FREE]


def modules_needing_torch(modules: list[str]) -> list[str]:
    """The modules of `modules` that fail to import while torch cannot be imported (in a fresh
    interpreter run in ROOT, so a module that imports torch through another one is caught too)."""
    code = (
        "import importlib, sys\n"
        "sys.modules['torch'] = None\n"  # any import of torch now raises ImportError
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError:\n"
        "        print(name)\n"
    )
    result = subprocess.run([sys.executable, "-c", code, *modules], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_traces_teaching_and_theory_import_without_torch():
    modules = torch_free_modules()
    assert "specviz.teaching.charts.headline" in modules  # every chart module, not only the package's __init__
    assert modules_needing_torch(modules) == []


def test_the_checks_catch_what_they_look_for(tmp_path, monkeypatch):
    """Each rule fails on a planted violation: a circle (one import of it deferred into a function,
    one through a package's __init__), a streamlit import, a private call, an import of torch
    (directly or through another module), an import that runs back up the floors (a deferred one
    too) and a module in no floor."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    planted = tmp_path / "pkg"
    planted.mkdir()
    (planted / "x.py").write_text("import streamlit as st\nfrom other import thing\nother._hidden(1)\n")
    (planted / "a.py").write_text("from pkg import b\n")  # a submodule: an arrow to pkg.b, not to pkg
    (planted / "b.py").write_text("def later():\n    from pkg.a import thing\n")
    (planted / "__init__.py").write_text("from pkg.x import thing\n")
    (planted / "y.py").write_text("from pkg import thing\n")  # a name of pkg's __init__: an arrow to pkg
    torchy = tmp_path / "torchy"
    torchy.mkdir()
    (torchy / "__init__.py").write_text("")
    (torchy / "heavy.py").write_text("import torch\n")
    (torchy / "through.py").write_text("from torchy import heavy\n")  # torch through another module
    (torchy / "light.py").write_text("import json\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert modules_needing_torch(["torchy.heavy", "torchy.through", "torchy.light"]) == [
        "torchy.heavy",
        "torchy.through",
    ]
    assert streamlit_importers("pkg") == ["pkg.x"]
    (planted / "z.py").write_text("def late():\n    from specviz_app import keys\n")
    assert app_importers("pkg") == ["pkg.z"]
    assert private_calls_across_modules("pkg") == ["pkg/x.py: other._hidden"]
    assert cycles(import_graph("pkg")) == [["pkg.a", "pkg.b", "pkg.a"]]
    assert import_graph("pkg")["pkg.y"] == {"pkg"}
    floors = tmp_path / "lib"
    for folder in ("engine", "decoding", "traces"):
        (floors / folder).mkdir(parents=True)
        (floors / folder / "__init__.py").write_text("")
    (floors / "config.py").write_text("from lib.errors import E\n")
    (floors / "errors.py").write_text("")
    (floors / "engine" / "models.py").write_text("from lib import config\ndef f():\n    from lib.decoding import run\n")
    (floors / "decoding" / "run.py").write_text("from lib.engine import models\nfrom lib.traces import trace\n")
    (floors / "traces" / "trace.py").write_text("from lib.engine.models import f\n")
    (floors / "config2.py").write_text("")
    assert upward_imports("lib") == [
        "lib.config2: in no floor of MAY_IMPORT",
        "lib.engine.models -> lib.decoding.run",
        "lib.traces.trace -> lib.engine.models",
    ]


def literal_session_keys(folder: str) -> list[str]:
    """`st.session_state["x"]`, `.get("x")`, `.pop("x")`, `.setdefault("x")` and `"x" in st.session_state`
    with a string literal, outside specviz_app/keys.py (where every key is named once)."""
    bad = []
    for path in (ROOT / folder).rglob("*.py"):
        if path.name == "keys.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            literal = None
            if isinstance(node, ast.Subscript) and _is_session_state(node.value):
                literal = node.slice
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("get", "pop", "setdefault") and _is_session_state(node.func.value) and node.args:
                    literal = node.args[0]
            elif isinstance(node, ast.Compare) and any(_is_session_state(c) for c in node.comparators):
                literal = node.left
            if isinstance(literal, ast.Constant) and isinstance(literal.value, str):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {literal.value!r}")
    return bad


def _is_session_state(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "session_state"


def _from_keys(node: ast.AST) -> bool:
    """A key built from specviz_app/keys.py: keys.X, keys.f(...), keys.X + ..., f"{keys.X}..."."""
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id == "keys"
    if isinstance(node, ast.Call):
        return _from_keys(node.func)
    if isinstance(node, ast.BinOp):
        return _from_keys(node.left)
    if isinstance(node, ast.JoinedStr):
        return bool(node.values) and isinstance(node.values[0], ast.FormattedValue) and _from_keys(node.values[0].value)
    return False


def widget_keys_not_from_keys(folder: str) -> list[str]:
    """`key=` arguments (a widget's or element's key: Streamlit keeps its value in the session
    state) given as a literal, an f-string or a concatenation that does not start from keys.py."""
    bad = []
    for path in (ROOT / folder).rglob("*.py"):
        if path.name == "keys.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "key":
                value = node.value
                if isinstance(value, ast.Constant | ast.JoinedStr | ast.BinOp) and not _from_keys(value):
                    bad.append(f"{path.relative_to(ROOT)}:{value.lineno}: {ast.unparse(value)}")
    return bad


def key_values_spelled_out(folder: str) -> list[str]:
    """String literals (docstrings aside) equal to a key's value in keys.py: a key passed through a
    variable (`name = "th_alpha"; st.session_state[name]`) is spelled out somewhere."""
    values = set()
    for node in ast.walk(ast.parse((ROOT / folder / "keys.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign):
            values |= {
                c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)
            }
    bad = []
    for path in (ROOT / folder).rglob("*.py"):
        if path.name == "keys.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef) and n.body and isinstance(n.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in values and id(node) not in docstrings:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    return bad


def test_session_state_keys_are_named_in_one_place(tmp_path, monkeypatch):
    assert literal_session_keys("specviz_app") == []
    assert widget_keys_not_from_keys("specviz_app") == []
    assert key_values_spelled_out("specviz_app") == []
    planted = tmp_path / "pkg"
    planted.mkdir()
    (planted / "keys.py").write_text('D = "d"\nE = "e_"\n')
    (planted / "x.py").write_text(
        'st.session_state["a"] = 1\nst.session_state.get("b")\nif "c" in st.session_state: pass\n'
        'name = "d"\nst.session_state[name] = 2\n'
        'st.button("Go", key="go")\nst.button("One", key=f"e_{1}")\nst.button("Two", key=keys.E + "2")\n'
        'st.button("Three", key=f"{keys.E}3")\nst.slider("x", key=keys.D)\n'
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert [b.split(": ")[1] for b in literal_session_keys("pkg")] == ["'a'", "'b'", "'c'"]
    assert [b.split(": ")[1] for b in widget_keys_not_from_keys("pkg")] == ["'go'", "f'e_{1}'"]
    assert key_values_spelled_out("pkg") == ["pkg/x.py:4: 'd'", "pkg/x.py:7: 'e_'"]
