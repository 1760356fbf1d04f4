"""Child of test_gpu_ipc_release.py: one ``run_training`` on the device ring in its own process.

torch checks its CUDA IPC reference counts when the *producer* (this learner process) exits,
so the warning can only be observed from outside. Usage:

    python gpu_ipc_child.py RUN_DIR {complete,collector_raises,collector_killed}

Exit status: ``run_training``'s (0 completed, 1 failed).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # spawn passes sys.path on

import g1soak_runtime_fakes as fakes

from trainer.runtime.learner_loop import run_training

CASES: dict[str, dict] = {
    "complete": {},
    "collector_raises": {"fail_at_tick": 10},
    "collector_killed": {"kill_self_at_tick": 10},
}


def main(run_dir: str, case: str) -> int:
    ctx = fakes.make_run_context(run_dir, device="cuda:0", algo={"max_iterations": 30})

    def learner_factory(ctx, device):
        return fakes.GpuWorkLearner(ctx.algo_cfg.num_envs, device, update_ms=0.5)

    return run_training(
        ctx,
        learner_factory=learner_factory,
        env_factory=fakes.make_gpu_env,
        env_kwargs={"num_envs": 8, "device": "cuda:0", "gpu_ms": 0.5, **CASES[case]},
        pack_fn=fakes.pack,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
