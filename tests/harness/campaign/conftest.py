"""Fixtures for the campaign tests: campaign files at tiny sizes, the cumps sandbox."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

_spec = importlib.util.spec_from_file_location(
    "mps_sandbox", Path(__file__).parents[1] / "mps" / "mps_sandbox.py"
)
mps_sandbox = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mps_sandbox)

# The README quick start, smaller: a CPU soak of a few seconds of training.
TINY_SOAK: dict[str, Any] = {
    "min_duration_seconds": 0,
    "sample_interval_seconds": 0.5,
    "post_shutdown_grace_seconds": 0.5,
    "extra_overrides": ["algo.batch_size=8", "algo.learning_starts=2"],
}


def _campaign_doc(**changes: Any) -> dict[str, Any]:
    """A valid campaign document (1 seed x 1 motion x mujoco) with ``changes`` applied."""
    doc: dict[str, Any] = {
        "schema_version": 1,
        "name": "tiny",
        "directory": "out",
        "seeds": [1],
        "motions": ["synthetic"],
        "sims": {"mujoco": {"num_envs": 4, "iterations": 5}},
        "soak": dict(TINY_SOAK),
    }
    doc.update(changes)
    return doc


@pytest.fixture
def campaign_doc():
    """``campaign_doc(**changes)``: a valid document with top-level keys replaced."""
    return _campaign_doc


@pytest.fixture
def write_campaign(tmp_path: Path):
    def write(doc: dict[str, Any] | str, name: str = "campaign.yaml") -> Path:
        path = tmp_path / name
        text = doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False)
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def sandbox(monkeypatch: pytest.MonkeyPatch):
    box = mps_sandbox.MpsSandbox(monkeypatch)
    try:
        yield box
    finally:
        box.close()
