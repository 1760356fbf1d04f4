"""The soak monitor's settings and its result: what ``monitor`` and ``artifact`` both use.

Kept apart from ``monitor`` so that the artifact builder can name them without importing the
monitor (which imports the artifact builder).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.soak.eta import SoakPlan
from harness.soak.launch import DEFAULT_STOP_GRACE_S
from harness.soak.learning import LearningCfg
from harness.soak.trend import DEFAULT_THRESHOLDS, Threshold


@dataclass(frozen=True, kw_only=True)
class MonitorCfg:
    """Monitor settings (docs/contracts.md §g1-soak flags)."""

    sample_interval_s: float = 5.0
    """Seconds between samples (> 0)."""
    startup_timeout_s: float = 900.0
    """Fail if the run dir holds no bytes this long after launch."""
    stale_progress_s: float = 300.0
    """Fail if the run dir's byte total stops changing this long."""
    post_shutdown_grace_s: float = 10.0
    """Sleep after the trainer ends before looking for residual processes."""
    stop_grace_s: float = DEFAULT_STOP_GRACE_S
    """How long a trainer told to stop (SIGTERM) may take to finish before SIGKILL."""
    min_duration_s: float = 1800.0
    """A trainer that ends sooner fails the soak."""
    trend_mode: str = "enforce"
    """``enforce``: a growing trend fails the soak; ``report``: only recorded."""
    trend_thresholds: dict[str, Threshold] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    trend_warmup_s: float | None = None
    """Seconds after the trend anchor to skip; None: scaled to the soak (trend.scaled_windows)."""
    trend_min_window_s: float | None = None
    """Shorter windows are insufficient_data; None: scaled to the soak."""
    plan: SoakPlan | None = None
    """What the soak was sized to (g1-soak); None: read from the trainer's run_config.json."""
    learning: LearningCfg = field(default_factory=LearningCfg)
    """The learning verdict's mode and thresholds (harness.soak.learning)."""


@dataclass
class SoakResult:
    artifact: dict[str, Any]
    artifact_path: Path
    written: bool
    write_error: str | None

    @property
    def passed(self) -> bool:
        return self.written and self.artifact["status"] == "passed"
