"""``g1-backend-probe``: phase-local benchmark of the G1 env per physics backend (docs/probe.md).

The parent (this module) never imports torch, mujoco or warp. It validates the flags, checks
the acceptance preconditions, and runs one child process per backend, in sequence:
``sys.executable -m trainer.probe --backends <X> ... --_single-result <tmp> --_quiet``. Around
each child it takes GPU snapshots (before, and after with a bounded quiesce wait in
acceptance mode), then joins the children's results into one 0.3.0 document, validates it and
writes it atomically to ``--output`` — also when a child or an acceptance check failed
(``status: "failed"`` and the reason). stdout holds one line per backend
(``<backend>: <x> env control steps/s; iteration=<ms> ms``) and a table, or with ``--json``
the document itself. Exit codes: 0 passed, 1 acceptance/child failure, 2 bad flags.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from tabulate import tabulate

from contracts import gpu_snapshot as gpus
from contracts.backend_probe import BACKENDS, PHASES
from contracts.cli_app import run_app
from contracts.errors import HarnessError, StrictJsonError, UsageError
from contracts.jsonio import dumps_strict, load_strict
from contracts.paths import absolute, absolute_or_none
from harness.probe.result import build_document, failed_result, finalize, write_document

__all__ = ["BACKENDS", "PHASES", "app", "main", "parse_backends", "run_probe"]

CHILD_MODULE = "trainer.probe"
STDERR_TAIL_LINES = 20

app = typer.Typer(name="g1-backend-probe", add_completion=False, pretty_exceptions_enable=False)


def parse_backends(text: str) -> list[str]:
    """``mjwarp,mujoco`` → ordered list; unknown names, empties and duplicates are usage errors."""
    names = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not name for name in names):
        raise UsageError(
            f"--backends {text!r} has an empty entry; use e.g. --backends mjwarp,mujoco"
        )
    for name in names:
        if name not in BACKENDS:
            raise UsageError(
                f"--backends: unknown backend {name!r}; valid backends: {', '.join(BACKENDS)}"
            )
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise UsageError(
            f"--backends {text!r} names {', '.join(duplicates)} more than once; list each backend once"
        )
    return names


def _child_argv(backend: str, opts: dict[str, Any], single_result: Path) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        CHILD_MODULE,
        "--backends",
        backend,
        "--num-envs",
        str(opts["num_envs"]),
        "--warmup",
        str(opts["warmup"]),
        "--iters",
        str(opts["iters"]),
        "--motion",
        opts["motion"],
        "--_single-result",
        str(single_result),
        "--_quiet",
    ]
    if opts["acceptance"]:
        argv.append("--acceptance")
    return argv


def _run_child(argv: list[str]) -> tuple[int, list[str]]:
    """Run one child; relay its output to stderr live; return (exit code, last lines)."""
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    with proc.stdout:
        for line in proc.stdout:
            sys.stderr.write(line)
            stripped = line.rstrip("\n")
            if stripped.strip():
                tail.append(stripped)
    return proc.wait(), list(tail)


def _reason_from_tail(tail: Sequence[str], code: int) -> str:
    for line in reversed(tail):
        text = line.strip()
        if text.startswith("error:"):
            return text[len("error:") :].strip()
    last = tail[-1].strip() if tail else "no output"
    if code < 0:
        return f"child process killed by signal {-code}; last output: {last}"
    return f"child process exited with status {code}; last output: {last}"


def _probe_backend(backend: str, opts: dict[str, Any]) -> dict[str, Any]:
    """Before-snapshot, child run, after-snapshot for one backend → its result."""
    acceptance = opts["acceptance"]
    before = gpus.take_snapshot()
    if acceptance:
        problem = gpus.validate_snapshot(before, "before-run")
        if problem:
            return failed_result(backend, problem, exit_code=None, before=before)
    with tempfile.TemporaryDirectory(prefix="g1-backend-probe-") as tmp:
        single = Path(tmp) / f"{backend}.json"
        sys.stderr.write(f"probe: {backend}: starting child process\n")
        code, tail = _run_child(_child_argv(backend, opts, single))
        child: dict[str, Any] | None = None
        read_error = None
        if single.is_file():
            try:
                loaded = load_strict(single)
                child = loaded if isinstance(loaded, dict) else None
            except (OSError, StrictJsonError) as err:
                read_error = f"child result unreadable: {err}"
    if acceptance:
        after, waited = gpus.wait_for_idle()
    else:
        after, waited = gpus.take_snapshot(), None
    if child is None or code != 0 or child.get("status") != "passed":
        if child is not None and child.get("failure_reason"):
            reason = str(child["failure_reason"])
        else:
            reason = read_error or _reason_from_tail(tail, code)
        result = failed_result(
            backend, reason, exit_code=code, before=before, after=after, stderr_tail=tail
        )
        if child is not None:
            for key, value in child.items():
                result.setdefault(key, value)
            result["gpu_snapshots"] = {
                **(child.get("gpu_snapshots") or {}),
                "before": before,
                "after": after,
            }
        if acceptance:
            result["after_run_gpu_quiesce_wait_s"] = waited
        return result
    result = dict(child)
    result["exit_code"] = code
    result["gpu_snapshots"] = {
        **(child.get("gpu_snapshots") or {}),
        "before": before,
        "after": after,
    }
    if acceptance:
        result["after_run_gpu_quiesce_wait_s"] = waited
        problem = gpus.validate_snapshot(after, "after-run")
        if problem:
            result["status"] = "failed"
            result["failure_reason"] = problem
    return result


def run_probe(opts: dict[str, Any], argv: Sequence[str]) -> dict[str, Any]:
    """Run every requested backend (stopping at the first failure in acceptance mode) and
    return the finalized document (not yet written)."""
    requested = {
        "backends": list(opts["backends"]),
        "num_envs": opts["num_envs"],
        "warmup": opts["warmup"],
        "iters": opts["iters"],
        "motion": opts["motion"],
    }
    failure: str | None = None
    results: list[dict[str, Any]] = []
    if opts["acceptance"]:
        failure = gpus.profiler_env_failure()
    if failure is None:
        for backend in opts["backends"]:
            result = _probe_backend(backend, opts)
            results.append(result)
            if result["status"] != "passed":
                sys.stderr.write(f"{backend}: failed: {result['failure_reason']}\n")
                if opts["acceptance"]:
                    break  # the GPU state is no longer trustworthy for the next backend
    host_snapshot = gpus.take_snapshot()
    document = build_document(
        argv=argv,
        acceptance=opts["acceptance"],
        requested=requested,
        results=results,
        host_snapshot=host_snapshot,
        failure_reason=failure,
    )
    return finalize(document)


def summary_line(result: dict[str, Any]) -> str:
    """``<backend>: <x> env control steps/s; iteration=<ms> ms`` (interface string)."""
    steps = result["throughput_env_control_steps_per_s"]
    iteration = result["phases"]["iteration_ms"]["mean_ms"]
    return f"{result['backend']}: {steps:.0f} env control steps/s; iteration={iteration:.3f} ms"


def render_table(document: dict[str, Any]) -> str:
    """One row per backend: status, throughput, iteration statistics and the phase means."""
    headers = [
        "backend",
        "status",
        "execution",
        "envs",
        "env steps/s",
        "substeps/s",
        "iter ms",
        "p50",
        "std",
    ]
    headers += [p.removesuffix("_ms") for p in PHASES[:-1]]
    rows = []
    for result in document["results"]:
        if result["status"] != "passed":
            rows.append([result["backend"], "failed", *[""] * (len(headers) - 2)])
            continue
        phases = result["phases"]
        it = phases["iteration_ms"]
        rows.append(
            [
                result["backend"],
                "passed",
                result["tensor_execution"],
                result["num_envs"],
                f"{result['throughput_env_control_steps_per_s']:.0f}",
                f"{result['throughput_physics_substeps_per_s']:.0f}",
                f"{it['mean_ms']:.3f}",
                f"{it['p50_ms']:.3f}",
                f"{it['std_ms']:.3f}",
                *(f"{phases[p]['mean_ms']:.3f}" for p in PHASES[:-1]),
            ]
        )
    table = tabulate(rows, headers=headers, tablefmt="github")
    status = document["status"] + (
        f" ({document['failure_reason']})" if document["failure_reason"] else ""
    )
    return f"{table}\nstatus: {status}\nphase-local: compare backends on env steps/s and iteration ms only; never sum phases\n"


def write_plot(document: dict[str, Any], path: Path) -> bool:
    """PNG bar chart of the mean phase times per backend (matplotlib Agg); False if no data."""
    passed = [r for r in document["results"] if r["status"] == "passed"]
    if not passed:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(passed)
    for i, result in enumerate(passed):
        means = [result["phases"][p]["mean_ms"] for p in PHASES]
        xs = [j + i * width for j in range(len(PHASES))]
        ax.bar(xs, means, width=width, label=f"{result['backend']} ({result['num_envs']} envs)")
    ax.set_xticks([j + width * (len(passed) - 1) / 2 for j in range(len(PHASES))])
    ax.set_xticklabels([p.removesuffix("_ms") for p in PHASES], rotation=30, ha="right")
    ax.set_ylabel("mean ms per control step")
    ax.set_title("g1-backend-probe phases (phase-local; phases are not additive)")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=110)
    plt.close(fig)
    return True


def _checked_paths(output: Path | None, plot: Path | None) -> tuple[Path, Path | None]:
    """``--output`` (required) and ``--plot`` made absolute; neither may be a directory."""
    if output is None:
        raise UsageError(
            "--output PATH is required; e.g. --output artifacts/probe/current-host.json"
        )
    output, plot = absolute(output), absolute_or_none(plot)
    if output.is_dir():
        raise UsageError(f"--output {output} is a directory; name a JSON file inside it")
    if plot is not None and plot.is_dir():
        raise UsageError(f"--plot {plot} is a directory; name a PNG file")
    return output, plot


def _report(document: dict[str, Any], plot: Path | None, *, json_output: bool, quiet: bool) -> None:
    """The summary lines (stderr with --json), the plot, then the table or the JSON."""
    out = sys.stderr if json_output else sys.stdout
    for result in document["results"]:
        if result["status"] == "passed":
            out.write(summary_line(result) + "\n")
    if plot is not None and not write_plot(document, plot):
        sys.stderr.write("warning: --plot skipped: no backend passed\n")
    if json_output:
        sys.stdout.write(dumps_strict(document))
    elif not quiet:
        sys.stdout.write(render_table(document))


def _become_child() -> NoReturn:
    """Child mode of the contract's flag table: become the trainer's child process."""
    argv = [sys.executable, "-m", CHILD_MODULE, *_ARGS]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)


@app.command(
    epilog=(
        "\b\nExamples:\n"
        "  g1-backend-probe --backends mujoco --num-envs 64 --iters 20 \\\n"
        "    --output artifacts/probe/cpu.json\n"
        "  g1-backend-probe --acceptance --output artifacts/probe/h200.json \\\n"
        "    --plot artifacts/probe/h200.png\n\n"
        "Phases, acceptance and the result schema: docs/probe.md. Exit 0 passed, 1 a backend "
        "or an acceptance check failed, 2 usage."
    )
)
def probe(
    backends: Annotated[
        str, typer.Option("--backends", help="Comma list of backends, each once: mjwarp, mujoco.")
    ] = "mjwarp,mujoco",
    num_envs: Annotated[
        int, typer.Option("--num-envs", min=1, help="Parallel envs per backend.")
    ] = 2048,
    warmup: Annotated[
        int, typer.Option("--warmup", min=0, help="Unmeasured iterations first.")
    ] = 20,
    iters: Annotated[
        int, typer.Option("--iters", min=1, help="Measured, synchronized iterations.")
    ] = 100,
    acceptance: Annotated[
        bool,
        typer.Option(
            "--acceptance",
            help="Require a queryable idle GPU before/after each backend and no profiler env.",
        ),
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            help="Result JSON path (schema 0.3.0; relative to the CWD); required.",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the result document as strict JSON instead of the table."
        ),
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also write a PNG bar chart of the phases per backend.",
            show_default=False,
        ),
    ] = None,
    motion: Annotated[
        str,
        typer.Option(
            "--motion", help="Motion clip: synthetic (offline default), dance, or an asset id/path."
        ),
    ] = "synthetic",
    single_result: Annotated[Path | None, typer.Option("--_single-result", hidden=True)] = None,
    quiet: Annotated[bool, typer.Option("--_quiet", hidden=True)] = False,
) -> None:
    """Measure the G1 env alone per physics backend, one isolated process per backend."""
    if single_result is not None:
        _become_child()
    output, plot = _checked_paths(output, plot)
    names = parse_backends(backends)
    opts = {
        "backends": names,
        "num_envs": num_envs,
        "warmup": warmup,
        "iters": iters,
        "acceptance": acceptance,
        "motion": motion,
    }
    try:
        gpus.query_source()
    except ValueError as err:
        raise UsageError(str(err)) from err
    document = run_probe(opts, [sys.argv[0], *_ARGS])
    try:
        write_document(output, document)
    except OSError as err:
        raise HarnessError(f"cannot write --output {output}: {err.strerror or err}") from err
    _report(document, plot, json_output=json_output, quiet=quiet)
    if document["status"] != "passed":
        sys.stderr.write(f"error: {document['failure_reason']}; result written to {output}\n")
        raise typer.Exit(code=1)


_ARGS: list[str] = []


def main(argv: list[str] | None = None) -> int:
    """Console entry point: ``error: ...`` on stderr; exit 0 passed, 1 failed, 2 usage."""
    _ARGS[:] = list(sys.argv[1:] if argv is None else argv)
    return run_app(app, argv, prog="g1-backend-probe")


if __name__ == "__main__":
    sys.exit(main())
