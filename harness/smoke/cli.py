"""``python -m harness.smoke`` (``scripts/gpu_smoke.sh``): the GPU smoke, one table at the end.

Runs, in order, continuing past a failing step: the probe's canonical command; ``g1-soak``
at 1024 envs x 2,000 iterations in null mode, then ``extract-metrics`` on it; the same with
the collector as a thread of ``train`` (``training.collector_placement=thread``); ``cumps
start``, the same soak in MPS mode, ``cumps stop``, ``extract-metrics`` on it; ``pytest -m
gpu``. Every step's output goes to ``<out>/smoke.log``; the bulky artifacts (run
directories, soak and probe JSON) to ``<out>/artifacts/steps/<step>/``. Exit 0 iff every
step that ran passed (docs/benchmarks.md "GPU smoke").
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from tabulate import tabulate

from contracts.cli_app import EXIT_FAILED, EXIT_OK, run_app
from contracts.jsonio import dumps_strict
from harness.smoke import steps
from harness.smoke.steps import Outcome
from harness.step_runner import (
    MPS_OVERRIDE,
    Finished,
    Runner,
    cumps_argv,
    repo_root,
    resolve_out,
)

LOG_NAME = "smoke.log"
ARTIFACTS = Path("artifacts") / "steps"  # two levels down: the device returns none of it
TIMEOUT_S = {"probe": 300, "soak": 360, "cumps": 60, "metrics": 120, "pytest": 1200}


class Part(str, enum.Enum):
    """What ``--skip`` can leave out."""

    probe = "probe"
    null = "null"
    thread = "thread"
    mps = "mps"
    pytest = "pytest"


class Smoke:
    """The steps in order, each judged as soon as it finished (steps.py)."""

    def __init__(self, out: Path, runner: Runner, python: str) -> None:
        self.art = out / ARTIFACTS
        self.runner = runner
        self.python = python
        self.outcomes: list[Outcome] = []

    def run(self, skip: set[Part]) -> list[Outcome]:
        """Every part not in ``skip``, continuing past failures; skipped parts get a row."""
        if Part.probe in skip:
            self.outcomes.append(Outcome("probe", "skipped"))
        else:
            self.probe()
        for part in (Part.null, Part.thread, Part.mps):
            if part in skip:
                self.outcomes += [Outcome(f"soak {part.value}", "skipped")]
                self.outcomes += [Outcome(f"metrics {part.value}", "skipped")]
            else:
                self.soak(part)
        if Part.pytest in skip:
            self.outcomes.append(Outcome("pytest -m gpu", "skipped"))
        else:
            self.pytest()
        return self.outcomes

    def probe(self) -> None:
        doc = self._folder("probe") / "probe.json"
        argv = steps.probe_argv(self.python, doc)
        self._step("probe", "probe", argv, lambda d: steps.judge_probe(d.rc, d.output, doc))

    def soak(self, part: Part) -> None:
        """cumps start (MPS), the soak, cumps stop (MPS), extract-metrics on the run."""
        mode, mps = part.value, part is Part.mps
        if mps and self._command("cumps start", cumps_argv(self.python, "start")).failed:
            self.outcomes.append(Outcome("soak mps", "failed", problems=["cumps start failed"]))
            self.outcomes.append(Outcome("metrics mps", "skipped"))
            return
        folder = self._folder(f"soak_{mode}")
        run_dir, artifact = folder / "run", folder / "soak.json"
        name = f"soak {mode}"
        overrides = {Part.mps: [MPS_OVERRIDE], Part.thread: [steps.THREAD_OVERRIDE]}
        argv = steps.soak_argv(self.python, run_dir, artifact, overrides.get(part, []))
        self._step(name, "soak", argv, lambda d: steps.judge_soak(name, d.rc, run_dir, artifact))
        if mps:
            self._command("cumps stop", cumps_argv(self.python, "stop"))
        name_m = f"metrics {mode}"
        argv = steps.metrics_argv(self.python, run_dir)
        judge = lambda d: steps.judge_metrics(name_m, d.rc, d.output, d.errors)
        self._step(name_m, "metrics", argv, judge, captured=True)

    def pytest(self) -> None:
        argv = steps.pytest_argv(self.python)
        self._step("pytest -m gpu", "pytest", argv, lambda d: steps.judge_pytest(d.rc, d.output))

    def _command(self, name: str, argv: list[str]) -> Outcome:
        judge = lambda d: steps.judge_command(name, d.rc, name, d.output)
        return self._step(name, "cumps", argv, judge)

    def _folder(self, name: str) -> Path:
        folder = self.art / name
        folder.mkdir(parents=True)
        return folder

    def _step(
        self,
        name: str,
        kind: str,
        argv: list[str],
        judge: Callable[[Finished], Outcome],
        *,
        captured: bool = False,
    ) -> Outcome:
        timeout = TIMEOUT_S[kind]
        run = self.runner.capture if captured else self.runner.stream
        done = run(name, argv, timeout)
        outcome = judge(done)
        outcome.seconds = round(done.seconds, 1)
        if done.timed_out:
            outcome.status = "failed"
            outcome.problems.insert(0, f"timed out after {timeout} s")
        self.runner.note(f"smoke: {name}: {outcome.status} ({outcome.seconds:.0f} s)")
        for problem in outcome.problems:
            self.runner.note(f"smoke:   {problem}")
        self.outcomes.append(outcome)
        return outcome


def render_table(outcomes: Sequence[Outcome]) -> str:
    """The one summary table: step, status, key figures, IPC warning, seconds."""
    rows = [
        [
            o.step,
            o.status,
            o.key,
            "-" if o.ipc_warning is None else ("YES" if o.ipc_warning else "no"),
            f"{o.seconds:.0f}",
        ]
        for o in outcomes
    ]
    return tabulate(rows, headers=["step", "status", "key figures", "IPC warning", "s"]) + "\n"


def verdict_line(outcomes: Sequence[Outcome], log: Path) -> str:
    failed = [o.step for o in outcomes if o.failed]
    status = f"FAILED ({', '.join(failed)})" if failed else "passed"
    return f"GPU smoke: {status}; log: {log}"


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def smoke(
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Log directory (default: $OUT if set, else a new temp dir).",
            show_default=False,
        ),
    ] = None,
    skip: Annotated[
        list[Part] | None, typer.Option("--skip", help="Leave a part out (repeatable).")
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the results as strict JSON instead of the table.")
    ] = False,
) -> None:
    """Run the GPU smoke and print one summary table last; exit 1 if any step failed.

    Example (repository root, on the GPU machine): scripts/gpu_smoke.sh --out /tmp/smoke
    """
    out = resolve_out(out, "gpu-smoke-", (LOG_NAME, ARTIFACTS.parts[0]))
    log_path = out / LOG_NAME

    def note(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    with open(log_path, "w", encoding="utf-8") as log:
        runner = Runner(log, repo_root(), note)
        outcomes = Smoke(out, runner, sys.executable).run(set(skip or []))
        table = render_table(outcomes)
        log.write(f"\n{verdict_line(outcomes, log_path)}\n{table}")
    if json_output:
        doc = {
            "status": "failed" if any(o.failed for o in outcomes) else "passed",
            "log": str(log_path),
            "steps": [asdict(o) for o in outcomes],
        }
        sys.stdout.write(dumps_strict(doc))
    else:
        sys.stdout.write(f"{verdict_line(outcomes, log_path)}\n{table}")
    raise typer.Exit(EXIT_FAILED if any(o.failed for o in outcomes) else EXIT_OK)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: exit 0 passed, 1 a step failed, 2 usage."""
    return run_app(app, argv, prog="python -m harness.smoke")


if __name__ == "__main__":
    sys.exit(main())
