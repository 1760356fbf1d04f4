"""docs/metrics.md embeds the registry table generated from schemas/metric_registry.v1.json."""

from __future__ import annotations

from pathlib import Path

from harness.metrics.cli import ROWS
from harness.metrics.registry import registry_markdown_table

DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def test_docs_registry_table_is_generated_from_the_schema() -> None:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- registry-table:begin -->\n", 1)[1].split(
        "<!-- registry-table:end -->", 1
    )[0]
    assert block == registry_markdown_table(), (
        "docs/metrics.md is stale: paste registry_markdown_table() between the markers"
    )


def test_docs_name_every_extract_metrics_row() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert all(f"`{row.name}`" in text for row in ROWS)
