"""docs/architecture.md names only modules that exist, and its map shows every package.

Two kinds of names are checked anywhere on the page: repository paths (``trainer/x/y.py``,
``schemas/z.json``; ``{a,b}`` stands for each of ``a`` and ``b``) and dotted modules
(``trainer.x.y``, optionally followed by one name the module defines). In the Layout block
an unindented line names a top-level directory, a line indented by two spaces starts with a
path relative to it, and a deeper line continues the description above it.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "architecture.md"
PACKAGE_ROOTS = ("trainer", "contracts", "harness")
PATH = re.compile(r"(?<![\w./-])(?:trainer|contracts|harness|schemas|scripts|tests)/[\w./{},-]*")
DOTTED = re.compile(r"(?<![\w./-])(?:trainer|contracts|harness)(?:\.[A-Za-z_]\w*)+")
BRACES = re.compile(r"\{([^{}]*)\}")
LAYOUT = re.compile(r"^## Layout\n.*?^```\n(?P<block>.*?)^```", re.MULTILINE | re.DOTALL)


def expand(token: str) -> list[str]:
    """``a/{b,c}.py`` -> ``a/b.py``, ``a/c.py``."""
    match = BRACES.search(token)
    if match is None:
        return [token]
    head, tail = token[: match.start()], token[match.end() :]
    return [path for alt in match.group(1).split(",") for path in expand(head + alt + tail)]


def layout_paths(text: str) -> list[str]:
    """The repository paths of the Layout block's entries."""
    match = LAYOUT.search(text)
    assert match is not None, "docs/architecture.md has no ## Layout block"
    paths: list[str] = []
    root = ""
    for line in match.group("block").splitlines():
        if line.strip() and not line.startswith(" "):
            root = line.split()[0]
            paths.append(root)
        elif line.startswith("  ") and not line.startswith("   "):
            paths.extend(expand(root + line.split()[0]))
    return paths


def named_paths(text: str) -> list[str]:
    found = [m.group(0).rstrip(".,:;") for m in PATH.finditer(text)]
    return [path for token in found for path in expand(token)]


@functools.cache
def defined_names(module: Path) -> frozenset[str]:
    """Names bound at the top level of a module: defs, classes, assignments, imports."""
    names: set[str] = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


def dotted_resolves(name: str, repo: Path = REPO) -> bool:
    """A package path down to a module, then at most one name that module defines."""
    parts = name.split(".")
    where = repo / parts[0]
    for i, part in enumerate(parts[1:], start=1):
        if (where / part / "__init__.py").is_file():
            where = where / part
        elif (where / f"{part}.py").is_file():
            rest = parts[i + 1 :]
            return not rest or rest[0] in defined_names(where / f"{part}.py")
        else:
            return part in defined_names(where / "__init__.py")
    return True


def missing_names(text: str, repo: Path = REPO) -> list[str]:
    """Every path or dotted module the page names that the repository does not have."""
    paths = sorted(set(layout_paths(text) + named_paths(text)))
    missing = [path for path in paths if not (repo / path).exists()]
    dotted = sorted({m.group(0) for m in DOTTED.finditer(text)})
    return missing + [name for name in dotted if not dotted_resolves(name, repo)]


def unmapped_packages(text: str, repo: Path = REPO) -> list[str]:
    """Packages of trainer/, contracts/ and harness/ that no Layout entry lies in."""
    mapped = {path.rstrip("/") for path in layout_paths(text)}
    mapped |= {str(Path(path).parent) for path in mapped}
    packages = sorted(
        str(init.parent.relative_to(repo))
        for root in PACKAGE_ROOTS
        for init in (repo / root).rglob("__init__.py")
    )
    return [package for package in packages if package not in mapped]


def test_architecture_names_only_modules_that_exist() -> None:
    assert missing_names(PAGE.read_text()) == []


def test_architecture_maps_every_package() -> None:
    assert unmapped_packages(PAGE.read_text()) == []


FAKE_PAGE = """## Layout

```
trainer/                    x
  cli.py                    the real one
  gone/{cli,old}.py         two files that are not there
                            trainer/nothing.py in a continuation is still a path
```

`trainer.cli.main` and `contracts.jsonio` exist; `trainer.cli.nothing_here` and
`trainer.vanished` do not, nor does `harness/soak/nope.py`.
"""


def test_a_page_naming_missing_modules_is_reported() -> None:
    assert missing_names(FAKE_PAGE) == [
        "harness/soak/nope.py",
        "trainer/gone/cli.py",
        "trainer/gone/old.py",
        "trainer/nothing.py",
        "trainer.cli.nothing_here",
        "trainer.vanished",
    ]


def test_a_package_off_the_map_is_reported() -> None:
    unmapped = unmapped_packages(FAKE_PAGE)
    assert "trainer/evaluation" in unmapped and "contracts" in unmapped
    assert "trainer" not in unmapped


def test_braces_expand_to_each_alternative() -> None:
    assert expand("a/{b,c}/{d,e}.py") == ["a/b/d.py", "a/b/e.py", "a/c/d.py", "a/c/e.py"]
