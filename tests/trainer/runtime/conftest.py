"""Fixtures for runtime tests: a RunContext factory and the fakes module on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # spawn passes sys.path to the collector

import g1soak_runtime_fakes as fakes


@pytest.fixture
def make_ctx(tmp_path):
    """Factory: a real RunContext for a tiny CPU run (fake env/learner are hooks)."""

    def factory(*, training: dict | None = None, algo: dict | None = None, device: str = "cpu"):
        return fakes.make_run_context(tmp_path / "run", training=training, algo=algo, device=device)

    return factory
