"""The shape of ``src/`` that issue #14 asks to keep: no import cycles (function-level imports
count), no module over 600 lines, no function in the pure reconciler over 60 lines.

import-linter checks the layers; this checks what its contracts cannot express.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

SRC = Path(__file__).resolve().parents[2] / "src" / "trainyard"
MAX_MODULE_LINES = 600
MAX_CONTROLLER_FUNCTION_LINES = 60


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_src() -> None:
    # grimp reads every import statement, those inside functions included.
    graph = grimp.build_graph("trainyard", include_external_packages=False)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    for module in list(edges):
        # A package's __init__ importing its own submodules is how packages re-export, not a cycle
        # a reader has to untangle; every other edge counts.
        edges[module] = {m for m in edges[module] if not m.startswith(module + ".")}
    assert _cycles(edges) == []


def test_no_module_over_600_lines() -> None:
    long = {
        str(path.relative_to(SRC)): n
        for path in SRC.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_controller_function_over_60_lines() -> None:
    long = {}
    for path in (SRC / "controller").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_CONTROLLER_FUNCTION_LINES:
                    long[f"{path.relative_to(SRC)}:{node.name}"] = lines
    assert long == {}
