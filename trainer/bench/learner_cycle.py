"""Benchmark of the FlashSAC learner: update cycle and actor inference, eager vs CUDA graph.

``python -m trainer.bench.learner_cycle --num-envs 1024 --iters 200`` fills the replay with
random rows, then times ``prepare_iteration() + update_cycle()`` (sampling included) and
``act()`` with CUDA events after a warm-up, once per mode. stdout holds the table (or, with
``--json``, only the JSON document); ``--out`` also writes the JSON to a file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

import torch

from trainer.algo.config import FlashSacCfg
from trainer.algo.learner import FlashSacLearner
from trainer.config.defaults import default_algo_cfg
from trainer.task.spec import G1_TRACKING_SPEC


def _fill(learner: FlashSacLearner, rows: int) -> None:
    width = learner.layout.width
    chunk = learner.num_envs
    for _ in range(rows // chunk):
        data = torch.randn(chunk, width, device=learner.device)
        lay = learner.layout
        data[:, lay.action] = data[:, lay.action].tanh()
        data[:, lay.done] = (torch.rand(chunk, device=learner.device) < 0.01).float()
        data[:, lay.trunc] = 0.0
        learner.replay.commit(data)


def _time_ms(fn, iters: int, device: torch.device) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) * 1000.0 / iters


def run_mode(
    cfg: FlashSacCfg, device: torch.device, *, graph: bool, iters: int, warmup: int, profile: bool
) -> dict:
    mode_cfg = replace(cfg, use_cuda_graph=graph)
    learner = FlashSacLearner(mode_cfg, G1_TRACKING_SPEC, num_envs=cfg.num_envs, device=device)
    _fill(learner, max(cfg.batch_size, cfg.learning_starts * cfg.num_envs))
    obs = torch.randn(cfg.num_envs, learner.layout.obs_dim, device=device)
    done = torch.zeros(cfg.num_envs, dtype=torch.bool, device=device)

    def cycle() -> None:
        learner.prepare_iteration()
        learner.update_cycle()

    t_setup = time.perf_counter()
    for _ in range(warmup):
        cycle()
        learner.act(obs, done)
    if device.type == "cuda":
        torch.cuda.synchronize()
    setup_s = time.perf_counter() - t_setup
    sync_free = None
    if device.type == "cuda":
        torch.cuda.set_sync_debug_mode("error")
        try:
            cycle()
            learner.act(obs, done)
            sync_free = True
        except RuntimeError:
            sync_free = False
        finally:
            torch.cuda.set_sync_debug_mode("default")
    cycle_ms = _time_ms(cycle, iters, device)
    act_ms = _time_ms(lambda: learner.act(obs, done), iters * 5, device)
    if profile and device.type == "cuda":
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                cycle()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=40), file=sys.stderr)
    metrics = {k: float(v) for k, v in learner.update_cycle().items()}
    return {
        "mode": "graph" if graph else "eager",
        "cycle_ms": round(cycle_ms, 4),
        "act_ms": round(act_ms, 4),
        "warmup_s": round(setup_s, 2),
        "sync_free": sync_free,
        "diagnostics": learner.cuda_graph_diagnostics(),
        "final_metrics": metrics,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.bench.learner_cycle", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--iters", type=int, default=200, help="timed cycles of the graph mode")
    parser.add_argument(
        "--eager-iters", type=int, default=30, help="timed cycles of the eager mode"
    )
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--amp-dtype", choices=["auto", "bf16", "fp32"], default="auto")
    parser.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="algo.use_compile (default true, as in docs/configuration.md §algo-flashsac); --no-compile for the plain graph",
    )
    parser.add_argument("--modes", default="eager,graph")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--profile", action="store_true", help="print a kernel table to stderr")
    parser.add_argument("--json", action="store_true", help="print only the JSON document")
    parser.add_argument("--out", default=None, help="also write the JSON document here")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    cfg = default_algo_cfg(
        num_envs=args.num_envs,
        batch_size=args.batch_size,
        updates_per_step=args.updates,
        amp_dtype=args.amp_dtype,
        use_compile=args.compile,
        learning_starts=max(1, -(-args.batch_size // args.num_envs)),
        replay_buffer_n=max(8, -(-4 * args.batch_size // args.num_envs)),
    ).validate()
    results = []
    for mode in args.modes.split(","):
        graph = mode.strip() == "graph"
        iters = args.iters if graph else args.eager_iters
        results.append(
            run_mode(
                cfg,
                device,
                graph=graph,
                iters=iters,
                warmup=args.warmup,
                profile=args.profile and graph,
            )
        )
    doc = {
        "bench": "learner_cycle",
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "num_envs": args.num_envs,
        "batch_size": args.batch_size,
        "updates_per_step": args.updates,
        "results": results,
    }
    text = json.dumps(doc, indent=2, allow_nan=False)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    if args.json:
        print(text)
    else:
        print(
            f"{'mode':<6} {'cycle_ms':>9} {'act_ms':>8} {'sync_free':>9}  graph/compile/precision"
        )
        for r in results:
            d = r["diagnostics"]
            print(
                f"{r['mode']:<6} {r['cycle_ms']:>9.3f} {r['act_ms']:>8.4f} {r['sync_free']!s:>9}  "
                f"{d['enabled']}/{d['compile']['enabled']}/{d['precision']} {d['disable_reason'] or ''}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
