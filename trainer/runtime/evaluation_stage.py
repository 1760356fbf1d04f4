"""The evaluation stage of ``train``: after training, on the collector's own env.

Why there (docs/evaluation.md, "Cadence and cost"): the collector already owns a built,
compiled and graph-captured env, so the evaluation builds nothing; once training is over the
env is idle, and every checkpoint's episodes share its rows, so the whole evaluation of a
canonical soak is a few rollouts. Training itself is untouched (no pause, no state to save).

The hand-shake (control block words, docs/runtime.md):

1. At ``startup/collector_start`` the learner hands the collector an :class:`EvalPlan` (or
   None when ``eval.enabled`` is false) with its other resources.
2. In ``finalize/evaluation`` (after the collector's last tick) the learner makes sure the
   final policy is on disk as ``model_<final>.pt`` and sets ``EVAL_REQUEST`` to the final
   iteration.
3. The collector evaluates every ``model_<k>.pt`` of the run directory up to it, rewriting
   ``evaluation.json`` after each point, puts its outcome (``evaluated`` or ``failed`` with
   the one-line error) into its text area and sets ``EVAL_DONE``.
4. The learner reads ``evaluation.json`` back (schema-checked), writes the ``Eval/*`` scalars
   and builds ``run_summary.evaluation``.

An evaluation failure never fails the run: the summary says ``evaluation.status: failed``
with the reason, and the soak's learning verdict judges it.
"""

from __future__ import annotations

import json
import logging
import time
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts import rundir
from contracts.schemas import validate
from trainer.evaluation.document import (
    EVALUATION_SCHEMA,
    build_document,
    eval_scalars,
    motion_record,
    summary_section,
)
from trainer.evaluation.policy import CheckpointError, checkpoint_files, load_policy_point
from trainer.evaluation.protocol import Protocol
from trainer.rundir.checkpoint import checkpoint_name, save_checkpoint
from trainer.runtime.control import ControlBlock, Word
from trainer.runtime.liveness import StopRequested

if TYPE_CHECKING:
    from trainer.config.evaluation import EvalCfg
    from trainer.rundir.metrics import MetricsWriter
    from trainer.runtime.liveness import Waiter
    from trainer.runtime.protocols import Learner

__all__ = [
    "EvalContext",
    "EvalPlan",
    "EvaluatingCollector",
    "EvaluationHost",
    "LearnerEvaluation",
    "evaluate_run",
    "one_line",
    "prepare_collector",
    "serve_evaluation",
]

logger = logging.getLogger(__name__)
OUTCOME_KEY = "evaluation"
"""Key of the collector's outcome in its text-area JSON."""


def one_line(err: BaseException, limit: int = 500) -> str:
    """``Type: message`` folded onto one line (a summary reason)."""
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text[:limit]


@dataclass(frozen=True)
class EvalPlan:
    """What the collector needs to evaluate the run (sent with its resources)."""

    run_dir: str
    uniform_episodes: int
    frame0_episodes: int
    motion_id: str


class PlannedResources(typing.Protocol):
    """The collector's resources as far as the stage reads them (``CollectorResources``)."""

    @property
    def evaluation(self) -> EvalPlan | None: ...


class EvaluatingCollector(typing.Protocol):
    """The collector as :func:`serve_evaluation` drives it (trainer/runtime/collector.py)."""

    @property
    def res(self) -> PlannedResources | None: ...

    @property
    def block(self) -> ControlBlock: ...

    @property
    def waiter(self) -> Waiter: ...

    @property
    def env(self) -> Any:
        """The collector's built env (``G1TrackingEnv``)."""
        ...


class EvalContext(typing.Protocol):
    """What the learner's side reads of the run (``RunContext``)."""

    @property
    def run_dir(self) -> Path: ...

    @property
    def eval_cfg(self) -> EvalCfg | None:
        """None when the run's configuration has no ``eval`` section (skips the stage)."""
        ...

    @property
    def motion_id(self) -> str: ...


def evaluate_run(
    env: Any, plan: EvalPlan, final_iteration: int, *, interrupt: Any = None
) -> dict[str, Any]:
    """Evaluate the run directory's checkpoints up to ``final_iteration`` on ``env``.

    Returns:
        The outcome ``{"status": "evaluated" | "failed", "reason"?, "wall_time_s"}``;
        ``evaluation.json`` holds the points.

    Raises:
        StopRequested: from ``interrupt`` (the learner stopped the run).
    """
    from trainer.evaluation.runner import evaluate_points  # the collector's side only

    start = time.monotonic()
    try:
        run_dir = Path(plan.run_dir)
        files = [(k, p) for k, p in checkpoint_files(run_dir) if k <= final_iteration]
        if not files or files[-1][0] != final_iteration:
            name = checkpoint_name(final_iteration)
            raise CheckpointError(f"the final policy {name} is not in {run_dir}")
        points = [
            load_policy_point(
                p, env.device, source="final" if k == final_iteration else "checkpoint"
            )
            for k, p in files
        ]
        protocol = Protocol(
            uniform_episodes=plan.uniform_episodes,
            frame0_episodes=plan.frame0_episodes,
            max_episode_steps=int(env.max_episode_steps),
            sim_backend=str(env.backend.name),
            device=str(env.device),
        )
        clip = env.motion
        motion = motion_record(plan.motion_id, clip.sha256, clip.num_frames, float(clip.fps))
        done: list[dict[str, Any]] = []

        def on_point(record: dict[str, Any]) -> None:
            done.append(record)
            rundir.write(run_dir / rundir.EVALUATION, build_document(protocol, motion, done))

        evaluate_points(env, points, protocol, on_point=on_point, interrupt=interrupt)
        outcome: dict[str, Any] = {"status": "evaluated"}
    except StopRequested:
        raise
    except Exception as err:  # an evaluation failure is reported, never fatal to the run
        logger.exception("evaluation failed")
        outcome = {"status": "failed", "reason": one_line(err)}
    outcome["wall_time_s"] = time.monotonic() - start
    logger.info("evaluation %s in %.1f s", outcome["status"], outcome["wall_time_s"])
    return outcome


def prepare_collector(resources: PlannedResources | None) -> None:
    """Collector side, at ``startup/collector_start``: load and compile the schema of
    ``evaluation.json`` now, so the writes after a long run do not depend on ``schemas/``
    staying where it was (nothing happens without a plan)."""
    if resources is not None and resources.evaluation is not None:
        validate({}, EVALUATION_SCHEMA)


def serve_evaluation(collector: EvaluatingCollector) -> None:
    """Collector side, after its last tick: evaluate when the learner asks (steps 3 above).

    Returns at once without a plan; raises ``StopRequested`` when the learner stops the run
    instead of asking.
    """
    plan = collector.res.evaluation if collector.res is not None else None
    if plan is None:
        return
    block = collector.block
    ints = block.ints

    def stop_requested() -> None:
        if ints[Word.STOP] or ints[Word.CLOSED]:
            raise StopRequested("the learner requested a stop during the evaluation")

    collector.waiter.wait(lambda: int(ints[Word.EVAL_REQUEST]) > 0, "the evaluation request")
    outcome = evaluate_run(
        collector.env, plan, int(ints[Word.EVAL_REQUEST]), interrupt=stop_requested
    )
    doc = json.loads(block.read_text() or "{}")
    doc[OUTCOME_KEY] = outcome
    block.write_text(json.dumps(doc))
    block.set(Word.EVAL_DONE, 1)
    block.add(Word.COLLECTOR_PROGRESS)


class EvaluationHost(typing.Protocol):
    """What :meth:`LearnerEvaluation.run` reads of the runtime (the ``LearnerRuntime``)."""

    run_dir: Path
    last_checkpoint: str | None

    @property
    def block(self) -> ControlBlock | None: ...
    @property
    def waiter(self) -> Waiter | None: ...
    @property
    def writer(self) -> MetricsWriter | None: ...
    @property
    def learner(self) -> Learner | None: ...
    @property
    def num_envs(self) -> int: ...
    @property
    def warmup(self) -> int: ...
    @property
    def iteration(self) -> int: ...
    @property
    def start_iteration(self) -> int: ...
    @property
    def run_iterations(self) -> int: ...
    @property
    def lineage_env_steps(self) -> int: ...
    def checkpoint_meta(self) -> dict[str, Any]: ...


class LearnerEvaluation:
    """The learner's side of the stage: the plan, the request, the section (see above).

    Args:
        ctx: the run's ``RunContext``; ``ctx.eval_cfg`` None (a context without an ``eval``
            section, e.g. the runtime tests') skips the evaluation.
    """

    def __init__(self, ctx: EvalContext) -> None:
        self.cfg = ctx.eval_cfg
        self.run_dir = Path(ctx.run_dir)
        self.motion_id = str(ctx.motion_id or "unknown")
        self.section: dict[str, Any] | None = None
        """``run_summary.evaluation`` once :meth:`run` ended."""
        self.requested = False

    def skip_reason(self) -> str | None:
        if self.cfg is None:
            return "this run's configuration has no eval section"
        if not self.cfg.enabled:
            return "disabled by eval.enabled=false"
        return None

    def plan(self, num_envs: int) -> EvalPlan | None:
        """The collector's :class:`EvalPlan` (None when the evaluation is skipped)."""
        if self.skip_reason() is not None:
            return None
        uniform, frame0 = self.cfg.episodes(num_envs)
        return EvalPlan(str(self.run_dir), uniform, frame0, self.motion_id)

    def run(self, runtime: EvaluationHost) -> None:
        """Learner side, in ``finalize/evaluation`` (steps 2 and 4 above).

        ``runtime`` is the ``LearnerRuntime``: its block, waiter, writer, learner and run
        counters. Raises only what its waits raise (collector death, cancellation).
        """
        reason = self.skip_reason()
        if reason is not None:
            self.section = summary_section(skipped=reason)
            return
        start = time.monotonic()
        final = int(runtime.iteration)
        self._ensure_final_checkpoint(runtime, final)
        block = runtime.block
        self.requested = True
        block.set(Word.EVAL_REQUEST, final)
        runtime.waiter.wait(lambda: block.ints[Word.EVAL_DONE] > 0, "the collector's evaluation")
        outcome = json.loads(block.read_text() or "{}").get(OUTCOME_KEY) or {}
        doc, failure = self._read_points()
        if outcome.get("status") != "evaluated":
            failure = str(outcome.get("reason") or "the collector reported no evaluation outcome")
        if doc is not None:
            self._write_scalars(runtime, doc)
        self.section = summary_section(
            doc=doc,
            path=rundir.EVALUATION if doc is not None else None,
            failure=failure,
            wall_time_s=time.monotonic() - start,
        )

    @staticmethod
    def _write_scalars(runtime: EvaluationHost, doc: dict[str, Any]) -> None:
        """``Eval/*`` of this run's points at their step on this run's TensorBoard axis (its
        own env steps: a resumed lineage's earlier env steps are not on it, and the points
        carried over from the earlier run stay in that run's event file)."""
        for point in doc["points"]:
            if point["iteration"] > runtime.start_iteration:
                step = point["env_steps"] - runtime.lineage_env_steps
                runtime.writer.write_evaluation(max(0, step), eval_scalars(point))

    def _read_points(self) -> tuple[dict[str, Any] | None, str | None]:
        path = self.run_dir / rundir.EVALUATION
        if not path.is_file():
            return None, f"{rundir.EVALUATION} was not written"
        try:
            return rundir.read(path, rundir.EVALUATION), None
        except rundir.DocumentError as err:
            return None, one_line(err)

    @staticmethod
    def _ensure_final_checkpoint(runtime: EvaluationHost, final: int) -> None:
        """Save the final policy as ``model_<final>.pt`` when training stopped off the
        checkpoint schedule (the schedule's own final checkpoint is already there)."""
        path = runtime.run_dir / checkpoint_name(final)
        if path.is_file() or final < 1:
            return
        steps = (
            runtime.lineage_env_steps + (runtime.warmup + runtime.run_iterations) * runtime.num_envs
        )
        saved = save_checkpoint(
            runtime.run_dir,
            iteration=final,
            total_env_steps=steps,
            learner_state=runtime.learner.state_dict(),
            meta=runtime.checkpoint_meta(),
        )
        runtime.last_checkpoint = str(saved)

    def failed_run_section(self, phase: str) -> dict[str, Any]:
        """``run_summary.evaluation`` of a run that failed (in ``phase``)."""
        if self.section is not None:
            return self.section
        reason = self.skip_reason()
        if reason is not None:
            return summary_section(skipped=reason)
        doc, _ = self._read_points()
        path = rundir.EVALUATION if doc is not None else None
        if self.requested:
            return summary_section(
                doc=doc, path=path, failure=f"the run failed during its evaluation (in {phase})"
            )
        return summary_section(skipped=f"the run failed before its evaluation (in {phase})")
