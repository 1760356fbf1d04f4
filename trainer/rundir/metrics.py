"""TensorBoard writer for metric schema v1 (docs/contracts.md §metric-schema).

Only tags registered in ``schemas/metric_registry.v1.json`` are accepted: fixed tags and
the two open patterns (``reward/<term>``, ``Loss/aux_<name>``). An unknown tag raises
``UnknownMetricTag`` before anything is written (fail closed → learner failure). The
learner's own metric map may only carry learner-owned tags (``check_learner_tags``), so it
cannot inject logger or collector tags.

Exactly one event file lives at the run-directory root. The global step is the total env
steps at logging time (monotone). The one exception is ``Eval/*``
(:meth:`MetricsWriter.write_evaluation`): the evaluation of the run's checkpoints runs after
training, and each point is written at its checkpoint's env steps, so those tags are
monotone per tag but come after the last training step in the file. ``SummaryWriter`` calls run on a background thread so the
learner's hot loop only validates tags and enqueues a dict; the thread flushes at least
every ``flush_secs`` (≤ 30 s by contract).
"""

from __future__ import annotations

import functools
import queue
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contracts.schemas import load_schema

REGISTRY_SCHEMA = "metric_registry.v1.json"
EVAL_PREFIX = "Eval/"
FLUSH_SECS = 10


class UnknownMetricTag(ValueError):
    """A tag is not in metric registry v1."""


@functools.cache
def _registry() -> tuple[dict[str, dict], tuple[tuple[re.Pattern[str], dict], ...]]:
    doc = load_schema(REGISTRY_SCHEMA)
    patterns = tuple((re.compile(p["regex"]), p) for p in doc["patterns"])
    return dict(doc["tags"]), patterns


def tag_entry(tag: str) -> dict:
    """Registry entry of ``tag`` (fixed or pattern); raise UnknownMetricTag otherwise."""
    tags, patterns = _registry()
    entry = tags.get(tag)
    if entry is not None:
        return entry
    for regex, pattern in patterns:
        if regex.match(tag):
            return pattern
    raise UnknownMetricTag(
        f"metric tag {tag!r} is not registered in schemas/{REGISTRY_SCHEMA}; "
        f"register it there or use reward/<term> or Loss/aux_<name>"
    )


def check_tags(tags: Mapping[str, Any] | list[str]) -> None:
    """Raise UnknownMetricTag for the first unregistered tag."""
    for tag in tags:
        tag_entry(tag)


def check_learner_tags(tags: Mapping[str, Any] | list[str]) -> None:
    """The learner metric map may only carry learner-owned tags (docs/contracts.md §metric-schema)."""
    for tag in tags:
        owner = tag_entry(tag)["owner"]
        if owner != "learner":
            raise UnknownMetricTag(
                f"learner metric {tag!r} is owned by the {owner}; the learner map may only carry learner tags"
            )


_STOP = object()


class MetricsWriter:
    """Schema-v1 TensorBoard scalars in ``run_dir`` (one event file).

    Args:
        run_dir: the run directory; the event file is created at its root.
        flush_secs: flush period of the event file (≤ 30).
    """

    def __init__(self, run_dir: str | Path, *, flush_secs: int = FLUSH_SECS) -> None:
        if not 0 < flush_secs <= 30:
            raise ValueError(
                f"flush_secs={flush_secs} must be in 1..30 (docs/contracts.md §run-directory)"
            )
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(log_dir=str(run_dir), flush_secs=flush_secs)
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._last_step = -1
        self._last_eval_step: dict[str, int] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._drain, name="metrics-writer", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            step, scalars = item
            if self._error is not None:
                continue
            try:
                for tag, value in scalars.items():
                    self._writer.add_scalar(tag, value, global_step=step)
            except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
                self._error = err

    def write(self, step: int, scalars: Mapping[str, float | int | None]) -> None:
        """Queue one write of ``scalars`` at global step ``step`` (total env steps).

        None values are skipped (a metric without data this interval); non-finite values
        are written as they are (TensorBoard stores them; readers report them).

        Raises:
            UnknownMetricTag: an unregistered tag (nothing of this write is queued).
            ValueError: a step smaller than the previous one (the axis is monotone).
        """
        if self._error is not None:
            raise RuntimeError(
                f"metrics writer failed: {type(self._error).__name__}: {self._error}"
            )
        if self._closed:
            raise RuntimeError("metrics writer is closed")
        check_tags(scalars)
        if step < self._last_step:
            raise ValueError(
                f"metric step {step} < previous step {self._last_step}; the axis is total env steps"
            )
        self._last_step = step
        clean = {k: float(v) for k, v in scalars.items() if v is not None}
        self._queue.put((int(step), clean))

    def write_evaluation(self, step: int, scalars: Mapping[str, float]) -> None:
        """Queue the ``Eval/*`` scalars of one evaluation point at its checkpoint's env steps.

        The step may lie before the last training step (the module docstring says why); per
        tag it must not decrease.

        Raises:
            UnknownMetricTag: a tag outside ``Eval/*`` or not registered.
            ValueError: a step smaller than that tag's previous one.
        """
        if self._error is not None or self._closed:
            raise RuntimeError("metrics writer failed or is closed")
        check_tags(scalars)
        for tag in scalars:
            if not tag.startswith(EVAL_PREFIX):
                raise UnknownMetricTag(
                    f"write_evaluation takes only {EVAL_PREFIX}* tags, got {tag!r}"
                )
            if step < self._last_eval_step.get(tag, -1):
                raise ValueError(f"metric step {step} < previous step of {tag}")
        self._last_eval_step.update(dict.fromkeys(scalars, int(step)))
        self._queue.put((int(step), {k: float(v) for k, v in scalars.items()}))

    def close(self) -> None:
        """Write everything queued, flush and close the event file; re-raise a writer error."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join()
        self._writer.flush()
        self._writer.close()
        if self._error is not None:
            raise RuntimeError(
                f"metrics writer failed: {type(self._error).__name__}: {self._error}"
            )
