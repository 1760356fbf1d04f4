"""Inductor compiles in-process (trainer/compile_mode.py): no compile-worker pool ever exists.

The pool checks run in fresh interpreters, so nothing pytest or another test compiled
counts. The control case shows that the same check sees a pool when the setting is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch._inductor.config as inductor_config

from trainer.compile_mode import COMPILE_THREADS_ENV, compile_in_process, compile_threads

# What the child prints: its inductor thread setting, the live pools, its child processes.
_REPORT = textwrap.dedent(
    """
    import json, psutil
    from torch._inductor import async_compile
    print(json.dumps({
        "compile_threads": async_compile.get_compile_threads(),
        "pools": len(async_compile._pool_set),
        "children": len(psutil.Process().children(recursive=True)),
    }))
    """
)

_TINY_COMPILE = textwrap.dedent(
    """
    import sys, torch
    from torch._inductor import async_compile
    if sys.argv[1] == "in_process":
        from trainer.compile_mode import compile_in_process
        compile_in_process()
    if sys.argv[2] == "compile":
        f = torch.compile(lambda x: (x * 2).sin() + 1, backend="inductor", dynamic=False)
        assert torch.allclose(f(torch.ones(8)), (torch.ones(8) * 2).sin() + 1)
    # What dynamo's inductor backend asks at every compile, and what every Triton kernel
    # build needs on CUDA: the pool (it is created here unless compilation is in-process).
    async_compile.maybe_warm_pool()
    """
)

# The probe's mujoco child with env.torch_compile: the env compiles its phases at build,
# and the functions it did not run at build compile at their first probe iteration.
_PROBE_MUJOCO_COMPILE = textwrap.dedent(
    """
    import numpy as np, torch
    from trainer import probe
    from trainer.config.loader import load_config
    from trainer.task.g1_tracking import make_env

    motion = "env.commands.motion.motion_file=" + probe.MOTION_ALIASES["synthetic"]
    cfg = load_config(probe.ALGO, probe.TASK, "mujoco", [motion]).task_cfg
    env = make_env(cfg, sim_backend="mujoco", num_envs=4, device="cpu", seed=probe.SEED,
                   backend_options={"num_threads": 1}, compile_backend="inductor")
    assert env.task_compile.enabled, env.task_compile
    clock = probe.PhaseClock(torch.device("cpu"))
    rng = np.random.default_rng(probe.SEED)
    for it in range(3):
        actions = torch.as_tensor(rng.uniform(-1, 1, size=(4, 29)).astype(np.float32))
        scheduled = torch.as_tensor(probe.scheduled_mask(4, it))
        probe.probe_iteration(env, actions, scheduled, clock)
    env.check_health()
    """
)


def _run_child(script: str, *args: str, threads_env: str | None = None) -> dict:
    env = dict(os.environ)
    env.pop(COMPILE_THREADS_ENV, None)
    if threads_env is not None:
        env[COMPILE_THREADS_ENV] = threads_env
    proc = subprocess.run(
        [sys.executable, "-c", script + _REPORT, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_compile_in_process_sets_inductor_and_the_inherited_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(COMPILE_THREADS_ENV, "8")  # a user's value is overridden
    # inductor's config patch, not monkeypatch.setattr: undoing a setattr deletes the entry,
    # and a deleted inductor config key reads as "does not exist" for the rest of the session.
    with inductor_config.patch(compile_threads=8):
        compile_in_process()
        compile_in_process()  # idempotent
        assert inductor_config.compile_threads == 1
        assert compile_threads() == 1
        assert os.environ[COMPILE_THREADS_ENV] == "1"


@pytest.mark.slow
def test_without_the_setting_inductor_starts_a_worker_pool() -> None:
    """Control: the child's check does see inductor's pool when compilation is not in-process."""
    report = _run_child(_TINY_COMPILE, "default", "no-compile", threads_env="2")
    assert report["compile_threads"] == 2
    assert report["pools"] == 1 and report["children"] >= 1


@pytest.mark.slow
def test_a_process_that_compiles_in_process_has_no_worker_pool() -> None:
    # Even with a pool-sized value exported: compile_in_process wins.
    report = _run_child(_TINY_COMPILE, "in_process", "compile", threads_env="2")
    assert report == {"compile_threads": 1, "pools": 0, "children": 0}


@pytest.mark.slow
def test_the_probes_mujoco_child_compiles_its_env_without_a_pool(isolated_cache) -> None:
    """The failing H200 path: the mujoco child compiles its env phases at build and again at
    the first iterations; no pool exists at any point, so none can be closed under it."""
    report = _run_child(_PROBE_MUJOCO_COMPILE, threads_env="2")
    assert report == {"compile_threads": 1, "pools": 0, "children": 0}
