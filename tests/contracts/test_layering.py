"""Who may import whom (docs/architecture.md "Layers"), checked on every module's imports.

- ``contracts/`` is the bottom: it imports neither ``trainer`` nor ``harness``.
- ``harness/`` watches from outside: it imports ``contracts`` and itself, never ``trainer``.
- ``trainer/`` imports ``contracts``, never ``harness``.
- Neither ``contracts/`` nor ``harness/`` imports torch, mujoco or warp (they must start fast
  and judge a trainer only by what it wrote).

Imports anywhere in a module count (inside functions too), as parsed by ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = frozenset({"torch", "mujoco", "mujoco_warp", "warp"})
FORBIDDEN = {
    "contracts": frozenset({"trainer", "harness"}) | HEAVY,
    "harness": frozenset({"trainer"}) | HEAVY,
    "trainer": frozenset({"harness"}),
}


def imported_roots(source: str, filename: str) -> list[tuple[int, str]]:
    """``(line, top-level package)`` of every absolute import in ``source``."""
    roots: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            roots.extend((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.append((node.lineno, node.module.split(".")[0]))
    return roots


def violations(package: str) -> list[str]:
    found = []
    for path in sorted((REPO / package).rglob("*.py")):
        rel = path.relative_to(REPO)
        for line, root in imported_roots(path.read_text(encoding="utf-8"), str(rel)):
            if root in FORBIDDEN[package]:
                found.append(f"{rel}:{line} imports {root}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_what_its_layer_allows(package: str) -> None:
    assert (REPO / package / "__init__.py").is_file()
    assert violations(package) == []


def test_the_scan_sees_imports_inside_functions_and_from_forms() -> None:
    source = "import os\nfrom harness.soak import cli\ndef f():\n    import torch.cuda\n"
    assert imported_roots(source, "x.py") == [(1, "os"), (2, "harness"), (4, "torch")]
    assert imported_roots("from . import sibling\n", "x.py") == []


def import_graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (``from a import b`` counts ``a.b``)."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


@pytest.mark.parametrize("packages", [("contracts", "harness"), ("contracts", "trainer")])
def test_no_import_cycles(packages: tuple[str, ...]) -> None:
    assert cycles(import_graph(packages)) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
