"""Pieces of hand-built soak artifacts shared by the soak CLI and verdict-table tests."""

from __future__ import annotations

RESOURCE_SUMMARY_KEYS = (
    "sample_count",
    "max_process_count",
    "max_process_rss_kib",
    "max_gpu_used_memory_mib",
    "max_eventfd_count",
    "max_shared_memory_fd_count",
    "residual_process_count",
)


def resource_summary(value: int = 0) -> dict[str, int]:
    """An artifact's ``resource_summary`` with every field set to ``value``."""
    return dict.fromkeys(RESOURCE_SUMMARY_KEYS, value)
