"""The package's two halves, read from the source (no import is run): the library
(softmax_lab/*.py and its subpackages other than lab) never imports the lab
(softmax_lab/lab/), and no module imports itself round a circle, counting the
imports inside functions too (a lazy import hides a circle, it does not break it).

An edge A -> B is an `import B` or `from B import name` in A, relative imports
resolved; `from P import name` where P.name is a module is an edge to P.name,
not to P (the parent package's __init__ is not counted as a dependency)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "softmax_lab"


def _modules() -> dict[str, Path]:
    """softmax_lab's modules by dotted name (a package by its name, from its __init__.py)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, modules) -> set[str]:
    """The softmax_lab modules that `name` (at `path`) imports, anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for a in node.names:
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
    return {m for m in found if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_the_lab():
    graph = _graph()
    assert {"softmax_lab.lab.bench", "softmax_lab.lab.records", "softmax_lab.problem"} <= set(graph)
    assert "softmax_lab.lab.records" in graph["softmax_lab.lab.bench"]
    assert "softmax_lab.problem" in graph["softmax_lab.lab.candidates"]


def test_no_import_circle():
    assert _cycles(_graph()) == []


def test_a_circle_is_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_library_does_not_import_the_lab():
    graph = _graph()
    lab = "softmax_lab.lab"
    for name, deps in graph.items():
        if name == lab or name.startswith(lab + ".") or name == "softmax_lab.__main__":  # __main__ runs the lab's cli
            continue
        assert not {d for d in deps if d == lab or d.startswith(lab + ".")}, name
