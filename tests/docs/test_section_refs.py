"""Every section citation in the repository resolves to a doc page and a heading there.

A citation reads ``docs/<page>.md §<anchor>``: the page must exist and the anchor must be
one of its heading anchors (``doc_anchors.anchors``, as a Markdown link uses them), for
example ``docs/contracts.md §invariants``. More ``§<anchor>`` on the same line resolve
against the last page named before them on that line (``docs/task.md §reset, §rewards``).

Citations of the design specs that are not in the repository fail with their file:line:
the old spec-file citations (a spec file's name and a section number), a bare
section number, and the spec file names themselves. A line holding ``section-refs: ignore`` is skipped
(a test that names the legacy files on purpose).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.doc_anchors import anchors

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("trainer", "harness", "contracts", "scripts", "tests", "schemas", "docs", "README.md")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".json", ".sh", ".toml", ".txt", ".cfg", ".ini"}
SKIP_DIRS = {".git", ".venv", "__pycache__", "node_modules"}
IGNORE_MARK = "section-refs: ignore"
SECTION = "\u00a7"
"""The section sign, escaped where a case cites a spec file: the cases are data, not citations."""

SIGN = r"(?:§|\\u00a7)"  # JSON files may escape the sign
PAGE_REF = re.compile(rf"(?P<page>docs/[\w./-]+\.md)(?:\s{SIGN}(?P<anchor>[\w-]+))?")
SIGN_REF = re.compile(rf"{SIGN}(?P<anchor>[\w.-]*\w)")
LEGACY = re.compile(
    rf"\bCONTRACTS(?:\.md)?\s?{SIGN}|\b(?:CONTRACTS|TASK|FLASHSAC|DESIGN|STYLE)\.md\b"
)


@dataclass(frozen=True)
class Problem:
    where: str
    text: str
    why: str

    def __str__(self) -> str:
        return f"{self.where}: {self.text!r} {self.why}"


def check_line(where: str, line: str, repo: Path = REPO) -> list[Problem]:
    """Problems of one line: legacy citations, unknown pages or anchors, pageless signs."""
    if IGNORE_MARK in line:
        return []
    problems = [
        Problem(where, m.group(0), "cites a document that is not in the repository")
        for m in LEGACY.finditer(line)
    ]
    refs = list(PAGE_REF.finditer(line))
    for ref in refs:
        if not (repo / ref.group("page")).is_file():
            problems.append(Problem(where, ref.group(0), "names a page that does not exist"))
    for sign in SIGN_REF.finditer(line):
        pages = [ref.group("page") for ref in refs if ref.start() < sign.start()]
        if not pages:
            if not LEGACY.search(line, 0, sign.start() + 1):  # a legacy form is reported once
                problems.append(Problem(where, sign.group(0), "has no docs/<page>.md before it"))
            continue
        page, anchor = pages[-1], sign.group("anchor")
        if not (repo / page).is_file():
            continue  # reported above
        if re.fullmatch(r"[\d.]+", anchor) or anchor not in anchors(repo / page):
            problems.append(Problem(where, f"{page} §{anchor}", "is not a heading of that page"))
    return problems


def _files(repo: Path) -> list[Path]:
    found: list[Path] = []
    for root in ROOTS:
        top = repo / root
        if top.is_file():
            found.append(top)
        elif top.is_dir():
            found += [
                p
                for p in sorted(top.rglob("*"))
                if p.is_file() and p.suffix in SUFFIXES and not set(p.parts) & SKIP_DIRS
            ]
    return found


def repository_problems(repo: Path = REPO) -> list[Problem]:
    problems: list[Problem] = []
    for path in _files(repo):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        rel = path.relative_to(repo)
        for number, line in enumerate(text.splitlines(), start=1):
            if "§" in line or "\\u00a7" in line or ".md" in line or "CONTRACTS" in line:
                problems += check_line(f"{rel}:{number}", line, repo)
    return problems


def test_repository_cites_only_doc_sections_that_exist() -> None:
    problems = repository_problems()
    assert not problems, (
        f"{len(problems)} section citations do not resolve "
        "(cite docs/<page>.md §<heading-anchor>):\n" + "\n".join(str(p) for p in problems)
    )


@pytest.mark.parametrize(
    "line",
    [
        "see docs/contracts.md §invariants",
        "(docs/task.md §reset, §rewards; docs/flashsac.md §replay)",
        '"title": "run summary (docs/contracts.md \\u00a7run-summary)"',
        "docs/contracts.md §g1-soak/§other-commands",
        "a page without a section: docs/runtime.md",
        f"never cite CONTRACTS {SECTION}8 here  # section-refs: ignore",  # section-refs: ignore
    ],
)
def test_a_resolving_citation_passes(line: str) -> None:
    assert check_line("x.py:1", line) == []


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (f"the verdict (CONTRACTS {SECTION}8)", "not in the repository"),  # section-refs: ignore
        (f"rewards (TASK.md {SECTION}6)", "not in the repository"),  # section-refs: ignore
        (f"norms (FLASHSAC.md {SECTION}2)", "not in the repository"),  # section-refs: ignore
        ("(STYLE.md, hot loops)", "not in the repository"),  # section-refs: ignore
        ("a bare §4.4 record", "no docs/<page>.md before it"),  # section-refs: ignore
        ("docs/contracts.md §no-such-heading", "not a heading"),  # section-refs: ignore
        ("docs/contracts.md §8", "not a heading of that page"),  # section-refs: ignore
        ("docs/nowhere.md §x", "page that does not exist"),  # section-refs: ignore
    ],
)
def test_a_broken_citation_fails_naming_why(line: str, why: str) -> None:
    problems = check_line("x.py:7", line)
    assert problems and why in str(problems[0]) and str(problems[0]).startswith("x.py:7: ")


def test_repository_problems_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## Some part\n", encoding="utf-8")
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "m.py").write_text(
        f'"""ok: docs/a.md §some-part."""\n# old: CONTRACTS {SECTION}3\n',  # section-refs: ignore
        encoding="utf-8",
    )
    legacy = f"CONTRACTS {SECTION}"  # section-refs: ignore
    expected = f"trainer/m.py:2: {legacy!r} cites a document that is not in the repository"
    assert [str(p) for p in repository_problems(tmp_path)] == [expected]
