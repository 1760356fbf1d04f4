"""Every fault scenario runs more than once and must end the same way each time (docs/soak.md,
"Fault injection").

A scenario's outcome is what decides it: the exit code, the status, the exact
classification, the reason text and every finding behind it, whether the artifact validates,
what stopped the trainer and how many of its processes survived. :func:`soak_outcome` takes
it from a soak's artifact, blanking only what two runs of one scenario cannot share: their
directory, process ids, soak id and clock times, and the numbers a check measured (a trend's
slope, the seconds a too-short soak ran). :func:`assert_identical` fails naming each field
that differs between repeats, and the repeat it differs in.

How many times a scenario runs comes from the pytest options ``--fault-repeats`` (default
3) and ``--expensive-fault-repeats`` (default 1: the real-trainer stop and kill scenarios,
20-40 s each; tests/conftest.py), read through the ``fault_repeats`` fixture. A test marked
:func:`repeated` runs its body that many times, each in a directory of its own, and returns
its outcome from each; one after another, or side by side where the scenario's processes,
markers and directories are its own and no check reads a neighbour's load.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from contracts.schemas import validate

Outcome = dict[str, Any]
"""Normalized outcome fields, compared with ``==`` between repeats."""

MEASURING_CHECKS = ("trends", "min_duration")
"""Monitor checks whose reasons quote measured numbers (blanked as ``<n>``)."""

_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?%?")


def repeat_roots(tmp_path: Path, times: int) -> list[Path]:
    """One fresh directory per repeat: ``tmp_path/repeat-<i>``."""
    roots = [tmp_path / f"repeat-{i}" for i in range(times)]
    for root in roots:
        root.mkdir(parents=True)
    return roots


def normalize(
    text: str,
    *,
    root: Path | None = None,
    pids: Iterable[int] = (),
    soak_id: str | None = None,
    numbers: bool = False,
) -> str:
    """``text`` with this run's identities blanked: ``<root>``, ``<pid>``, ``<soak>``,
    ``<time>``, and every number (``<n>``) when ``numbers``."""
    if root is not None:
        text = text.replace(str(root), "<root>")
    if soak_id:
        text = text.replace(soak_id, "<soak>")
    text = _TIME.sub("<time>", text)
    for pid in sorted({int(p) for p in pids}, key=lambda p: -len(str(p))):
        text = re.sub(rf"(?<!\d){pid}(?!\d)", "<pid>", text)
    if numbers:
        text = _NUMBER.sub("<n>", text)
    return text


def artifact_pids(artifact: Mapping[str, Any]) -> set[int]:
    """Every process id the artifact records (sampled processes, residuals, termination)."""
    pids: set[int] = set()
    for sample in artifact.get("samples") or ():
        for proc in (sample.get("process") or {}).get("processes") or ():
            pids.add(int(proc["pid"]))
    for proc in (artifact.get("post_shutdown") or {}).get("residual_processes") or ():
        pids.add(int(proc["pid"]))
    for step in (artifact.get("monitor") or {}).get("termination") or ():
        if ":" in str(step):
            pids.add(int(str(step).split(":", 1)[1]))
    return pids


def soak_outcome(
    artifact: Mapping[str, Any],
    *,
    exit_code: int,
    root: Path,
    survivors: Sequence[int],
    extra_pids: Iterable[int] = (),
) -> Outcome:
    """The outcome of one soak: ``artifact`` as written, ``exit_code`` of the soak command,
    ``root`` the repeat's directory and ``survivors`` the processes of the soak still alive
    after it exited."""
    monitor = artifact.get("monitor") or {}
    soak_id = monitor.get("soak_id")
    pids = artifact_pids(artifact) | set(extra_pids) | set(survivors)

    def norm(text: str | None, *, numbers: bool = False) -> str | None:
        if text is None:
            return None
        return normalize(text, root=root, pids=pids, soak_id=soak_id, numbers=numbers)

    judgement = artifact.get("judgement") or {}
    measured = [
        f["reason"]
        for f in judgement.get("monitor_findings") or ()
        if f.get("check") in MEASURING_CHECKS
    ]
    reason = artifact.get("failure_reason")
    if reason is not None:
        for text in measured:  # blank the measured numbers, keep the rest of the reason exact
            reason = reason.replace(text, normalize(text, numbers=True))
    findings = [
        (
            source,
            finding.get("check"),
            finding.get("classification"),
            norm(finding["reason"], numbers=finding.get("check") in MEASURING_CHECKS),
        )
        for source in ("monitor_findings", "run_dir_findings")
        for finding in judgement.get(source) or ()
    ]
    summary = artifact.get("run_summary")
    shutdown = (summary or {}).get("runtime_manifest", {}).get("shutdown") or {}
    return {
        "exit_code": exit_code,
        "status": artifact.get("status"),
        "classification": artifact.get("failure_classification"),
        "monitor_classification": artifact.get("monitor_failure_classification"),
        "reason": norm(reason),
        "findings": findings,
        "trainer_classification": judgement.get("trainer_classification"),
        "schema_errors": [str(v) for v in validate(dict(artifact), "soak_artifact.0.3.0.json")],
        "trainer_returncode": artifact.get("returncode"),
        "termination": [norm(str(step)) for step in monitor.get("termination") or ()],
        "run_summary_status": None if summary is None else summary.get("status"),
        "shutdown_classification": shutdown.get("classification"),
        "residual_processes": len(
            (artifact.get("post_shutdown") or {}).get("residual_processes") or ()
        ),
        "survivors": len(survivors),
        "trend_verdict": (artifact.get("resource_trends") or {}).get("verdict"),
        "learning_verdict": (artifact.get("learning") or {}).get("verdict"),
    }


def assert_identical(outcomes: Sequence[Outcome], what: str = "the scenario") -> None:
    """Every outcome equals the first; else fail naming each differing field and repeat."""
    first = outcomes[0]
    differences = [
        f"  {key}: repeat 0 {first.get(key)!r}, repeat {i} {outcome.get(key)!r}"
        for i, outcome in enumerate(outcomes[1:], start=1)
        for key in sorted(set(first) | set(outcome))
        if first.get(key) != outcome.get(key)
    ]
    assert not differences, f"{what} ended differently in {len(outcomes)} repeats:\n" + "\n".join(
        differences
    )


def repeated(
    cost: str = "cheap", *, side_by_side: bool = False
) -> Callable[[Callable[..., Outcome]], Callable[..., None]]:
    """Run the decorated test ``fault_repeats.<cost>`` times (``cheap`` or ``expensive``),
    ``tmp_path`` a fresh ``repeat-<i>`` directory each time; the outcomes it returns must be
    identical. Every other fixture is shared by the repeats.

    The repeats run one after another, or with ``side_by_side`` all at once, each in a thread
    of its own: for a body whose processes, markers and directories are its repeat's own,
    that changes no shared state (no ``monkeypatch``, ``capsys`` or working directory) and
    whose checks no neighbour's CPU load can change (a trend read from the first sample can:
    those run one after another). A repeat that fails fails the test once every repeat ended,
    with the first failure in repeat order."""

    def decorate(test: Callable[..., Outcome]) -> Callable[..., None]:
        signature = inspect.signature(test)
        assert "tmp_path" in signature.parameters, f"{test.__name__} takes no tmp_path"

        @functools.wraps(test)
        def run(*args: Any, fault_repeats: Any, **kwargs: Any) -> None:
            roots = repeat_roots(kwargs.pop("tmp_path"), getattr(fault_repeats, cost))

            def one(root: Path) -> Outcome:
                return test(*args, tmp_path=root, **kwargs)

            if side_by_side and len(roots) > 1:
                with ThreadPoolExecutor(len(roots)) as pool:
                    futures = [pool.submit(one, root) for root in roots]
                outcomes = [future.result() for future in futures]
            else:
                outcomes = [one(root) for root in roots]
            assert all(o is not None for o in outcomes), f"{test.__name__} returns no outcome"
            assert_identical(outcomes, test.__name__)

        extra = inspect.Parameter("fault_repeats", inspect.Parameter.KEYWORD_ONLY)
        run.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*signature.parameters.values(), extra], return_annotation=None
        )
        return run

    return decorate
