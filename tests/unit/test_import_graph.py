"""The shape of the code, checked: no import circle among the installed
modules (imports made only for type checking count too), and no module so
big that it does several jobs. The layers themselves are the import
contracts' business (`test_contracts.py`)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "device", "homebase", "relay", "sim", "entry")
MAX_LINES = 700
# Modules allowed past MAX_LINES, each with the reason: none.
BIG: dict[str, str] = {}


def _modules() -> dict[str, Path]:
    found = {}
    for folder in PACKAGES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            found[".".join(["pixie", folder, *parts])] = path
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            candidates = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        out |= {c for c in candidates if c in known and c != name}
    return out


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_its_way_back_to_itself() -> None:
    known = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        graph[name] = _imports(name, path, known)
    assert _circles(graph) == []


def test_a_circle_is_found_when_there_is_one() -> None:
    graph: dict[str, set[str]] = defaultdict(set, {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert _circles(graph) == [["a", "b", "c"]]


def test_no_module_does_the_work_of_several() -> None:
    over = {
        str(path.relative_to(ROOT)): lines
        for path in _modules().values()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert set(over) <= set(BIG), over
    assert all(over.get(name, 0) > MAX_LINES for name in BIG), "an allowance no longer needed"
