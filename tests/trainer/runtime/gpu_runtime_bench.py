"""Runtime overhead benchmark on a CUDA machine (not a test: prints figures).

Runs ``run_training`` with the device ring (CUDA IPC) and stand-ins whose GPU time is a
spin kernel: the env step takes ``env_ms``, the learner cycle ``update_ms``. The iteration
time minus those is what the runtime itself costs. Usage:

    python tests/trainer/runtime/gpu_runtime_bench.py OUT_DIR [iterations]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import g1soak_runtime_fakes as fakes

from trainer.runtime.learner_loop import run_training


def bench(
    out: Path, name: str, *, env_ms: float, update_ms: float, iterations: int, log_interval: int = 1
) -> dict:
    ctx = fakes.make_run_context(
        out / name,
        device="cuda:0",
        training={"collector_metrics_interval": 100, "log_interval": log_interval},
        algo={
            "num_envs": 1024,
            "max_iterations": iterations,
            "batch_size": 2048,
            "learning_starts": 2,
            "save_interval": 10**6,
            "replay_buffer_n": 64,
        },
    )

    def learner_factory(ctx, device):
        return fakes.GpuWorkLearner(1024, device, update_ms=update_ms)

    start = time.monotonic()
    rc = run_training(
        ctx,
        learner_factory=learner_factory,
        env_factory=fakes.make_gpu_env,
        env_kwargs={"num_envs": 1024, "device": "cuda:0", "gpu_ms": env_ms, "episode_len": 200},
        pack_fn=fakes.pack,
    )
    wall = time.monotonic() - start
    summary = json.loads((ctx.run_dir / "run_summary.json").read_text())
    manifest = summary["runtime_manifest"]
    row = {
        "name": name,
        "rc": rc,
        "env_ms": env_ms,
        "update_ms": update_ms,
        "wall_s": round(wall, 2),
        "status": summary["status"],
        "steady_env_steps_per_sec": summary.get("steady_env_steps_per_sec"),
        "tail_env_steps_per_sec": summary.get("tail_env_steps_per_sec"),
        "tail_iteration_ms": 1024e3 / summary["tail_env_steps_per_sec"]
        if summary.get("tail_env_steps_per_sec")
        else None,
        "final_cycle_wall_ms": summary.get("final_cycle_wall_ms"),
        "final_inference_ms": summary.get("final_inference_ms"),
        "timings": manifest.get("timings"),
        "flight": manifest.get("inference_flight"),
        "ingress": manifest.get("replay_ingress"),
        "ipc": manifest.get("inference_memory_budget"),
        "shutdown": {
            k: manifest["shutdown"][k] for k in ("classification", "phase", "exception", "cleanup")
        },
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    out = Path(sys.argv[1])
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rows = [
        bench(out, "overhead", env_ms=0.0, update_ms=0.0, iterations=iterations),
        bench(out, "target", env_ms=2.5, update_ms=5.5, iterations=iterations),
        bench(
            out, "target_log100", env_ms=2.5, update_ms=5.5, iterations=iterations, log_interval=100
        ),
    ]
    (out / "bench.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
