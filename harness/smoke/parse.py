"""Reading the GPU smoke's outputs: probe documents, soak consoles, metrics, pytest counts.

Pure functions over text and parsed JSON, so that fixture logs test them without a GPU.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any

CUDA_IPC_WARNING = "Producer process has been terminated before all shared CUDA tensors released"
"""torch's exit-time CUDA IPC warning (docs/runtime.md "Shared CUDA tensors")."""

RATE_SPREAD_MAX = 2.0
"""Steady ``train:`` rates may differ by at most this factor from each other and from the
run's own tail rate; an unwindowed rate once jumped 170x within one run
(docs/runtime.md "Four rates")."""
STEADY_FROM = 0.25
"""Rate lines count as steady from this fraction of the last line's iteration on."""

# "train: 00:01:23 training/learner_update iteration 120/5000 env steps 123,904 (82,911 env
# steps/s...)": the rate may carry more text after it (e.g. the window it covers).
_TRAIN_LINE = re.compile(
    r"^train: \S+ (?P<phase>(?:training|finalize)/\S+) iteration (?P<iteration>\d+)(?:/\d+)? "
    r"env steps [\d,]+ \((?P<rate>[\d,]+(?:\.\d+)?) env steps/s",
    re.MULTILINE,
)
_PYTEST_COUNT = re.compile(
    r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed|warnings?)"
)
_PYTEST_TIME = re.compile(r" in \d+(?:\.\d+)?s")
_PLURAL = {"error": "errors", "warning": "warnings"}
# A line of pytest's ``--durations`` table: ``283.41s call     tests/x.py::test_y``.
_PYTEST_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown) +(\S.*)$")


@dataclass(frozen=True)
class RateLine:
    """One ``train:`` progress line of a training phase."""

    iteration: int
    env_steps_per_s: float


@dataclass(frozen=True)
class RateCheck:
    """Whether the live rate lines agree with each other and with the run's tail rate."""

    lines: int
    steady: tuple[float, ...]
    tail: float | None
    sane: bool
    reason: str

    @property
    def median(self) -> float | None:
        return statistics.median(self.steady) if self.steady else None


def has_ipc_warning(text: str) -> bool:
    """True when torch's CUDA IPC warning (or the learner's line quoting it) is in ``text``."""
    return CUDA_IPC_WARNING in text


def train_rates(console: str) -> list[RateLine]:
    """The rated ``train:`` lines of the training and finalize phases, in order.

    The finalize lines carry the rate of the last window of training, so a soak whose
    training is shorter than one window (2,000 iterations under MPS: ~16 s) still shows one.
    """
    return [
        RateLine(int(m["iteration"]), float(m["rate"].replace(",", "")))
        for m in _TRAIN_LINE.finditer(console)
    ]


def check_rates(lines: list[RateLine], tail: float | None) -> RateCheck:
    """Judge the steady rate lines: within ``RATE_SPREAD_MAX`` of each other and of ``tail``.

    Args:
        lines: ``train_rates`` of the run's console.
        tail: the run summary's ``tail_env_steps_per_sec`` (None when unknown).
    """
    if not lines:
        return RateCheck(0, (), tail, False, "no rated train: line in the console")
    start = STEADY_FROM * lines[-1].iteration
    steady = tuple(line.env_steps_per_s for line in lines if line.iteration >= start)
    low, high = min(steady), max(steady)
    if low <= 0 or high / low > RATE_SPREAD_MAX:
        reason = f"steady train: rates span {low:,.0f}..{high:,.0f} env steps/s"
        return RateCheck(len(lines), steady, tail, False, reason)
    median = statistics.median(steady)
    if tail is not None and not 1 / RATE_SPREAD_MAX <= median / tail <= RATE_SPREAD_MAX:
        reason = f"train: median {median:,.0f} env steps/s disagrees with the tail {tail:,.0f}"
        return RateCheck(len(lines), steady, tail, False, reason)
    return RateCheck(len(lines), steady, tail, True, "steady")


def probe_rates(document: dict[str, Any]) -> dict[str, float | None]:
    """Env control steps/s per backend of a probe document (None where it did not pass)."""
    out: dict[str, float | None] = {}
    for result in document.get("results") or []:
        rate = result.get("throughput_env_control_steps_per_s")
        passed = result.get("status") == "passed" and isinstance(rate, (int, float))
        out[str(result.get("backend"))] = float(rate) if passed else None
    return out


def pytest_counts(output: str) -> dict[str, int]:
    """Counts of pytest's final summary line (``5 passed, 2 skipped in 3.1s``); {} if none."""
    for line in reversed(output.splitlines()):
        if _PYTEST_TIME.search(line):
            counts: dict[str, int] = {}
            for n, word in _PYTEST_COUNT.findall(line):
                word = _PLURAL.get(word, word)
                counts[word] = counts.get(word, 0) + int(n)
            if counts:
                return counts
    return {}


@dataclass(frozen=True)
class PytestDuration:
    """One row of pytest's ``--durations`` table."""

    seconds: float
    phase: str
    test: str


def pytest_durations(output: str) -> list[PytestDuration]:
    """The rows of pytest's ``--durations`` table, in its order (slowest first); [] if none."""
    rows = []
    for line in output.splitlines():
        match = _PYTEST_DURATION.match(line.strip())
        if match:
            rows.append(PytestDuration(float(match[1]), match[2], match[3]))
    return rows


def rate_text(value: float | None) -> str:
    """``352.0k`` style, ``-`` for None."""
    if value is None:
        return "-"
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"
