"""Heading anchors of the doc pages, as a Markdown renderer (GitHub) derives them.

Shared by the link check in ``test_docs.py`` and the section-reference check in
``test_section_refs.py``, so a link and a code citation resolve against the same anchors.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower().replace("`", ""))
    return re.sub(r"\s", "-", text)


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """Every heading anchor of ``path``, fenced code blocks excluded."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return frozenset(slug(m) for m in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.MULTILINE))
