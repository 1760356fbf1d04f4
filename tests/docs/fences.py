"""Code fences of the doc pages, read as CommonMark reads them.

A fence opens on a line of three or more backticks (or tildes) and closes on a line of the
same character, at least as long, with nothing after it. A "closing" line with text after the
backticks does not close the block, so everything below it, headings included, renders as
code: that is the broken fence this module reports.
"""

from __future__ import annotations

import re

OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def fence_problems(text: str) -> list[str]:
    """``line N: why`` for every fence that does not open or close cleanly."""
    problems: list[str] = []
    marker, opened_at = "", 0
    for number, line in enumerate(text.splitlines(), start=1):
        match = OPEN.match(line)
        if not match:
            continue
        fence, rest = match.groups()
        if not marker:
            if fence[0] == "`" and "`" in rest:
                problems.append(f"line {number}: a fence's info string holds a backtick")
                continue
            marker, opened_at = fence, number
        elif fence[0] == marker[0] and len(fence) >= len(marker):
            if rest.strip():
                problems.append(
                    f"line {number}: text after the closing fence of line {opened_at} "
                    "keeps the block open"
                )
                continue
            marker = ""
    if marker:
        problems.append(f"line {opened_at}: the fence opened here is never closed")
    return problems


def strip_fenced(text: str) -> str:
    """The text outside fenced blocks (blank lines in their place)."""
    out, marker = [], ""
    for line in text.splitlines():
        match = OPEN.match(line)
        if match and not marker:
            marker = match.group(1)
            out.append("")
            continue
        if marker:
            if (
                match
                and match.group(1)[0] == marker[0]
                and len(match.group(1)) >= len(marker)
                and not match.group(2).strip()
            ):
                marker = ""
            out.append("")
            continue
        out.append(line)
    return "\n".join(out)
