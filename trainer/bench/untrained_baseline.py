"""Untrained-policy baseline: how long episodes last and what they earn before any update.

``python -m trainer.bench.untrained_baseline --num-envs 64 --steps 600``

A trained policy only "learns" relative to this. Three policies run on the real task (same
owner defaults, the offline synthetic clip) for a fixed number of control steps:

* ``untrained_flashsac``: a freshly initialised FlashSAC actor with its repeated-noise
  exploration, i.e. exactly the warm-up policy of a run (docs/flashsac.md §exploration, §update-schedule);
* ``zero_action``: hold the default pose (docs/task.md §sanity-checks item 8);
* ``uniform_random``: a ~ U(-1, 1) every step.

Episode statistics are taken over every episode that ended (terminated or truncated), the
same definition as ``run_summary.mean_episode_length`` / ``final_mean_reward``. The table goes
to stdout, and ``--output`` gets strict JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import torch
import typer
from tabulate import tabulate

from contracts.jsonio import write_json_atomic
from contracts.names import Backend
from trainer.algo.learner import FlashSacLearner
from trainer.config.defaults import default_algo_cfg, default_task_cfg
from trainer.task.g1_tracking import G1TrackingEnv, make_env
from trainer.task.motion import SYNTHETIC_MOTION_ID

app = typer.Typer(add_completion=False)

Policy = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def rollout(env: G1TrackingEnv, policy: Policy, steps: int) -> dict[str, float | int | None]:
    """Run ``steps`` control steps; return ended-episode statistics."""
    obs, _ = env.reset_all()
    done = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    # Device sums over the ended episodes (no host sync per step):
    # episodes, terminated, Σ length, Σ return.
    sums = torch.zeros(4, dtype=torch.float64, device=env.device)
    for _ in range(steps):
        result = env.step(policy(obs, done))
        done = result.done
        sums += torch.stack(
            (
                done.sum(),
                result.terminated.sum(),
                torch.where(done, result.episode_length, 0).sum(),
                torch.where(done, result.episode_return, 0.0).sum(),
            )
        ).double()
        obs = result.obs
    episodes, terminated, length_sum, return_sum = sums.tolist()
    return {
        "episodes": int(episodes),
        "terminated": int(terminated),
        "mean_episode_length": length_sum / episodes if episodes else None,
        "mean_episode_return": return_sum / episodes if episodes else None,
    }


@app.command()
def main(
    num_envs: Annotated[int, typer.Option(min=1, help="Parallel environments.")] = 64,
    steps: Annotated[int, typer.Option(min=1, help="Control steps per policy.")] = 600,
    sim: Annotated[
        str, typer.Option(help="Backend: mujoco (CPU) or mjwarp (CUDA).")
    ] = Backend.MUJOCO.value,
    device: Annotated[str, typer.Option(help="Torch device.")] = "cpu",
    seed: Annotated[int, typer.Option(help="Task, actor and action seed.")] = 1,
    output: Annotated[Path | None, typer.Option(help="Strict-JSON result path.")] = None,
) -> None:
    """Measure the untrained FlashSAC, zero-action and random policies on the G1 task."""
    torch.manual_seed(seed)
    task_cfg = default_task_cfg(motion_file=SYNTHETIC_MOTION_ID)
    env = make_env(task_cfg, sim_backend=sim, num_envs=num_envs, device=device, seed=seed)
    learner = FlashSacLearner(
        default_algo_cfg(
            num_envs=num_envs, replay_buffer_n=4, learning_starts=1, batch_size=num_envs, seed=seed
        ),
        env.spec,
        num_envs=num_envs,
        device=torch.device(device),
    )
    actions = env.spec.action_dim
    generator = torch.Generator(device=device).manual_seed(seed)
    policies: dict[str, Policy] = {
        "untrained_flashsac": learner.act,
        "zero_action": lambda obs, done: torch.zeros(num_envs, actions, device=device),
        "uniform_random": lambda obs, done: (
            torch.rand(num_envs, actions, device=device, generator=generator) * 2 - 1
        ),
    }
    rows = {name: rollout(env, policy, steps) for name, policy in policies.items()}
    table = [[name, *r.values()] for name, r in rows.items()]
    typer.echo(
        tabulate(
            table,
            headers=["policy", "episodes", "terminated", "mean ep length", "mean ep return"],
            floatfmt=".2f",
        )
    )
    if output is not None:
        write_json_atomic(
            output,
            {"num_envs": num_envs, "steps": steps, "sim": sim, "seed": seed, "policies": rows},
        )


if __name__ == "__main__":
    app()
