"""``runtime_manifest`` of a run (docs/runtime.md, "Counters (runtime_manifest)"): limits,
ring and ingress sizes, flight, diagnostics the collector published, threads, CUDA graphs
and the timings of the run and of its startup. Read-only: it reports what exists."""

from __future__ import annotations

import itertools
from typing import Any

import psutil
import torch

from contracts.names import PhaseGroup
from trainer.rundir.summary import null_cuda_process_sharing
from trainer.runtime.inference_ring import FlightSnapshot, InferenceRing
from trainer.runtime.learner_startup import RunParts


class RunManifest:
    """Builds ``runtime_manifest`` from the run's parts (the caller adds the shutdown)."""

    def __init__(self, parts: RunParts) -> None:
        self.ctx = parts.ctx
        self.plan = parts.plan
        self.state = parts.state
        self.resources = parts.resources
        self.collector = parts.collector
        self.pump = parts.pump

    def build(
        self, *, ingress: dict | None, flight: FlightSnapshot | None, shutdown: dict
    ) -> dict[str, Any]:
        ctx, plan, res = self.ctx, self.plan, self.resources
        info = self.collector.info
        sharing = ctx.cuda_process_sharing or null_cuda_process_sharing(
            str(plan.device), str(plan.collector_device)
        )
        out: dict[str, Any] = {
            "inference_ring_capacity": int(ctx.training.inference_slot_capacity),
            "collector_metrics_interval": int(ctx.training.collector_metrics_interval),
            "collector_backend_device": str(plan.collector_device),
            "collector_placement": self.collector.placement,
            "cuda_process_sharing": sharing,
            "shutdown": shutdown,
            "runtime_limits": self._limits(),
            "tensor_memory_budget": res.memory_budget,
        }
        if self.state.resumed_from is not None:
            out["resumed_from"] = dict(self.state.resumed_from)
        if res.ring is not None:
            out.update(self._ring_records())
        if flight is not None:
            out["inference_flight"] = self._flight_record(flight)
        if ingress is not None:
            out["replay_ingress"] = ingress
        if "backend_diagnostics" in info:
            out["backend_diagnostics"] = info["backend_diagnostics"]
        if "motion" in info:
            out["motion"] = info["motion"]
        if res.threads is not None:
            out["cpu_threads"] = self._cpu_threads_record()
        out["cuda_graph"] = {"env": info.get("cuda_graph"), **self._learner_graph()}
        out["timings"] = self._timings()
        return out

    def _limits(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "num_envs": plan.num_envs,
            "warmup_ticks": plan.warmup,
            "max_iterations": plan.max_iterations,
            "start_iteration": self.state.start_iteration,
            "total_ticks": self.state.total_ticks,
            "env_steps_per_sync": int(self.ctx.training.env_steps_per_sync),
            "learner_device": str(plan.device),
        }

    def _ring_records(self) -> dict[str, Any]:
        ring, ingress = self.resources.ring, self.resources.ingress
        assert ring is not None
        return {
            "inference_memory_budget": {
                "ipc_event_count": ring.ipc_event_count,
                "ring_bytes": ring.nbytes,
                "replay_ingress_bytes": ingress.nbytes if ingress is not None else None,
                "replay_ingress_ipc_event_count": ingress.ipc_event_count
                if ingress is not None
                else None,
            },
            "inference_transport": _transport(ring),
        }

    def _flight_record(self, flight: FlightSnapshot) -> dict[str, Any]:
        report = self.pump.last_report or {}
        waiter = self.resources.waiter
        return {
            "queue_depth": flight.queue_depth,
            "publication_lag": flight.publication_lag,
            "in_flight": flight.publication_lag,
            "action_backlog": flight.action_backlog,
            "max_in_flight": int(report.get("Perf/collector_inference_max_in_flight", 0)),
            "max_publication_lag": int(
                report.get("Perf/collector_inference_max_publication_lag", 0)
            ),
            "max_action_backlog": int(report.get("Perf/collector_inference_max_action_backlog", 0)),
            "wait_time_ms": 1000 * waiter.wait_s if waiter is not None else 0.0,
        }

    def _learner_graph(self) -> dict[str, Any]:
        """``cuda_graph.learner`` once the learner exists (a failing probe is recorded)."""
        learner = self.resources.learner
        if learner is None:
            return {}
        try:
            return {"learner": learner.cuda_graph_diagnostics()}
        except Exception as err:  # noqa: BLE001 - diagnostics only
            return {"learner": {"error": f"{type(err).__name__}: {err}"}}

    def _timings(self) -> dict[str, Any]:
        report, final = self.pump.last_report or {}, self.pump.final
        waiter = self.resources.waiter
        return {
            "collector_env_step_ms": report.get("Perf/collector_env_step_ms"),
            "collector_learner_action_wait_ms": report.get("Perf/collector_learner_action_wait_ms"),
            "collector_replay_write_ms": report.get("Perf/collector_replay_write_ms"),
            "learner_inference_ms": final.get("inference_ms"),
            "learner_cycle_host_ms": final.get("cycle_host_ms"),
            "learner_cycle_device_ms": final.get("cycle_device_ms"),
            "learner_wait_s_total": waiter.wait_s if waiter is not None else None,
            **self._startup_timings(),
        }

    def _cpu_threads_record(self) -> dict[str, Any]:
        """``runtime_manifest.cpu_threads``: the plan's basis and the counts in effect."""
        threads = self.resources.threads
        assert threads is not None
        collector = self.collector.info.get("cpu_threads") or {}
        return {
            "cpus": threads.cpus,
            "torch_source": threads.torch_source,
            "learner_torch": torch.get_num_threads(),
            "collector_torch": collector.get("torch"),
            "collector_physics": collector.get("physics"),
        }

    def _startup_timings(self) -> dict[str, Any]:
        """Launch → first iteration and where it went (``timings`` in the manifest).

        Measured from the ``train`` process's own start (``psutil`` create time), so the
        imports and the config/preflight step before the runtime count too.
        """
        state = self.state
        launch_to_runtime = max(0.0, state.start_wall - psutil.Process().create_time())
        phases = {
            name: round(end - begin, 3)
            for (name, begin), (_, end) in itertools.pairwise(state.phase_starts)
            if PhaseGroup.STARTUP.holds(name)
        }
        first, training_start = state.first_iteration_end, state.training_start
        capture = state.learner_capture_s
        return {
            "startup_to_first_iteration_s": (
                launch_to_runtime + first - state.start_mono if first is not None else None
            ),
            "startup": {
                "launch_to_runtime_s": round(launch_to_runtime, 3),
                "phases_s": phases,
                "first_iteration_after_startup_s": (
                    round(first - training_start, 3)
                    if first is not None and training_start is not None
                    else None
                ),
                "learner_capture_s": round(capture, 3) if capture is not None else None,
                "collector": self.collector.info.get("startup"),
            },
        }


def _transport(ring: InferenceRing) -> str:
    """How the ring's slots reach the collector (``inference_transport``)."""
    if not ring.interprocess:
        return "in_process"
    return "cuda_ipc" if ring.is_device_ring else "cpu_shared_memory"
