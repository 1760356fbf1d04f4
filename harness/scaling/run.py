"""The scaling sweep's steps in order, judged as each ends, and its document
(``scaling.v1.json``), rewritten atomically and validated after every step."""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contracts.jsonio import write_json_atomic
from contracts.schemas import validate
from harness.scaling import plan, read
from harness.scaling.plan import Part, Sharing, Sweep
from harness.step_runner import Finished, Runner, cumps_argv, exit_reason

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
        problems = [exit_reason(tool, done.rc, done.output), *problems]
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
        """Every step; stopped from outside (Ctrl-C, SIGTERM), the running step's group is
        stopped (the runner), the daemon too, and the document says so before we exit."""
        try:
            return self._run_steps()
        except (KeyboardInterrupt, SystemExit) as stop:
            daemon = self.doc["mps_daemon"]
            if daemon is not None and daemon["stop"] is None:
                self.stop_daemon()  # a daemon left up would serve the next user's processes
            self.doc["status"] = "failed"
            self.doc["failures"] = [
                *failures(self.doc),
                f"the sweep was stopped by {signal_of(stop)}",
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
        self.doc["failures"] = failures(self.doc)
        self.doc["status"] = "failed" if self.doc["failures"] else "passed"
        self.doc["finished_utc"] = _now()
        self.save()
        return self.doc

    def env_alone(self) -> dict[str, Any]:
        if Part.env_alone in self.skip:
            return _step("skipped", gpu=None, versions=None, sizes=[])
        path = self._folder("env_alone") / "env_throughput.json"
        argv = plan.env_alone_argv(self.python, self.sweep, path)
        done = self._run("env alone", argv, "env_alone")
        figures, problems = read.env_alone_figures(path) if done.rc == 0 else ({}, [])
        status, reason = _judged(done, "env_throughput", problems)
        figures = {"gpu": None, "versions": None, "sizes": [], **figures}
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
        done = self._run("cumps start", cumps_argv(self.python, "start"), "cumps")
        status, reason = _judged(done, "cumps start", [])
        self.doc["mps_daemon"] = {"start": _step(status, reason, done.seconds), "stop": None}
        self._noted("cumps start", self.doc["mps_daemon"]["start"])
        self.save()
        return status == "passed"

    def stop_daemon(self) -> None:
        if self.doc["mps_daemon"]["start"]["status"] != "passed":
            self.doc["mps_daemon"]["stop"] = _step("skipped")
            return
        done = self._run("cumps stop", cumps_argv(self.python, "stop"), "cumps")
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


def signal_of(stop: BaseException) -> str:
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
