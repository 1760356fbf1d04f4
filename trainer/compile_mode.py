"""Inductor compiles inside the process that asks for it: no compile-worker pool.

By default inductor starts a pool of compile workers (one process per core, up to 32) at
the first compile and keeps it for the life of the process; on an H200 host that is ~17
processes, ~900 pipe FDs and GBs of RSS beside every compiling process. Shutting that
private pool down from a thread raced with later compiles in the same process ("Attempting
to use a closed pool", "dictionary changed size during iteration"). Instead every process
that compiles (the collector's env, the learner, the probe children, the benches) sets
inductor's own switch for in-process compilation before its first compile, so no pool is
ever created (docs/runtime.md "Compilation").

With warm caches compilation mostly loads cached graphs and kernels, so the pool bought
little; a cold first compile runs its Triton kernel builds one after another instead.
"""

from __future__ import annotations

import os
import sys

COMPILE_THREADS_ENV = "TORCHINDUCTOR_COMPILE_THREADS"
IN_PROCESS_THREADS = 1


def compile_in_process() -> None:
    """Make inductor compile in this process, with no worker pool; call before compiling.

    Sets ``torch._inductor.config.compile_threads = 1``, which inductor reads at every
    compile (``async_compile.get_compile_threads``): with 1 it compiles synchronously and
    never creates its process pool (``AsyncCompile.warm_pool``/``process_pool`` return or
    refuse). The environment variable ``TORCHINDUCTOR_COMPILE_THREADS=1`` is set too, so a
    process this one spawns reads the same setting when it imports inductor. Idempotent; it
    overrides a different value the user may have exported.
    """
    os.environ[COMPILE_THREADS_ENV] = str(IN_PROCESS_THREADS)
    import torch._inductor.config as inductor_config

    inductor_config.compile_threads = IN_PROCESS_THREADS


def compile_threads() -> int | None:
    """Inductor's current ``compile_threads`` (None when inductor's config was never loaded)."""
    config = sys.modules.get("torch._inductor.config")
    return None if config is None else config.compile_threads


MULTI_KERNEL_CACHE_ENV = "TORCHINDUCTOR_DISABLE_MULTI_KERNEL_CACHE"


def skip_multi_kernel_cache() -> None:
    """Make inductor's multi-kernel benchmark its sub-kernels in this process, never read a
    pick saved by an earlier one; call before a multi-kernel compile runs.

    A multi-kernel reads its saved pick under a key hashed from each sub-kernel's Triton
    function. In a process whose kernels come from inductor's warm cache (torch 2.11), those
    functions arrive without the lock the hash takes, so the read raised ``TypeError:
    'NoneType' object does not support the context manager protocol`` and the learner's
    fusion fell back (docs/journal/benchmarks-2026.md, "The warm-process multi-kernel
    failure"). Without the saved pick, each process benchmarks both
    sub-kernels at their first call, which the learner makes before any capture.
    Inductor reads the variable when each multi-kernel is built; the setting is inherited by
    processes this one spawns.
    """
    os.environ[MULTI_KERNEL_CACHE_ENV] = "1"
