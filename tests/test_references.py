"""Every name of the library that the tests and benchmarks reach exists.

The GPU tests are skipped where there is no GPU, so a name they import or read
that a refactor removed would go unseen until they run on a device.  This reads
their source (nothing of theirs runs): each `from softmax_lab... import name`,
anywhere in a file, and each attribute read through a name bound to a module
of the package (`import softmax_lab.x as X`, `from softmax_lab.x import mod`,
`V = sys.modules["softmax_lab.x"]`), must resolve in the package as it is.
Names under a module that needs an absent optional dependency (torch) are
passed over."""

import ast
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("tests/*.py"), *ROOT.glob("benchmarks/*.py")])

_MISSING_DEPENDENCY = object()


def _resolve(dotted: str):
    """The object at `dotted` (a module, then attributes), None where a part is missing,
    _MISSING_DEPENDENCY where a module needs a package this machine lacks."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as e:
            if e.name and not e.name.startswith("softmax_lab"):
                return _MISSING_DEPENDENCY
            continue
        for part in parts[cut:]:
            if not hasattr(obj, part):
                try:  # a submodule not yet imported by its package
                    obj = importlib.import_module(f"{obj.__name__}.{part}")
                    continue
                except (AttributeError, ImportError):
                    return None
            obj = getattr(obj, part)
        return obj
    return None


def _dotted(node) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; `sys.modules["m"].b` as ["@m", "b"]; else None."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(names)]
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "modules"
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
        return ["@" + node.slice.value, *reversed(names)]
    return None


def _unresolved(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    modules: dict[str, str] = {}  # a local name -> the package module it is bound to
    bad = []

    def check(dotted: str, line: int, text: str):
        if _resolve(dotted) is None:
            bad.append(f"{path.relative_to(ROOT)}:{line}: {text}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("softmax_lab"):
                    modules[a.asname or "softmax_lab"] = a.name if a.asname else "softmax_lab"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("softmax_lab") and not node.level:
            for a in node.names:
                check(f"{node.module}.{a.name}", node.lineno, f"from {node.module} import {a.name}")
                if isinstance(_resolve(f"{node.module}.{a.name}"), type(sys)):
                    modules[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            dotted = _dotted(node.value)
            if dotted and len(dotted) == 1 and dotted[0].startswith("@softmax_lab"):
                modules[node.targets[0].id] = dotted[0][1:]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            dotted = _dotted(node)
            base = dotted and (dotted[0][1:] if dotted[0].startswith("@softmax_lab") else modules.get(dotted[0]))
            if base:
                check(".".join([base, *dotted[1:]]), node.lineno, ".".join(dotted))
    return bad


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_library_name_it_reaches_exists(path):
    assert _unresolved(path) == []


def test_a_removed_name_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    source = tmp_path / "t.py"
    source.write_text("import sys\nimport softmax_lab\nfrom softmax_lab.arrays import describe, _gone\n"
                      "V = sys.modules['softmax_lab.variants']\n"
                      "def f():\n    return V.get_variant, V.no_such_plan, softmax_lab.softmax, softmax_lab.nope\n")
    assert [b.split(": ", 1)[1] for b in _unresolved(source)] == [
        "from softmax_lab.arrays import _gone", "V.no_such_plan", "softmax_lab.nope"]
