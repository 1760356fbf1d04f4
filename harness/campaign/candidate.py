"""The candidate of the learning regression check: ``soak-campaign regression --override``.

A change to the algorithm or its defaults is judged side by side with the current recipe:
the check runs once as it is (the baseline) and once with the candidate's trainer overrides,
which are appended to every override set of the check's spec, after the set's own entries
(``harness.campaign.spec``). Each ``--override`` gets the checks a campaign file's
``extra_overrides`` get (syntax, soak-owned and removed keys, no ``algo.seed`` or motion
file) and one more: it may not change the check's protocol (the evaluation points and the
evaluation itself), which ``soak-campaign compare`` needs equal on both sides. Every problem
is a :class:`UsageError` (exit 2) raised before anything starts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from contracts.errors import UsageError
from harness.campaign.spec import CELL_KEYS, SEED_KEY
from harness.soak.invocation import check_overrides, override_key

SAVE_INTERVAL_KEY = "algo.save_interval"
EVAL_PREFIX = "eval."
DOC_KEY = "candidate_overrides"
"""campaign.json's record of the list (absent or [] for the baseline)."""


def is_protocol_key(key: str) -> bool:
    """The evaluation points (``algo.save_interval``) and the evaluation (``eval.*``)."""
    return key == SAVE_INTERVAL_KEY or key.startswith(EVAL_PREFIX)


def check_candidate(overrides: Sequence[str]) -> tuple[str, ...]:
    """The ``--override`` list, checked; one line per problem, naming the value and the fix.

    Raises:
        UsageError: a malformed, soak-owned, removed, seed, motion or protocol key.
    """
    for text in overrides:
        try:
            check_overrides([text])
        except UsageError as err:
            message = str(err).removeprefix(f"--extra-override {text!r} ")
            raise UsageError(f"--override {text!r}: {message}") from err
        key = override_key(text)
        if key in CELL_KEYS:
            what = "seeds" if key == SEED_KEY else "clips"
            raise UsageError(
                f"--override {text!r}: the check sets '{key}' per cell (its {what}); "
                f"drop it, the baseline and the candidate run the same {what}"
            )
        if is_protocol_key(key):
            raise UsageError(
                f"--override {text!r}: '{key}' is the check's evaluation protocol, which the "
                "baseline and the candidate share; change it in a campaign file (--spec) "
                "and run both sides with it"
            )
    return tuple(overrides)


def directory_tag(overrides: Sequence[str]) -> str:
    """``-<8 hex>`` of the list for the default directory name ('' for the baseline), so a
    baseline and candidates started in the same second get different directories."""
    if not overrides:
        return ""
    digest = hashlib.sha256("\n".join(overrides).encode("utf-8")).hexdigest()
    return f"-{digest[:8]}"


def recorded(doc: Mapping[str, Any]) -> list[str]:
    """The candidate overrides a campaign.json records ([] for a baseline or a plain run)."""
    return list(doc.get(DOC_KEY) or [])


def check_same_on_resume(doc: Mapping[str, Any], overrides: Sequence[str], where: str) -> None:
    """``--resume`` continues a campaign with the list it was started with (fail closed).

    Raises:
        UsageError: the lists differ; the message shows both.
    """
    started = recorded(doc)
    if started != list(overrides):
        raise UsageError(
            f"cannot resume {where}: it was started with --override {_shown(started)}, "
            f"not {_shown(overrides)}; pass the same --override list or start a new directory"
        )


def _shown(overrides: Sequence[str]) -> str:
    return "[" + ", ".join(overrides) + "]" if overrides else "[] (none)"
