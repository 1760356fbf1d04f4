"""The GPU smoke's steps: their commands and how each one's outputs are judged.

Every tool runs as ``<python> -m <module>``, so the smoke works with or without the console
scripts installed (a uv checkout or the device's system Python, from the repository root).
The judging functions read only files and captured text, so fixture logs test them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from contracts import rundir
from contracts.backend_probe import BACKENDS
from harness.smoke import parse
from harness.step_runner import exit_reason

PROBE_ARGS = (
    "--backends", "mjwarp,mujoco", "--num-envs", "2048", "--warmup", "20", "--iters", "100",
    "--acceptance",
)  # fmt: skip
"""The probe's canonical command (docs/probe.md)."""
SOAK_NUM_ENVS = 1024
SOAK_ITERATIONS = 2000
THREAD_OVERRIDE = "training.collector_placement=thread"
METRICS_LAST = 20


@dataclass
class Outcome:
    """One row of the smoke's table.

    Attributes:
        step: the step's name.
        status: ``passed``, ``failed`` or ``skipped``.
        key: the step's key figures for a person (rates, verdict, counts).
        ipc_warning: whether torch's CUDA IPC warning was in the step's console (None: the
            step has no console of its own to check).
        seconds: wall time of the step.
        problems: why it failed (empty when it passed).
        data: the parsed figures, for ``--json``.
    """

    step: str
    status: str
    key: str = "-"
    ipc_warning: bool | None = None
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == "failed"


def judged(step: str, problems: list[str], **kwargs: Any) -> Outcome:
    """An outcome that passed iff there are no problems."""
    return Outcome(step, "failed" if problems else "passed", problems=problems, **kwargs)


def _read_json(path: Path) -> tuple[Any, str | None]:
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except (OSError, ValueError) as err:
        return None, f"cannot read {path}: {err}"


# -- probe -------------------------------------------------------------------------------
def probe_argv(python: str, output: Path) -> list[str]:
    return [python, "-m", "harness.probe.cli", *PROBE_ARGS, "--output", str(output)]


def judge_probe(rc: int, console: str, output: Path) -> Outcome:
    """Passed iff the probe exited 0 and its document passed for both backends."""
    problems = [] if rc == 0 else [f"g1-backend-probe exited {rc}"]
    doc, err = _read_json(output)
    rates: dict[str, float | None] = {}
    if err is not None:
        problems.append(err)
    else:
        rates = parse.probe_rates(doc)
        if doc.get("status") != "passed":
            problems.append(f"probe status {doc.get('status')!r}: {doc.get('failure_reason')}")
        problems += [f"{b}: no passed result" for b in BACKENDS if rates.get(b) is None]
    key = ", ".join(f"{b} {parse.rate_text(rates.get(b))}" for b in BACKENDS) + " env steps/s"
    return judged(
        "probe",
        problems,
        key=key,
        ipc_warning=parse.has_ipc_warning(console),
        data={"env_control_steps_per_s": rates},
    )


# -- soak --------------------------------------------------------------------------------
def soak_argv(
    python: str, run_dir: Path, artifact: Path, overrides: Sequence[str] = ()
) -> list[str]:
    argv = [
        python, "-m", "harness.soak", "--sim", "mjwarp", "--motion", "synthetic",
        "--num-envs", str(SOAK_NUM_ENVS), "--iterations", str(SOAK_ITERATIONS),
        "--min-duration-seconds", "0", "--log-dir", str(run_dir), "--output", str(artifact),
    ]  # fmt: skip
    for override in overrides:
        argv += ["--extra-override", override]
    return argv


def judge_soak(step: str, rc: int, run_dir: Path, artifact: Path) -> Outcome:
    """Passed iff the soak passed, its console has no IPC warning and its rate line is sane."""
    problems = [] if rc == 0 else [f"g1-soak exited {rc}"]
    doc, err = _read_json(artifact)
    verdict = None
    if err is not None:
        problems.append(err)
    else:
        verdict = doc.get("status")
        if verdict != "passed":
            problems.append(f"soak {verdict}: {doc.get('failure_reason')}")
    try:
        console = (run_dir / rundir.SOAK_CONSOLE_LOG).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        console = ""
        problems.append(f"cannot read the soak console: {exc}")
    ipc = parse.has_ipc_warning(console)
    if ipc:
        problems.append(f"the soak console has torch's warning {parse.CUDA_IPC_WARNING!r}")
    try:  # lenient: a failed soak's rates are still shown
        summary = rundir.read(run_dir / rundir.RUN_SUMMARY, lenient=True)
    except rundir.DocumentError:
        summary = None
    summary = summary if isinstance(summary, dict) else {}
    tail = summary.get("tail_env_steps_per_sec")
    run_rate = summary.get("steady_env_steps_per_sec")
    rates = parse.check_rates(parse.train_rates(console), tail)
    if not rates.sane:
        problems.append(f"rate line: {rates.reason}")
    key = (
        f"soak {verdict or '-'}; train: {parse.rate_text(rates.median)} env steps/s "
        f"({len(rates.steady)} steady of {rates.lines} lines, tail {parse.rate_text(tail)}, "
        f"{'sane' if rates.sane else 'NOT sane'}); device-timed {parse.rate_text(run_rate)}"
    )
    data = {
        "verdict": verdict,
        "train_line_median_env_steps_per_s": rates.median,
        "train_line_steady": list(rates.steady),
        "tail_env_steps_per_sec": tail,
        "steady_env_steps_per_sec": run_rate,
        "rate_sane": rates.sane,
    }
    return judged(step, problems, key=key, ipc_warning=ipc, data=data)


# -- cumps, metrics, pytest ----------------------------------------------------------------
def judge_command(step: str, rc: int, what: str, output: str = "") -> Outcome:
    return judged(step, [] if rc == 0 else [exit_reason(what, rc, output)])


def metrics_argv(python: str, run_dir: Path) -> list[str]:
    return [
        python,
        "-m",
        "harness.metrics.cli",
        str(run_dir),
        "--last",
        str(METRICS_LAST),
        "--json",
    ]


def judge_metrics(step: str, rc: int, stdout: str, stderr: str = "") -> Outcome:
    """Passed iff extract-metrics exited 0 with a JSON object; the key is its steps/s row."""
    if rc != 0:
        return judged(step, [exit_reason("extract-metrics", rc, stderr)])
    try:
        rows = json.loads(stdout)
    except ValueError as err:
        return judged(step, [f"extract-metrics printed no JSON: {err}"])
    if not isinstance(rows, dict):
        return judged(step, ["extract-metrics printed JSON that is not an object"])
    rate = rows.get("steps_per_sec")
    key = f"steps_per_sec {parse.rate_text(rate)} (mean of the last {METRICS_LAST})"
    return judged(step, [], key=key, data={"rows": rows})


PYTEST_DURATIONS = 10
"""The slowest GPU tests the smoke's log lists (the suite is the smoke's longest step)."""


def pytest_argv(python: str) -> list[str]:
    return [python, "-m", "pytest", "-m", "gpu", "-q", f"--durations={PYTEST_DURATIONS}"]


def judge_pytest(rc: int, output: str) -> Outcome:
    """Passed iff pytest exited 0 and at least one GPU test ran and passed."""
    counts = parse.pytest_counts(output)
    problems = [] if rc == 0 else [f"pytest exited {rc}"]
    # pytest's short summary names each module or test that errored ("ERROR tests/x.py").
    errored = [line.split()[1] for line in output.splitlines() if line.startswith("ERROR ")]
    if errored:
        problems.append(
            f"errors in {', '.join(errored[:3])}" + (" ..." if len(errored) > 3 else "")
        )
    elif not counts.get("passed"):
        problems.append("no GPU test passed (is CUDA visible?)")
    shown = [f"{n} {word}" for word, n in counts.items() if word != "deselected"]
    slowest = parse.pytest_durations(output)
    if slowest:
        shown.append(f"slowest test {slowest[0].seconds:.0f} s")  # the log names them all
    data = {"counts": counts, "slowest": [asdict(row) for row in slowest]}
    return judged("pytest -m gpu", problems, key=", ".join(shown) or "-", data=data)
