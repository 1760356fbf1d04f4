"""What the scaling sweep runs: its checked inputs and the command of each of its steps.

Per env count and sharing mode (null: time-sliced; mps: one cumps daemon) a cell runs the
learner profile beside an env of that size (``--variants owner``: the fusions the owner's
config switches on, as in ``train``) and an ordinary ``g1-soak``. The replay capacity is
held at ``replay_rows`` rows, so every size does the same per-iteration work on the same
amount of memory; ``algo.*`` overrides go to both tools.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import UsageError
from contracts.motions import SYNTHETIC_MOTION_ID
from harness.soak.invocation import (
    build_g1_command,
    check_overrides,
    motion_override,
    override_key,
)
from harness.soak.preflight import check_trainer_command
from harness.step_runner import MPS_OVERRIDE

MOTION = "synthetic"
"""Every step's clip: the profile's env beside steps the built-in synthetic dance."""
OWNER_REPLAY_ROWS = 8_388_608
"""The g1 owner's replay capacity: ``algo.replay_buffer_n`` 8192 rows × 1024 envs."""
SWEEP_OWNED = ("algo.num_envs", "algo.replay_buffer_n")


class Sharing(str, enum.Enum):
    """How the learner and the env share the GPU."""

    null = "null"
    mps = "mps"


class Part(str, enum.Enum):
    """What ``--skip`` can leave out."""

    env_alone = "env-alone"
    beside = "beside"
    soak = "soak"


@dataclass(frozen=True)
class Sweep:
    """The checked inputs of one sweep."""

    sizes: tuple[int, ...]
    sharing: tuple[Sharing, ...]
    iterations: int
    replay_rows: int
    sim: str
    overrides: tuple[str, ...]
    cycles: int
    device: str

    def replay_buffer_n(self, num_envs: int) -> int:
        """Rows per env that keep the capacity at ``replay_rows`` (rounded down)."""
        return self.replay_rows // num_envs

    def cells(self) -> list[tuple[Sharing, int]]:
        """Null cells first (no daemon yet), each mode in size order."""
        return [(mode, n) for mode in self.sharing for n in self.sizes]


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(item) for item in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1 or len(set(sizes)) != len(sizes):
        raise UsageError(
            f"--num-envs {text!r} must be a comma list of distinct positive env counts; "
            "use e.g. 1024,2048,4096"
        )
    return sizes


def parse_sharing(text: str, sim: str) -> tuple[Sharing, ...]:
    names = [item.strip() for item in text.split(",")]
    valid = [mode.value for mode in Sharing]
    if not names or any(n not in valid for n in names) or len(set(names)) != len(names):
        raise UsageError(f"--sharing {text!r} must be a comma list of {valid}; use e.g. null,mps")
    modes = tuple(Sharing(n) for n in valid if n in names)
    if Sharing.mps in modes and sim != "mjwarp":
        raise UsageError(f"--sharing mps needs --sim mjwarp, not {sim!r}; use --sharing null")
    return modes


def check_sweep_overrides(overrides: Sequence[str]) -> tuple[str, ...]:
    """``algo.*`` only (the profile takes no other key); the soak's checks; no sweep key."""
    check_overrides(overrides)
    for text in overrides:
        key = override_key(text)
        if not key.startswith("algo."):
            raise UsageError(
                f"--override {text!r} is not an algo.* key; the sweep sets the sharing and the "
                "soak's keys itself"
            )
        if key in SWEEP_OWNED:
            raise UsageError(
                f"--override {text!r}: '{key}' is set by the sweep; use --num-envs or --replay-rows"
            )
    return tuple(overrides)


def check_replay_rows(rows: int, sizes: Sequence[int]) -> None:
    if rows < max(sizes):
        raise UsageError(
            f"--replay-rows {rows} is smaller than --num-envs {max(sizes)}; every env needs at "
            f"least one row (the owner's capacity: {OWNER_REPLAY_ROWS})"
        )


def preflight(sweep: Sweep, scratch: Path) -> None:
    """The trainer's own config check at every size, before anything is measured: a config
    the soaks or the profile would reject fails the sweep in about a second per size.
    ``scratch`` is a run directory path that is inspected, never created."""
    motion, _ = motion_override(MOTION)
    for n in sweep.sizes:
        extras = [motion, f"algo.replay_buffer_n={sweep.replay_buffer_n(n)}", *sweep.overrides]
        command = build_g1_command(
            sim=sweep.sim, num_envs=n, iterations=sweep.iterations, log_dir=scratch, extras=extras
        )
        try:
            check_trainer_command(command)
        except UsageError as err:
            raise UsageError(f"at --num-envs {n}: {err}") from None


def env_alone_argv(python: str, sweep: Sweep, output: Path) -> list[str]:
    argv = [
        python, "-m", "trainer.bench.env_throughput", "--num-envs",
        ",".join(map(str, sweep.sizes)), "--sim", sweep.sim, "--motion-file",
        SYNTHETIC_MOTION_ID, "--output", str(output),
    ]  # fmt: skip
    return argv + (["--device", sweep.device] if sweep.device else [])


def beside_argv(python: str, sweep: Sweep, mode: Sharing, num_envs: int, output: Path) -> list[str]:
    argv = [
        python, "-m", "trainer.bench.learner_profile", "--variants", "owner",
        "--num-envs", str(num_envs), "--beside-env", str(num_envs), "--beside-sim", sweep.sim,
        "--cycles", str(sweep.cycles),
        "--override", f"algo.replay_buffer_n={sweep.replay_buffer_n(num_envs)}",
    ]  # fmt: skip
    for text in sweep.overrides:
        argv += ["--override", text]
    if sweep.device:
        argv += ["--device", sweep.device]
    if mode is Sharing.mps:
        argv.append("--mps")
    return argv + ["--output", str(output)]


def soak_argv(
    python: str, sweep: Sweep, mode: Sharing, num_envs: int, run_dir: Path, artifact: Path
) -> list[str]:
    argv = [
        python, "-m", "harness.soak", "--sim", sweep.sim, "--motion", MOTION,
        "--num-envs", str(num_envs), "--iterations", str(sweep.iterations),
        "--min-duration-seconds", "0", "--log-dir", str(run_dir), "--output", str(artifact),
        "--extra-override", f"algo.replay_buffer_n={sweep.replay_buffer_n(num_envs)}",
    ]  # fmt: skip
    for text in sweep.overrides:
        argv += ["--extra-override", text]
    if mode is Sharing.mps:
        argv += ["--extra-override", MPS_OVERRIDE]
    return argv
