"""``python -m harness.scaling``: end to end and beside-the-env figures per env count and
sharing mode, one table at the end (docs/benchmarks.md "Scaling sweep").

``run`` measures, in order: the env alone at every size (``trainer.bench.env_throughput``);
then per sharing mode (null first; ``cumps start`` before the MPS cells, ``cumps stop``
after) and size: the learner profile beside an env of that size and a ``g1-soak``. Every
step runs from the repository root as ``<python> -m <module>``, continuing past a failing
one; the document ``<out>/scaling.json`` is rewritten (atomically, validated) after each
step, so ``table <out>`` shows a sweep still running. Exit 0 iff every step passed.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from tabulate import tabulate

from contracts.cli_app import EXIT_FAILED, EXIT_OK, run_app
from contracts.errors import UsageError
from contracts.jsonio import dumps_strict, load_strict, write_json_atomic
from contracts.schemas import validate
from harness.scaling import plan, read
from harness.scaling.plan import Part, Sharing, Sweep
from harness.step_runner import Finished, Runner, repo_root, resolve_out

SCHEMA = "scaling.v1.json"
DOC_NAME = "scaling.json"
LOG_NAME = "scaling.log"
STEPS = "steps"
TIMEOUT_S = {"env_alone": 900, "beside": 900, "soak": 1800, "cumps": 60}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _step(status: str, reason: str | None = None, seconds: float = 0.0, **rest: Any) -> dict:
    return {"status": status, "reason": reason, "seconds": round(seconds, 1), **rest}


def _judged(done: Finished, tool: str, problems: list[str]) -> tuple[str, str | None]:
    """``(status, reason)``: failed with the first problem, the exit or the timeout first."""
    if done.timed_out:
        problems = [f"{tool} timed out", *problems]
    elif done.rc != 0:
        errors = [ln for ln in (done.output + done.errors).splitlines() if ln.startswith("error:")]
        tail = f": {errors[-1].removeprefix('error:').strip()}" if errors else ""
        problems = [f"{tool} exited {done.rc}{tail}", *problems]
    return ("failed", "; ".join(problems)) if problems else ("passed", None)


class SweepRun:
    """The steps in order; the document after each one."""

    def __init__(
        self, sweep: Sweep, out: Path, runner: Runner, python: str, skip: set[Part]
    ) -> None:
        self.sweep, self.out, self.runner, self.python, self.skip = (
            sweep, out, runner, python, skip,
        )  # fmt: skip
        self.doc = new_document(sweep)

    def run(self) -> dict[str, Any]:
        """Every step; stopped from outside (Ctrl-C, SIGTERM), the document says so first."""
        try:
            return self._run_steps()
        except (KeyboardInterrupt, SystemExit) as stop:
            self.doc["status"] = "failed"
            self.doc["failures"] = [
                *failures(self.doc),
                f"the sweep was stopped by {_signal_of(stop)}",
            ]
            self.doc["finished_utc"] = _now()
            self.save()
            raise

    def _run_steps(self) -> dict[str, Any]:
        self.save()
        self.doc["env_alone"] = self.env_alone()
        self.save()
        daemon_up = True
        for mode, n in self.sweep.cells():
            if mode is Sharing.mps and self.doc["mps_daemon"] is None:
                daemon_up = self.start_daemon()
            cell = {"num_envs": n, "sharing": mode.value,
                    "replay_buffer_n": self.sweep.replay_buffer_n(n)}  # fmt: skip
            self.doc["cells"].append(cell)
            for part, measure in ((Part.beside, self.beside), (Part.soak, self.soak)):
                if part in self.skip:
                    cell[part.value] = _step("skipped")
                elif not daemon_up and mode is Sharing.mps:
                    cell[part.value] = _step("failed", "no MPS daemon: cumps start failed")
                else:
                    cell[part.value] = measure(mode, n)
                self.save()
        if self.doc["mps_daemon"] is not None:
            self.stop_daemon()
        self.doc["status"] = "failed" if failures(self.doc) else "passed"
        self.doc["failures"] = failures(self.doc)
        self.doc["finished_utc"] = _now()
        self.save()
        return self.doc

    def env_alone(self) -> dict[str, Any]:
        if Part.env_alone in self.skip:
            return _step("skipped", gpu=None, sizes=[])
        path = self._folder("env_alone") / "env_throughput.json"
        argv = plan.env_alone_argv(self.python, self.sweep, path)
        done = self._run("env alone", argv, "env_alone")
        figures, problems = read.env_alone_figures(path) if done.rc == 0 else ({}, [])
        status, reason = _judged(done, "env_throughput", problems)
        figures = {"gpu": None, "sizes": [], **figures}
        return self._noted("env alone", _step(status, reason, done.seconds, **figures))

    def beside(self, mode: Sharing, n: int) -> dict[str, Any]:
        path = self._folder(f"{mode.value}_{n}") / "learner_profile.json"
        argv = plan.beside_argv(self.python, self.sweep, mode, n, path)
        done = self._run(f"{n} {mode.value} beside", argv, "beside")
        figures, problems = read.beside_figures(path, n) if done.rc == 0 else ({}, [])
        status, reason = _judged(done, "learner_profile", problems)
        empty = dict.fromkeys(("device", "cycle_ms", "env_steps_per_s", "env_step_ms"))
        step = _step(status, reason, done.seconds, **{**empty, **figures})
        return self._noted(f"{n} {mode.value} beside", step)

    def soak(self, mode: Sharing, n: int) -> dict[str, Any]:
        folder = self._folder(f"{mode.value}_{n}")
        run_dir, artifact = folder / "run", folder / "soak.json"
        argv = plan.soak_argv(self.python, self.sweep, mode, n, run_dir, artifact)
        done = self._run(f"{n} {mode.value} soak", argv, "soak")
        figures, problems = read.soak_figures(artifact, run_dir)
        if done.rc != 0 and not artifact.exists():  # refused before the launch: its error says why
            problems = []
        status, reason = _judged(done, "g1-soak", problems)
        return self._noted(f"{n} {mode.value} soak", _step(status, reason, done.seconds, **figures))

    def start_daemon(self) -> bool:
        done = self._run("cumps start", plan.cumps_argv(self.python, "start"), "cumps")
        status, reason = _judged(done, "cumps start", [])
        self.doc["mps_daemon"] = {"start": _step(status, reason, done.seconds), "stop": None}
        self._noted("cumps start", self.doc["mps_daemon"]["start"])
        self.save()
        return status == "passed"

    def stop_daemon(self) -> None:
        if self.doc["mps_daemon"]["start"]["status"] != "passed":
            self.doc["mps_daemon"]["stop"] = _step("skipped")
            return
        done = self._run("cumps stop", plan.cumps_argv(self.python, "stop"), "cumps")
        status, reason = _judged(done, "cumps stop", [])
        self.doc["mps_daemon"]["stop"] = self._noted(
            "cumps stop", _step(status, reason, done.seconds)
        )

    def save(self) -> None:
        violations = validate(self.doc, SCHEMA)
        if violations:
            raise RuntimeError(f"the sweep document violates {SCHEMA}: {violations[0]}")
        write_json_atomic(self.out / DOC_NAME, self.doc)

    def _run(self, title: str, argv: list[str], kind: str) -> Finished:
        self.runner.note(f"scaling: {title} ...")
        return self.runner.stream(title, argv, TIMEOUT_S[kind])

    def _noted(self, title: str, step: dict[str, Any]) -> dict[str, Any]:
        self.runner.note(f"scaling: {title}: {step['status']} ({step['seconds']:.0f} s)")
        if step["reason"]:
            self.runner.note(f"scaling:   {step['reason']}")
        return step

    def _folder(self, name: str) -> Path:
        folder = self.out / STEPS / name
        folder.mkdir(parents=True, exist_ok=True)
        return folder


def _signal_of(stop: BaseException) -> str:
    """SIGINT for Ctrl-C, the signal of an exit status 128 + n, else the exception."""
    if isinstance(stop, KeyboardInterrupt):
        return "SIGINT"
    code = stop.code if isinstance(stop, SystemExit) else None
    if isinstance(code, int) and code > 128:
        try:
            return signal.Signals(code - 128).name
        except ValueError:
            pass
    return repr(stop)


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    """``kill`` of a background sweep: stop the running step's group, say so, exit 143."""
    raise SystemExit(128 + signum)


def new_document(sweep: Sweep) -> dict[str, Any]:
    return {
        "tool": "scaling",
        "schema_version": 1,
        "status": "running",
        "failures": [],
        "started_utc": _now(),
        "finished_utc": None,
        "config": {
            "num_envs": list(sweep.sizes),
            "sharing": [mode.value for mode in sweep.sharing],
            "iterations": sweep.iterations,
            "replay_rows": sweep.replay_rows,
            "sim": sweep.sim,
            "motion": plan.MOTION,
            "variant": "owner",
            "overrides": list(sweep.overrides),
            "cycles": sweep.cycles,
            "device": sweep.device or None,
        },
        "env_alone": None,
        "mps_daemon": None,
        "cells": [],
    }


def failures(doc: dict[str, Any]) -> list[str]:
    """``<where>: <reason>`` of every failed step, in the order they ran."""
    found: list[tuple[str, dict | None]] = [("env alone", doc["env_alone"])]
    daemon = doc["mps_daemon"] or {}
    found.append(("cumps start", daemon.get("start")))
    for cell in doc["cells"]:
        where = f"{cell['num_envs']} {cell['sharing']}"
        found += [(f"{where} beside", cell.get("beside")), (f"{where} soak", cell.get("soak"))]
    found.append(("cumps stop", daemon.get("stop")))
    return [
        f"{name}: {step['reason']}" for name, step in found if step and step["status"] == "failed"
    ]


# -- the table ----------------------------------------------------------------------------
HEADERS = [
    "envs", "sharing", "end to end final / tail", "cycle in run ms", "cycle beside ms",
    "env step beside ms (steps/s)", "env step alone ms", "steps",
]  # fmt: skip


ALIGN = ("right", "left", "right", "right", "right", "right", "right", "left")


def _k(rate: float | None) -> str:
    """A rate for the table: thousands above 10k (``122.1k``), else whole steps."""
    if rate is None:
        return "-"
    return f"{rate / 1000:.1f}k" if rate >= 10_000 else f"{rate:,.0f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def cell_status(cell: dict[str, Any]) -> str:
    """failed if a step failed, running while a step is still to come, else the statuses."""
    statuses = [(cell.get(part.value) or {}).get("status") for part in (Part.beside, Part.soak)]
    if "failed" in statuses:
        return "failed"
    if None in statuses:
        return "running"
    return "/".join(sorted(set(statuses)))


def table_rows(doc: dict[str, Any]) -> list[list[str]]:
    alone = {row["num_envs"]: row["step_ms"] for row in (doc["env_alone"] or {}).get("sizes", [])}
    rows = []
    for cell in doc["cells"]:
        soak, beside = cell.get("soak") or {}, cell.get("beside") or {}
        final, tail = soak.get("final_env_steps_per_s"), soak.get("tail_env_steps_per_s")
        rows.append([
            str(cell["num_envs"]),
            cell["sharing"],
            f"{_k(final)} / {_k(tail)}",
            _ms(soak.get("cycle_ms")),
            _ms(beside.get("cycle_ms")),
            f"{_ms(beside.get('env_step_ms'))} ({_k(beside.get('env_steps_per_s'))})",
            _ms(alone.get(cell["num_envs"])),
            cell_status(cell),
        ])  # fmt: skip
    return rows


def render(doc: dict[str, Any], fmt: str) -> str:
    table = tabulate(
        table_rows(doc), headers=HEADERS, tablefmt=fmt, disable_numparse=True, colalign=ALIGN
    )
    head = f"scaling sweep: {doc['status']}"
    gpu = (doc["env_alone"] or {}).get("gpu") or next(
        (c["beside"].get("device") for c in doc["cells"] if (c.get("beside") or {}).get("device")),
        None,
    )
    head += f" ({gpu})" if gpu else ""
    lines = [head, table, *(f"  failed: {f}" for f in doc["failures"])]
    return "\n".join(lines) + "\n"


# -- the command line ---------------------------------------------------------------------
def read_document(out: Path) -> dict[str, Any]:
    path = out / DOC_NAME if out.is_dir() else out
    try:
        doc = load_strict(path)
    except (OSError, ValueError) as err:
        raise UsageError(
            f"{path}: cannot read a sweep document ({err}); pass a sweep's --out"
        ) from None
    violations = validate(doc, SCHEMA)
    if violations:
        raise UsageError(f"{path} is not a {SCHEMA} document: {violations[0]}")
    return doc


app = typer.Typer(
    help="End to end and beside-the-env figures per env count and sharing mode.",
    epilog=(
        "\b\nExamples:\n"
        "  python -m harness.scaling run --out /tmp/scaling\n"
        "  python -m harness.scaling table /tmp/scaling --format github\n"
        '\nThe steps, the columns and the exit codes: docs/benchmarks.md "Scaling sweep".'
    ),
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
)
Fmt = Annotated[str, typer.Option("--format", help="Table style: simple, or github (Markdown).")]
Json = Annotated[bool, typer.Option("--json", help="Print the document instead of the table.")]


def _emit(doc: dict[str, Any], json_output: bool, fmt: str) -> None:
    if fmt not in ("simple", "github"):
        raise UsageError(f"--format {fmt!r} must be simple or github")
    sys.stdout.write(dumps_strict(doc) if json_output else render(doc, fmt))


@app.command(
    "run",
    epilog=(
        "\b\nExamples:\n"
        "  python -m harness.scaling run --out /tmp/scaling\n"
        "  python -m harness.scaling run --num-envs 2048,4096 --skip soak\n"
        "\nA whole sweep takes longer than one 10-minute device call: start it with\n"
        "setsid in the background and read it with `table`, finished or not."
    ),
)
def run_command(
    num_envs: Annotated[str, typer.Option(help="Comma list of env counts.")] = "1024,2048,4096",
    sharing: Annotated[str, typer.Option(help="Comma list of null, mps.")] = "null,mps",
    iterations: Annotated[int, typer.Option(min=1, help="Each soak's iterations.")] = 1500,
    replay_rows: Annotated[
        int, typer.Option(min=1, help="Replay capacity held at every size (rows).")
    ] = plan.OWNER_REPLAY_ROWS,
    sim: Annotated[str, typer.Option(help="mjwarp (GPU) or mujoco (CPU).")] = "mjwarp",
    override: Annotated[
        list[str] | None,
        typer.Option(help="algo.KEY=VALUE for the profile and the soak; repeatable."),
    ] = None,
    cycles: Annotated[int, typer.Option(min=1, help="Profile cycles timed per cell.")] = 200,
    device: Annotated[
        str,
        typer.Option(help="Torch device of the profile and the env benchmark (default: theirs)."),
    ] = "",
    skip: Annotated[
        list[Part] | None, typer.Option("--skip", help="Leave a part out (repeatable).")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output directory (default: $OUT if set, else a new temp dir).", show_default=False
        ),
    ] = None,
    fmt: Fmt = "simple",
    json_output: Json = False,
) -> None:
    """Run the sweep, print one table last; exit 1 if any step failed."""
    if sim not in ("mjwarp", "mujoco"):
        raise UsageError(f"--sim {sim!r} must be mjwarp or mujoco")
    sizes = plan.parse_sizes(num_envs)
    plan.check_replay_rows(replay_rows, sizes)
    sweep = Sweep(
        sizes, plan.parse_sharing(sharing, sim), iterations, replay_rows, sim,
        plan.check_sweep_overrides(override or []), cycles, device,
    )  # fmt: skip
    if fmt not in ("simple", "github"):
        raise UsageError(f"--format {fmt!r} must be simple or github")
    plan.preflight(sweep, Path(tempfile.gettempdir()) / f"scaling-preflight-{os.getpid()}" / "run")
    out = resolve_out(out, "scaling-", (DOC_NAME, LOG_NAME, STEPS))

    def note(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    with open(out / LOG_NAME, "w", encoding="utf-8") as log:
        runner = Runner(log, repo_root(), note)
        doc = SweepRun(sweep, out, runner, sys.executable, set(skip or [])).run()
    _emit(doc, json_output, fmt)
    raise typer.Exit(EXIT_FAILED if doc["status"] == "failed" else EXIT_OK)


@app.command(
    "table",
    epilog=(
        "\b\nExamples:\n"
        "  python -m harness.scaling table /tmp/scaling\n"
        "  python -m harness.scaling table /tmp/scaling/scaling.json --json"
    ),
)
def table_command(
    out: Annotated[Path, typer.Argument(help="A sweep's --out (or its scaling.json).")],
    fmt: Fmt = "simple",
    json_output: Json = False,
) -> None:
    """Print a sweep's table, finished or still running; exit 1 if a step failed."""
    doc = read_document(out)
    _emit(doc, json_output, fmt)
    raise typer.Exit(EXIT_FAILED if doc["status"] == "failed" else EXIT_OK)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: exit 0 passed (or running), 1 a step failed, 2 usage."""
    return run_app(app, argv, prog="python -m harness.scaling", failures={RuntimeError: str})


if __name__ == "__main__":
    sys.exit(main())
