"""The docs split into a reference (what is true now) and a journal (dated records), and the
reader's way from README.md to the current speed per GPU kind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.doc_anchors import anchors

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
JOURNAL = DOCS / "journal"
BENCHMARKS = DOCS / "benchmarks.md"
USER_DOCS = sorted(DOCS.glob("*.md")) + [REPO / "README.md"]
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    nxt = text.find("\n## ", start + 1)
    return text[start : nxt if nxt >= 0 else len(text)]


def _rows(section: str) -> list[list[str]]:
    rows = [r for r in section.splitlines() if r.startswith("| ") and not r.startswith("|---")]
    return [[c.strip() for c in r.strip("|").split(" | ")] for r in rows[1:]]


@pytest.mark.parametrize("kind", ["H100", "H200"])
def test_readme_reaches_the_current_speed_and_its_command_in_two_clicks(kind: str) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    anchor = kind.lower()
    assert f"(docs/benchmarks.md#{anchor})" in readme  # click 1
    assert anchor in anchors(BENCHMARKS)
    rows = _rows(_section(BENCHMARKS.read_text(encoding="utf-8"), f"## {kind}"))
    assert rows and "env steps/s" in rows[0][1]
    for row in rows:
        command, evidence = row[-2], row[-1]
        assert "`" in command or command.startswith("the same"), row
        target = re.fullmatch(r"\[[^]]+\]\((journal/benchmarks-2026\.md)#([\w-]+)\)", evidence)
        assert target, f"{kind} row {row[0]!r} does not link its dated record"  # click 2
        assert target.group(2) in anchors(DOCS / target.group(1))


def test_the_journal_holds_the_dated_records_and_the_reference_none() -> None:
    for page in sorted(JOURNAL.glob("*.md")):
        headings = re.findall(r"^## (.+)$", page.read_text(encoding="utf-8"), re.MULTILINE)
        undated = [h for h in headings if not DATE.search(h)]
        assert headings and not undated, f"{page.name}: undated records {undated}"
    reference = BENCHMARKS.read_text(encoding="utf-8")
    assert not re.search(r"^#+ .*session", reference, re.MULTILINE | re.IGNORECASE)
    assert "appended at the end of the\n[journal](journal/benchmarks-2026.md)" in reference


ORDINALS = (
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
    "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
    "eighteenth", "nineteenth", "twentieth",
)  # fmt: skip
INTERNAL = re.compile(
    r"device[- ]minutes?|lent (?:a |the )?GPU|device call"
    rf"|\b(?:twenty-\w+|{'|'.join(ORDINALS)})\s+(?:H[12]00\s+)?sessions?\b",
    re.IGNORECASE,
)


@pytest.mark.parametrize("page", USER_DOCS, ids=lambda p: p.name)
def test_user_docs_do_not_speak_of_lent_gpus_device_minutes_or_work_sessions(page: Path) -> None:
    """A reference page cites a record by its date (and links it), never by the working
    session that made it, which only the journal's headings number."""
    found = INTERNAL.findall(page.read_text(encoding="utf-8"))
    assert not found, f"{page.name} uses internal wording: {found}"


def test_readme_says_how_long_the_test_suite_and_the_fast_tier_take() -> None:
    section = _section((REPO / "README.md").read_text(encoding="utf-8"), "## Run the tests")
    assert re.search(r"about \d+[–-]\d+ minutes on a 2-core machine", section)
    fast_tier = section[section.index('`uv run pytest -m "not slow') :]
    assert re.match(r"[^.]*,\s+about \d+ minutes on the same 2-core machine", fast_tier)


def test_the_guide_points_at_the_long_soak_evidence_it_has() -> None:
    guide = (DOCS / "guide.md").read_text(encoding="utf-8")
    section = _section(guide, "## 7. Historical evidence")
    assert "No long-soak evidence" not in section
    assert "](benchmarks.md)" in section
