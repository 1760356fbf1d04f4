"""Fixtures of the importer tests: the G1 model, the synthetic clip at 50 and 30 fps, and the
foreign-convention writers module on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from trainer.motion_import.model import g1_model
from trainer.motion_import.resolve import install_motion_importer
from trainer.task.motion import generate_synthetic_dance

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # the writers module: import g1soak_motion_writers

SOURCE_30FPS_FRAMES = 301
"""10 s at 30 fps: converted to 50 fps it has 501 frames and covers the 500-frame original."""


@pytest.fixture(scope="session", autouse=True)
def motion_importer() -> None:
    """``resolve_motion`` converts foreign clips and clip sets, as in every command."""
    install_motion_importer()


@pytest.fixture(scope="session")
def synthetic() -> dict[str, np.ndarray]:
    """The offline synthetic clip at 50 fps (the original every round trip returns to)."""
    return generate_synthetic_dance(g1_model())


@pytest.fixture(scope="session")
def synthetic30() -> dict[str, np.ndarray]:
    """The same motion sampled at 30 fps (a typical retargeted-clip rate)."""
    import g1soak_motion_writers as writers

    return writers.synthetic_at(30, SOURCE_30FPS_FRAMES)
