"""Who may import whom (docs/architecture.md "Layers"), checked on every module's imports.

- ``contracts/`` is the bottom: it imports neither ``trainer`` nor ``harness``.
- ``harness/`` watches from outside: it imports ``contracts`` and itself, never ``trainer``.
- ``trainer/`` imports ``contracts``, never ``harness``.
- Neither ``contracts/`` nor ``harness/`` imports torch, mujoco or warp (they must start fast
  and judge a trainer only by what it wrote).
- Inside ``trainer/`` every subpackage and top-level module (a *unit*) stands in one layer of
  :data:`TRAINER_LAYERS`, bottom to top: a unit imports only units of lower layers, and the
  units of one layer do not import each other.
- No package cycle: no two packages (nested ones included) import each other, directly or
  round a longer loop; no module cycle either.

Imports anywhere in a module count (inside functions and under ``TYPE_CHECKING`` too), as
parsed by ``ast``; a relative import counts as the absolute module it names.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = frozenset({"torch", "mujoco", "mujoco_warp", "warp"})
FORBIDDEN = {
    "contracts": frozenset({"trainer", "harness"}) | HEAVY,
    "harness": frozenset({"trainer"}) | HEAVY,
    "trainer": frozenset({"harness"}),
}

TRAINER_LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "assets",
        "compile_mode",
        "cpu_threads",
        "cuda_graphs",
        "figures",
        "hub",
        "owner_flags",
        "probe_workload",
    ),
    ("rundir",),
    ("sim",),
    ("algo", "task"),
    ("config",),
    ("motion_import",),
    ("evaluation",),
    ("runtime",),
    ("assets_cli", "bench", "check_config", "play", "preflight", "print_config", "probe"),
    ("cli",),
    ("__main__",),
)
"""The units of ``trainer/`` (its subpackages and top-level modules), bottom layer first
(docs/architecture.md "Layers" lists the same): a unit imports only units of lower layers."""


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


# ---------------------------------------------------------------------------------------------
# Module and package import graphs


@dataclass(frozen=True)
class Import:
    """One import of a module of the scanned packages: ``source`` imports ``target``."""

    source: str
    target: str
    where: str
    """``path:line`` of the import statement."""


def targets(node: ast.AST, package: str) -> list[str]:
    """The dotted modules an import statement names (``from a import b``: ``a`` and ``a.b``),
    a relative import resolved against ``package`` (the importing module's package)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        parts = package.split(".")
        base = parts[: len(parts) - node.level + 1]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    return [module] + [f"{module}.{alias.name}" for alias in node.names]


def module_files(packages: Iterable[str], repo: Path = REPO) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``packages`` (a package is its ``__init__``)."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in (repo / package).rglob("*.py"):
            name = ".".join(path.relative_to(repo).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def scan(packages: Sequence[str], repo: Path = REPO) -> list[Import]:
    """Every import, anywhere in a module of ``packages``, of another module of ``packages``."""
    modules = module_files(packages, repo)
    found: list[Import] = []
    for name, path in sorted(modules.items()):
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        rel = path.relative_to(repo)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(rel))):
            for target in targets(node, package):
                if target in modules and target != name:
                    found.append(Import(name, target, f"{rel}:{node.lineno}"))
    return found


def import_graph(packages: tuple[str, ...], repo: Path = REPO) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (``from a import b`` counts ``a.b``)."""
    graph: dict[str, set[str]] = {name: set() for name in module_files(packages, repo)}
    for edge in scan(packages, repo):
        graph[edge.source].add(edge.target)
    return graph


def package_of(module: str, modules: dict[str, Path]) -> str:
    """The package a module lies in; a top-level module of a root package stands for itself."""
    if modules[module].name == "__init__.py" or module.count(".") == 1:
        return module
    return module.rpartition(".")[0]


def package_graph(packages: tuple[str, ...], repo: Path = REPO) -> dict[str, set[str]]:
    """Package -> the packages it imports, every module's imports counted for its package."""
    modules = module_files(packages, repo)
    graph: dict[str, set[str]] = {package_of(name, modules): set() for name in modules}
    for edge in scan(packages, repo):
        source, target = package_of(edge.source, modules), package_of(edge.target, modules)
        if source != target:
            graph[source].add(target)
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


@pytest.mark.parametrize("packages", [("contracts", "harness"), ("contracts", "trainer")])
def test_no_package_cycles(packages: tuple[str, ...]) -> None:
    assert cycles(package_graph(packages)) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


# ---------------------------------------------------------------------------------------------
# The layers of trainer/


def unit_of(module: str) -> str | None:
    """``trainer.task.motion.clip`` -> ``task``; ``trainer.cli`` -> ``cli``; ``trainer`` -> None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def trainer_units(repo: Path = REPO) -> set[str]:
    units = {unit_of(name) for name in module_files(("trainer",), repo)}
    return {unit for unit in units if unit is not None}


def upward_imports(edges: Iterable[Import], layers: Sequence[Sequence[str]]) -> list[str]:
    """Every import of a unit from its own layer or one above (units of no layer are skipped:
    :func:`test_every_trainer_unit_stands_in_one_layer` reports them)."""
    layer = {unit: i for i, units in enumerate(layers) for unit in units}
    found = []
    for edge in edges:
        source, target = unit_of(edge.source), unit_of(edge.target)
        if source is None or target is None or source == target:
            continue
        if source in layer and target in layer and layer[target] >= layer[source]:
            found.append(
                f"{edge.where}: {source} (layer {layer[source]}) imports {edge.target} "
                f"({target}, layer {layer[target]})"
            )
    return found


def test_every_trainer_unit_stands_in_one_layer() -> None:
    listed = [unit for units in TRAINER_LAYERS for unit in units]
    assert len(listed) == len(set(listed)), "a unit is listed twice"
    assert sorted(trainer_units()) == sorted(listed)


def test_trainer_units_import_only_lower_layers() -> None:
    assert upward_imports(scan(("trainer",)), TRAINER_LAYERS) == []


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_checks_see_lazy_and_relative_imports_across_packages(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/cli.py": "from trainer.low import base\n",
            "trainer/low/__init__.py": "",
            "trainer/low/base.py": "def f():\n    from trainer.high import top\n",
            "trainer/high/__init__.py": "",
            "trainer/high/top.py": "from ..low.base import f\nfrom . import other\n",
            "trainer/high/other.py": "",
        },
    )
    edges = scan(("trainer",), tmp_path)
    assert {(e.source, e.target) for e in edges} == {
        ("trainer.cli", "trainer.low"),
        ("trainer.cli", "trainer.low.base"),
        ("trainer.low.base", "trainer.high"),
        ("trainer.low.base", "trainer.high.top"),
        ("trainer.high.top", "trainer.low.base"),
        ("trainer.high.top", "trainer.high"),
        ("trainer.high.top", "trainer.high.other"),
    }
    assert cycles(package_graph(("trainer",), tmp_path)) == [["trainer.high", "trainer.low"]]
    assert upward_imports(edges, [("low",), ("high",), ("cli",)]) == [
        "trainer/low/base.py:2: low (layer 0) imports trainer.high (high, layer 1)",
        "trainer/low/base.py:2: low (layer 0) imports trainer.high.top (high, layer 1)",
    ]
    sideways = upward_imports(edges, [("low", "high"), ("cli",)])
    assert len(sideways) == 3  # one layer's units do not import each other either
    assert trainer_units(tmp_path) == {"cli", "low", "high"}


LAYER_ITEM = re.compile(r"^\d+\. (?P<units>(?:`[\w]+`(?:, )?)+):", re.MULTILINE)


def documented_layers(text: str) -> list[tuple[str, ...]]:
    """The numbered list of trainer's layers in docs/architecture.md "Layers", bottom first."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    return [
        tuple(re.findall(r"`(\w+)`", match.group("units")))
        for match in LAYER_ITEM.finditer(section)
    ]


def test_architecture_lists_the_same_layers() -> None:
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert documented_layers(page) == [tuple(sorted(units)) for units in TRAINER_LAYERS]
