"""Shared pytest setup: the `gpu` marker skips cleanly without CUDA; private cache and schema
directories."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _stable_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    # Help-text and table tests must not depend on the caller's terminal.
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    import torch  # only when a GPU test was collected

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """A private XDG cache and asset root so tests never touch the user's cache."""
    cache = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv("G1SOAK_ASSET_DIR", raising=False)
    return cache


@pytest.fixture
def schema_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of schemas/ that this test reads afresh: ``contracts.schemas`` keeps the
    first directory it reads for the rest of the process, so the fixture points it at the copy
    and forgets the kept store (both are restored after the test)."""
    from contracts import schemas

    copy = tmp_path / "schemas"
    shutil.copytree(schemas.SCHEMA_DIR, copy)
    monkeypatch.setattr(schemas, "SCHEMA_DIR", copy)
    monkeypatch.setattr(schemas, "_STORE", None)
    return copy


os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
