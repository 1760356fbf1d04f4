"""What ``g1-soak rejudge`` checks before it believes an artifact (docs/soak.md,
"Re-judging an artifact").

An artifact is a record of what the soak observed and judged; a hand edit can turn a failed
one into a pass. Two checks stand between the two:

- ``content_sha256``: every artifact carries the sha256 of its own canonical JSON (keys
  sorted, no white space, ASCII escapes) without that key, so an edit of any number after
  the write is seen. It is a seal against edits, not a signature: who recomputes it can
  forge it, which the second check limits.
- the run directory (the directory of ``console_log``), when it is still there, is judged
  again exactly as the soak judged it; its findings must be the artifact's. Rejudge then
  uses the run directory's findings, never the artifact's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.jsonio import escape_non_utf8, sanitize
from harness.soak.learning import LearningCfg
from harness.soak.verdict import judge_run_dir

__all__ = ["DIGEST_KEY", "Evidence", "content_digest", "examine", "seal"]

DIGEST_KEY = "content_sha256"


def content_digest(doc: Mapping[str, Any]) -> str:
    """sha256 of ``doc``'s canonical JSON without :data:`DIGEST_KEY`, as it is written
    (non-finite numbers as null, strings UTF-8 can hold: contracts.jsonio), so the digest
    of the document in memory is the digest of the file read back."""
    body, _ = escape_non_utf8(sanitize({k: v for k, v in doc.items() if k != DIGEST_KEY}))
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def seal(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its :data:`DIGEST_KEY` set (the last step before the write)."""
    doc[DIGEST_KEY] = content_digest(doc)
    return doc


@dataclass
class Evidence:
    """What an artifact's judgement may rest on.

    Attributes:
        run_dir_findings: the findings to judge with: the run directory's when it could be
            judged again, else the artifact's.
        trainer_classification: likewise.
        problems: why the artifact is not to be believed, one reason each (empty: it is).
    """

    run_dir_findings: list[dict[str, Any]]
    trainer_classification: str | None
    problems: list[str] = field(default_factory=list)


def examine(artifact: Mapping[str, Any]) -> Evidence:
    """Check ``artifact``'s seal and judge its run directory again (read only)."""
    judgement = artifact["judgement"]
    evidence = Evidence(list(judgement["run_dir_findings"]), judgement["trainer_classification"])
    recorded = artifact.get(DIGEST_KEY)
    if recorded is None:
        evidence.problems.append(
            f"the artifact has no {DIGEST_KEY} (written before artifacts were sealed), so its "
            "samples and findings cannot be verified; re-run the soak"
        )
    elif recorded != content_digest(artifact):
        evidence.problems.append(
            f"the artifact disagrees with its {DIGEST_KEY}: it was edited after the soak "
            "wrote it, so none of its numbers can be trusted"
        )
    _rejudge_run_dir(artifact, evidence)
    return evidence


def _rejudge_run_dir(artifact: Mapping[str, Any], evidence: Evidence) -> None:
    run_dir = Path(artifact["console_log"]).parent
    if not run_dir.is_dir():
        return  # gone (or judged on another machine): the seal alone vouches for it
    verdict = judge_run_dir(
        run_dir, monitor_reasons=[], monitor_classification=None, learning=_learning(artifact)
    )
    found = [{"reason": r, "classification": c} for r, c in verdict.run_dir_findings]
    recorded = [{"reason": f["reason"], "classification": f["classification"]}
                for f in evidence.run_dir_findings]  # fmt: skip
    if found != recorded or verdict.trainer_classification != evidence.trainer_classification:
        evidence.problems.append(
            f"the artifact disagrees with the run directory {run_dir}: judged again it gives "
            f"{_count(found)} (classification {verdict.failure_classification}), the artifact "
            f"records {_count(recorded)}"
        )
    evidence.run_dir_findings = found
    evidence.trainer_classification = verdict.trainer_classification


def _count(findings: list[dict[str, Any]]) -> str:
    return "no finding" if not findings else f"{len(findings)} finding(s)"


def _learning(artifact: Mapping[str, Any]) -> LearningCfg | None:
    section = artifact.get("learning")
    if not isinstance(section, Mapping):
        return None
    thresholds = section.get("thresholds") or {}
    return LearningCfg(
        mode=section["mode"],
        margin=thresholds["margin"],
        min_success_rate=thresholds["min_success_rate"],
        r_mpkpe_tolerance_mm=thresholds["r_mpkpe_tolerance_mm"],
        min_clip_success_rate=thresholds.get("min_clip_success_rate"),
    )
