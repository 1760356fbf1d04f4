"""Fixtures for the cumps tests: an isolated sandbox with fake NVIDIA tools on PATH."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "mps_sandbox", Path(__file__).with_name("mps_sandbox.py")
)
mps_sandbox = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mps_sandbox)


@pytest.fixture
def sandbox(monkeypatch: pytest.MonkeyPatch):
    box = mps_sandbox.MpsSandbox(monkeypatch)
    try:
        yield box
    finally:
        box.close()
