"""The soak monitor: launch, sample, judge liveness, end the trainer, look for residuals
(docs/contracts.md §soak-monitor), then hand the run directory to the verdict and write the artifact.

One sample at t≈0, then one every ``sample_interval_s`` on a monotonic schedule; each
tick reads the tree, then progress, then the GPU, then checks liveness and appends. The
monitor sleeps on a pidfd of the trainer plus a signal wake-up pipe, so it wakes at once
when the trainer exits or the soak is cancelled and costs nothing in between.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from contracts import rundir
from contracts.names import Classification
from contracts.procfs import is_same_process, read_stat
from harness.soak import launch as launch_mod
from harness.soak.artifact import ArtifactInputs, build_and_write_artifact
from harness.soak.console import exit_reason
from harness.soak.context import build_context
from harness.soak.eta import SoakPlan, early_warning, forecast, min_duration_reason
from harness.soak.gpu import GpuSample, GpuSampler
from harness.soak.headline import launch_reason
from harness.soak.monitor_types import MonitorCfg, SoakResult
from harness.soak.proctree import ProcessTreeSampler, descendants, snapshot_process
from harness.soak.progress import (
    ProgressSample,
    liveness_key,
    sample_progress,
    training_loop_tick,
)
from harness.soak.status import StatusPrinter, status_line
from harness.soak.trend import (
    TREND_CHECK,
    TREND_CLASSIFICATION,
    TrendReport,
    analyse_trends,
    planned_length,
    trend_failure,
)

LOG = logging.getLogger(__name__)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Cancellation:
    """SIGINT/SIGTERM/SIGHUP handler: remember the first signal and wake the sampling loop.

    SIGHUP (a closed SSH session) ends the soak like SIGTERM, so the trainer is stopped
    through the normal path and the artifact is written instead of the soak dying alone."""

    def __init__(self) -> None:
        self.signame: str | None = None
        self._read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._previous: dict[int, Any] = {}

    @property
    def fd(self) -> int:
        return self._read_fd

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.signame is None:
            self.signame = signal.Signals(signum).name
        try:
            os.write(self._write_fd, b"x")
        except OSError:
            pass

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        os.close(self._read_fd)
        os.close(self._write_fd)


@dataclass
class _Liveness:
    """Startup timeout and staleness; progress is ``liveness_key`` moving (the training
    loop's tick in a training phase, else the run dir's bytes)."""

    cfg: MonitorCfg
    last_key: tuple[str, int] | None = None
    last_change_s: float = 0.0
    bytes_at_change: int = 0

    def check(self, elapsed_s: float, progress: ProgressSample) -> tuple[str, str] | None:
        key = liveness_key(progress)
        if key != self.last_key:
            self.last_key, self.last_change_s = key, elapsed_s
            self.bytes_at_change = progress.bytes_total
        if progress.bytes_total == 0:
            if elapsed_s > self.cfg.startup_timeout_s:
                return (
                    f"training produced no progress artifact within {_num(self.cfg.startup_timeout_s)} s",
                    Classification.TIMEOUT_STARTUP,
                )
            return None
        if elapsed_s - self.last_change_s > self.cfg.stale_progress_s:
            return self._stale_reason(progress), Classification.TIMEOUT_STALE_TICK
        return None

    def _stale_reason(self, progress: ProgressSample) -> str:
        stale = _num(self.cfg.stale_progress_s)
        loop = training_loop_tick(progress)
        if loop is None:
            return f"training progress did not change for {stale} s"
        phase, tick = loop
        written = (
            "its progress heartbeat kept writing, so the process is alive but its training loop hangs"
            if progress.bytes_total != self.bytes_at_change
            else "nothing else was written either"
        )
        return (
            f"training loop made no progress for {stale} s: loop_tick stayed at {tick} "
            f"in {phase} ({written})"
        )


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


class SoakMonitor:
    """Runs one soak. Use :meth:`run`; the artifact is written whatever happens after
    launch."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        log_dir: Path,
        output: Path,
        cfg: MonitorCfg,
        motion_id: str | None = None,
        status_stream: TextIO | None = sys.stderr,
    ) -> None:
        self.command = list(command)
        self.log_dir = log_dir
        self.output = output
        self.cfg = cfg
        self.motion_id = motion_id
        self.printer = StatusPrinter(status_stream)
        self.termination_timeout_s = cfg.stop_grace_s
        self.reasons: list[str] = []
        self.classification: str | None = None
        self.findings: list[dict[str, Any]] = []
        """Every monitor reason in order with its check and classification (rejudge)."""
        self.plan: SoakPlan | None = cfg.plan
        self.warning: str | None = None
        self.samples: list[dict[str, Any]] = []
        self.seen: dict[tuple[int, int], dict[str, Any]] = {}
        self.termination: list[str] = []

    def _fail(self, reason: str, classification: str | None, check: str = "monitor") -> None:
        self.reasons.append(reason)
        self.findings.append({"check": check, "reason": reason, "classification": classification})
        if classification is not None and self.classification is None:
            self.classification = classification

    def _watch_plan(self, sample: dict[str, Any]) -> None:
        """Learn the plan from run_config.json if not given; warn once if the run will end
        before the minimum duration."""
        if self.plan is None:
            self.plan = _plan_from_run_config(self.log_dir, self.cfg.min_duration_s)
        if self.warning is not None:
            return
        last = sample["progress"].get("last")
        self.warning = early_warning(self.plan, forecast(self.plan, sample["elapsed_s"], last))
        if self.warning is not None:
            self.printer.warn(self.warning)

    # -- sampling -------------------------------------------------------------------
    def _take_sample(
        self, elapsed_s: float, tree: ProcessTreeSampler, gpu: GpuSampler
    ) -> tuple[dict[str, Any], ProgressSample]:
        tree_sample = tree.sample()
        progress = sample_progress(self.log_dir)
        gpu_sample: GpuSample = gpu.sample(tree_sample.pids)
        for proc in tree_sample.processes:
            self.seen[proc.identity] = proc.to_json()
        sample = {
            "elapsed_s": round(elapsed_s, 6),
            "process": tree_sample.to_json(),
            "gpu": gpu_sample.to_json(),
            "progress": progress.to_json(),
        }
        return sample, progress

    def _wait(
        self,
        trainer: launch_mod.LaunchedTrainer,
        pidfd: int | None,
        cancel: _Cancellation,
        timeout_s: float,
    ) -> None:
        if timeout_s <= 0:
            return
        if pidfd is not None:
            try:
                select.select([pidfd, cancel.fd], [], [], timeout_s)
            except InterruptedError:
                pass
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and cancel.signame is None and trainer.poll() is None:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def _loop(
        self,
        trainer: launch_mod.LaunchedTrainer,
        cancel: _Cancellation,
        tree: ProcessTreeSampler,
        gpu: GpuSampler,
    ) -> float | None:
        """Sample until the trainer exits or a reason is set; return the exit time."""
        pidfd: int | None
        try:
            pidfd = os.pidfd_open(trainer.pid)
        except (AttributeError, OSError):
            pidfd = None
        liveness = _Liveness(self.cfg)
        t0 = trainer.started_monotonic
        interval = self.cfg.sample_interval_s
        tick = 0
        try:
            while True:
                now = time.monotonic()
                sample, progress = self._take_sample(now - t0, tree, gpu)
                verdict = liveness.check(sample["elapsed_s"], progress)
                self.samples.append(sample)
                self._watch_plan(sample)
                self.printer.show(status_line(sample, self.plan))
                launch_mod.reap_orphans(keep=trainer.pid)
                if verdict is not None:
                    self._fail(*verdict, check="liveness")
                    return None
                if trainer.poll() is not None:
                    return time.monotonic()
                tick += 1
                next_t = t0 + tick * interval
                now = time.monotonic()
                if next_t < now:  # a slow sample: skip the missed slots, keep the grid
                    tick = int((now - t0) // interval) + 1
                    next_t = t0 + tick * interval
                self._wait(trainer, pidfd, cancel, next_t - now)
                if cancel.signame is not None:
                    self._fail(
                        f"soak cancelled by {cancel.signame}",
                        Classification.EXTERNAL_CANCELLATION,
                        "cancellation",
                    )
                    return None
                if trainer.poll() is not None:
                    return time.monotonic()
        finally:
            if pidfd is not None:
                os.close(pidfd)

    # -- shutdown -------------------------------------------------------------------
    def _terminate(self, trainer: launch_mod.LaunchedTrainer) -> None:
        self.termination = launch_mod.terminate_group(trainer, timeout_s=self.termination_timeout_s)
        for (pid, ticks), proc in list(self.seen.items()):
            if proc.get("escaped") and is_same_process(pid, ticks):
                steps = launch_mod.terminate_process(
                    pid, ticks, timeout_s=self.termination_timeout_s
                )
                self.termination.extend(f"{s}:{pid}" for s in steps)

    def _residuals(self, tree: ProcessTreeSampler) -> list[dict[str, Any]]:
        launch_mod.reap_orphans(keep=None)
        candidates: dict[tuple[int, int], str] = {}
        for pid, ticks in self.seen:
            candidates[(pid, ticks)] = str(self.seen[(pid, ticks)].get("discovered_by", "tree"))
        for pid in descendants(os.getpid(), exclude=tree.helper_pids):
            stat = read_stat(pid)
            if stat is not None:
                candidates.setdefault((pid, stat.start_time_ticks), "tree")
        for pid in tree.marker.scan(exclude=tree.helper_pids):
            stat = read_stat(pid)
            if stat is not None:
                candidates.setdefault((pid, stat.start_time_ticks), "marker")
        residual: list[dict[str, Any]] = []
        for (pid, ticks), how in sorted(candidates.items()):
            if not is_same_process(pid, ticks):
                continue
            snap = snapshot_process(
                pid,
                discovered_by="marker" if how == "marker" else "tree",
                trainer_pgid=tree.trainer_pgid,
            )
            if snap is not None and snap.start_time_ticks == ticks and snap.state not in ("Z", "X"):
                residual.append(snap.to_json())
        return residual

    def _shut_down(
        self,
        trainer: launch_mod.LaunchedTrainer,
        tree: ProcessTreeSampler,
        cancel: _Cancellation,
        exit_t: float | None,
    ) -> tuple[int | None, float, TrendReport, list[dict[str, Any]]]:
        """After the loop: ``(returncode, duration_s, trends, residual)``, failing the soak
        on any monitor error rather than losing the artifact."""
        try:
            return self._judge_exit(trainer, tree, cancel, exit_t)
        except Exception as err:
            LOG.exception("soak monitor failed after the sampling loop")
            self._fail(
                f"soak monitor failed: {type(err).__name__}: {err}", Classification.MONITOR_FAILURE
            )
            if trainer.poll() is None:
                launch_mod.terminate_group(trainer, timeout_s=self.termination_timeout_s)
            duration_s = time.monotonic() - trainer.started_monotonic
            return trainer.poll(), duration_s, self._trends_or_empty(), []

    def _judge_exit(
        self,
        trainer: launch_mod.LaunchedTrainer,
        tree: ProcessTreeSampler,
        cancel: _Cancellation,
        exit_t: float | None,
    ) -> tuple[int | None, float, TrendReport, list[dict[str, Any]]]:
        terminated = False
        if trainer.poll() is None:
            if not self.reasons:
                self._fail("soak monitor exited before the trainer", Classification.MONITOR_FAILURE)
            self._terminate(trainer)
            terminated = True
        returncode = launch_mod.wait_returncode(trainer, timeout_s=self.termination_timeout_s)
        if exit_t is None:
            exit_t = time.monotonic()
        duration_s = exit_t - trainer.started_monotonic
        if returncode is not None and returncode != 0 and not self.reasons:
            self._fail(exit_reason(returncode, trainer.console_log), None, "returncode")
        if not terminated and duration_s < self.cfg.min_duration_s:
            plan = self.plan or SoakPlan(None, None, self.cfg.min_duration_s)
            self._fail(min_duration_reason(plan, duration_s, self.samples), None, "min_duration")
        trends = self._trends()
        reason = trend_failure(trends)
        if reason is not None:
            self._fail(reason, TREND_CLASSIFICATION, TREND_CHECK)
        self._sleep_grace(cancel)
        residual = self._residuals(tree)
        if residual:
            pids = ", ".join(str(p["pid"]) for p in residual)
            self._fail(
                f"residual child processes after shutdown: {pids}",
                Classification.RESOURCE_LEAK,
                "residuals",
            )
        return returncode, duration_s, trends, residual

    # -- the whole soak -------------------------------------------------------------
    def run(self) -> SoakResult:
        started_at = utc_now()
        cancel = _Cancellation()
        cancel.install()
        helper_pids: set[int] = set()
        gpu = GpuSampler(helper_pids)
        trainer: launch_mod.LaunchedTrainer | None = None
        returncode: int | None = None
        residual: list[dict[str, Any]] = []
        duration_s = 0.0
        subreaper = False
        soak_id = "0" * 32
        t_launch = time.monotonic()
        # Children this process had before the launch (an embedding program's own helpers,
        # e.g. multiprocessing's resource tracker) are not the trainer's: neither sampled
        # nor residue.
        helper_pids.update(descendants(os.getpid()))
        try:
            try:
                trainer = launch_mod.launch_trainer(self.command, self.log_dir)
            except OSError as err:
                self._fail(launch_reason(err), Classification.LAUNCH_FAILURE)
            if trainer is not None:
                subreaper, soak_id = trainer.subreaper, trainer.soak_id
                tree = ProcessTreeSampler(trainer.soak_id, trainer_pgid=trainer.pgid)
                tree.helper_pids = helper_pids
                exit_t: float | None = None
                try:
                    exit_t = self._loop(trainer, cancel, tree, gpu)
                except Exception as err:
                    LOG.exception("soak monitor failed")
                    self._fail(
                        f"soak monitor failed: {type(err).__name__}: {err}",
                        Classification.MONITOR_FAILURE,
                    )
                self.printer.finish()
                returncode, duration_s, trends, residual = self._shut_down(
                    trainer, tree, cancel, exit_t
                )
            else:
                duration_s = time.monotonic() - t_launch
                trends = self._trends()
            motion_id = (
                self.motion_id
                if self.motion_id is not None
                else _motion_from_run_config(self.log_dir)
            )
            context = build_context(gpu, motion_id=motion_id)
            gpu.close()
            inputs = ArtifactInputs(
                command=self.command,
                context=context,
                started_at_utc=started_at,
                ended_at_utc=utc_now(),
                duration_s=duration_s,
                returncode=returncode,
                cfg=self.cfg,
                soak_id=soak_id,
                subreaper=subreaper,
                termination=self.termination,
                samples=self.samples,
                trends=trends,
                residual_processes=residual,
                identities_checked=len(self.seen),
                log_dir=self.log_dir,
                monitor_reasons=list(self.reasons),
                monitor_classification=self.classification,
                monitor_findings=list(self.findings),
                plan=self.plan,
                plan_warning=self.warning,
            )
            return build_and_write_artifact(inputs, self.output)
        finally:
            cancel.restore()

    def _trends(self, samples: list[dict[str, Any]] | None = None) -> TrendReport:
        return analyse_trends(
            self.samples if samples is None else samples,
            thresholds=self.cfg.trend_thresholds,
            mode=self.cfg.trend_mode,
            warmup_s=self.cfg.trend_warmup_s,
            min_window_s=self.cfg.trend_min_window_s,
            planned_length_s=planned_length(self.plan),
        )

    def _trends_or_empty(self) -> TrendReport:
        try:
            return self._trends()
        except Exception:
            LOG.exception("trend analysis failed")
            return self._trends([])

    def _sleep_grace(self, cancel: _Cancellation) -> None:
        deadline = time.monotonic() + self.cfg.post_shutdown_grace_s
        while (remaining := deadline - time.monotonic()) > 0:
            launch_mod.reap_orphans(keep=None)
            time.sleep(min(remaining, 0.1))


def _plan_from_run_config(log_dir: Path, min_duration_s: float) -> SoakPlan | None:
    """The plan of a trainer whose run_config.json carries algo.max_iterations and
    training.duration_seconds (this repository's ``train``); None until it exists."""
    path = log_dir / rundir.RUN_CONFIG
    if not path.is_file():
        return None
    try:  # lenient: any trainer's run_config.json, read for what it says
        config = rundir.read(path, lenient=True)["config"]
        cap = config["algo"].get("max_iterations")
        budget = config.get("training", {}).get("duration_seconds")
    except (rundir.DocumentError, KeyError, TypeError, AttributeError):
        return SoakPlan(None, None, min_duration_s)
    iterations = cap if isinstance(cap, int) and not isinstance(cap, bool) else None
    duration = float(budget) if isinstance(budget, int | float) and budget > 0 else None
    return SoakPlan(iterations, duration, min_duration_s)


def _motion_from_run_config(log_dir: Path) -> str | None:
    try:
        doc = rundir.read(log_dir / rundir.RUN_CONFIG, lenient=True)
        value = doc["config"]["env"]["commands"]["motion"]["motion_file"]
    except (rundir.DocumentError, KeyError, TypeError):
        return None
    return value if isinstance(value, str) else None


def run_soak(
    command: Sequence[str],
    *,
    log_dir: Path,
    output: Path,
    cfg: MonitorCfg,
    motion_id: str | None = None,
    status_stream: TextIO | None = sys.stderr,
) -> SoakResult:
    """Run one soak of ``command`` and write the artifact to ``output``."""
    monitor = SoakMonitor(
        command,
        log_dir=log_dir,
        output=output,
        cfg=cfg,
        motion_id=motion_id,
        status_stream=status_stream,
    )
    return monitor.run()
