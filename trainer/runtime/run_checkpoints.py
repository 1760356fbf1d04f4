"""The run's checkpoints as the runtime uses them: what they must match, when one is saved,
and the resume from one (docs/runtime.md, "Resuming"); the file format is
trainer/rundir/checkpoint.py's."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from contracts import rundir
from contracts.env_spec import EnvSpec
from trainer.config.schema import RunContext
from trainer.rundir.checkpoint import (
    ResumeError,
    carry_prior_checkpoints,
    check_matches,
    file_sha256,
    is_checkpoint_iteration,
    read_checkpoint,
    save_checkpoint,
)
from trainer.runtime.protocols import Learner
from trainer.runtime.run_state import RunPlan, RunState
from trainer.runtime.shutdown import ShutdownTracker

logger = logging.getLogger(__name__)


class RunCheckpoints:
    """Saves this run's ``model_<k>.pt`` and restores a resumed lineage's state."""

    def __init__(self, ctx: RunContext, plan: RunPlan, spec: EnvSpec, state: RunState) -> None:
        self.ctx = ctx
        self.plan = plan
        self.spec = spec
        self.state = state
        self.save_interval = int(ctx.algo_cfg.save_interval)

    def meta(self) -> dict[str, Any]:
        """What a resume from this run's checkpoints must match (``MATCHED_META_KEYS``)."""
        cfg = self.ctx.algo_cfg
        return {
            "algo": self.ctx.algo,
            "task": self.ctx.task,
            "sim_backend": self.ctx.sim_backend,
            "num_envs": self.plan.num_envs,
            "obs_dim": self.spec.obs_dim,
            "critic_obs_dim": self.spec.critic_obs_dim,
            "action_dim": self.spec.action_dim,
            "actor_hidden_dim": int(cfg.actor_hidden_dim),
            "critic_hidden_dim": int(cfg.critic_hidden_dim),
            "num_blocks": int(cfg.num_blocks),
            "num_atoms": int(cfg.num_atoms),
        }

    def save_if_due(self, learner: Learner, tick: int, *, last: bool) -> None:
        """After the update of ``tick``: save when the schedule (or the run's end) says so."""
        state = self.state
        if is_checkpoint_iteration(state.iteration, save_interval=self.save_interval, final=last):
            self._save(learner, tick)

    def save_reached(self, learner: Learner | None) -> None:
        """A cancelled run keeps what it trained: save the iteration reached, unless no update
        ran or its checkpoint exists already. Only between two updates (the learner is whole)."""
        state = self.state
        done = state.iteration - state.start_iteration
        if learner is None or done <= 0:
            return
        if state.last_checkpoint is not None and Path(state.last_checkpoint).name == (
            rundir.checkpoint_name(state.iteration)
        ):
            return
        self._save(learner, self.plan.warmup + done - 1)

    def _save(self, learner: Learner, tick: int) -> None:
        state = self.state
        path = save_checkpoint(
            self.ctx.run_dir,
            iteration=state.iteration,
            total_env_steps=state.lineage_env_steps + (tick + 1) * self.plan.num_envs,
            learner_state=learner.state_dict(),
            meta=self.meta(),
        )
        state.last_checkpoint = str(path)

    def resume(self, path: Path, learner: Learner, tracker: ShutdownTracker) -> None:
        """Restore ``learner`` from ``path`` before the first update, or fail closed.

        Raises:
            ResumeError: unreadable file, a config mismatch, or no iterations left.
        """
        payload = read_checkpoint(path)
        check_matches(payload, self.meta(), path)
        iteration = int(payload["iteration"])
        cap = self.plan.max_iterations
        if cap is not None and iteration >= cap:
            raise ResumeError(
                f"training.resume_from={path} is at iteration {iteration} but "
                f"algo.max_iterations={cap}; raise algo.max_iterations"
            )
        try:
            learner.load_state_dict(payload["learner"])
        except (KeyError, RuntimeError, ValueError, TypeError, IndexError) as err:
            detail = " ".join(str(err).split())[:400]
            raise ResumeError(
                f"training.resume_from={path} does not match the configuration "
                f"({type(err).__name__}: {detail}); resume with the checkpoint's network "
                "sizes and algo.num_envs, or start a fresh run (training.resume_from=null)"
            ) from err
        saved_steps = payload.get("total_env_steps")
        state = self.state
        state.start_iteration = state.iteration = iteration
        tracker.iteration = iteration
        state.lineage_env_steps = saved_steps if type(saved_steps) is int else 0
        state.total_ticks = self.plan.planned_ticks(iteration)
        carried, missing = carry_prior_checkpoints(
            path, self.ctx.run_dir, iteration=iteration, save_interval=self.save_interval
        )
        if missing:
            logger.warning(
                "resume: %s not found beside %s; this run directory lacks them",
                ", ".join(missing),
                path,
            )
        state.resumed_from = {
            "path": str(path),
            "iteration": iteration,
            "sha256": file_sha256(path),
            "total_env_steps": state.lineage_env_steps,
            "carried_checkpoints": carried,
            "missing_checkpoints": missing,
        }
        logger.info("resumed from %s at iteration %d", path, iteration)
