"""How many threads each process of a CPU run gets (docs/runtime.md, "CPU threads").

A CPU training run has three thread pools: the learner's torch intra-op pool, the
collector's torch pool and MuJoCo's physics pool (``mujoco.batch``). Left alone, each is
sized to every CPU, and they run at the same time (the learner updates while the collector
steps the env). torch's OpenMP workers spin while they wait and every parallel region waits
for its slowest worker, so a pool that shares its cores with another pool, or with another
program, stalls (docs/journal/benchmarks-2026.md, "CPU threads": on 2 CPUs the quick start used half the
CPU time once the pools stopped overlapping). So each pool gets its own share of the CPUs
this process may run on (``os.sched_getaffinity``):

* learner with CPU tensors: torch threads ``max(1, cpus // 2)``;
* collector with CPU tensors: torch threads 1 (its per-tick tensors are a few hundred
  columns wide; the physics is where its time goes);
* collector physics (``mujoco`` backend): the CPUs the learner's torch pool leaves,
  ``max(1, cpus - learner)``, or every CPU when the learner runs on CUDA;
* the backend probe (one process, ``mujoco`` with CPU tensors): torch threads 1, physics
  every CPU;
* a process whose tensors live on CUDA keeps torch's default (its torch work is on the GPU).

Overrides: ``taskset``/``numactl`` narrow the affinity mask the rule starts from, and a set
``OMP_NUM_THREADS`` (torch's own setting) fixes the torch threads of every process instead
of the rule; the physics share then still follows the rule, with the learner's share read
from ``OMP_NUM_THREADS``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from contracts.names import Backend

OMP_ENV = "OMP_NUM_THREADS"

TorchSource = Literal["rule", "OMP_NUM_THREADS", "torch_default"]


def affinity_cpus() -> int:
    """CPUs this process may run on (``os.sched_getaffinity``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def omp_threads(environ: Mapping[str, str]) -> int | None:
    """``OMP_NUM_THREADS`` as a positive int, None when unset or blank.

    Raises:
        ValueError: set to something else (torch would ignore it with only a warning).
    """
    text = environ.get(OMP_ENV, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(
            f"{OMP_ENV}={text!r} must be a positive integer; unset it to let the trainer "
            "choose the thread counts (docs/runtime.md, CPU threads)"
        )
    return value


@dataclass(frozen=True)
class ThreadPlan:
    """The chosen thread counts of one run; None keeps the library default.

    Attributes:
        cpus: CPUs in the affinity mask the rule started from.
        torch_source: ``rule``, ``OMP_NUM_THREADS`` (torch follows the variable itself) or
            ``torch_default`` (no process of the run has CPU tensors).
        learner_torch, collector_torch: intra-op threads to set (None: leave torch's).
        collector_physics: MuJoCo physics threads of the ``mujoco`` backend (None: not a
            ``mujoco`` run, or the backend's own default of every CPU).
    """

    cpus: int
    torch_source: TorchSource
    learner_torch: int | None
    collector_torch: int | None
    collector_physics: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _is_cpu(device: str) -> bool:
    return str(device).split(":")[0] == "cpu"


def plan_training_threads(
    *,
    learner_device: str,
    collector_device: str,
    sim_backend: str,
    cpus: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> ThreadPlan:
    """The thread counts of the learner and the collector of one training run (module doc).

    Raises:
        ValueError: ``OMP_NUM_THREADS`` is set but not a positive integer.
    """
    cpus = affinity_cpus() if cpus is None else cpus
    omp = omp_threads(os.environ if environ is None else environ)
    learner_cpu, collector_cpu = _is_cpu(learner_device), _is_cpu(collector_device)
    learner_share = max(1, cpus // 2) if learner_cpu else 0
    if omp is not None:
        source: TorchSource = "OMP_NUM_THREADS"
        learner_torch = collector_torch = None
        learner_share = min(omp, cpus - 1) if learner_cpu else 0
    elif learner_cpu or collector_cpu:
        source = "rule"
        learner_torch = learner_share if learner_cpu else None
        collector_torch = 1 if collector_cpu else None
    else:
        source, learner_torch, collector_torch = "torch_default", None, None
    physics = max(1, cpus - learner_share) if sim_backend == Backend.MUJOCO else None
    return ThreadPlan(
        cpus=cpus,
        torch_source=source,
        learner_torch=learner_torch,
        collector_torch=collector_torch,
        collector_physics=physics,
    )


def plan_probe_threads(*, device: str, environ: Mapping[str, str] | None = None) -> int | None:
    """Torch threads of a backend-probe child: 1 with CPU tensors (the physics pool keeps
    every CPU), None (torch's default) on CUDA or when ``OMP_NUM_THREADS`` is set.

    Raises:
        ValueError: ``OMP_NUM_THREADS`` is set but not a positive integer.
    """
    if omp_threads(os.environ if environ is None else environ) is not None:
        return None
    return 1 if _is_cpu(device) else None


def apply_torch_threads(count: int | None) -> int:
    """Set torch's intra-op threads (None leaves them); returns the count now in effect."""
    import torch

    if count is not None:
        torch.set_num_threads(count)
    return torch.get_num_threads()
