"""Fault injection for the learning verdict: trainers that evaluate their checkpoints and
learn badly, under the real ``soak-run --learning-mode enforce`` (tests/faults/children/
learning.py). Each case asserts the exit code, the exact classification, the reason and a
valid artifact, like the resource faults in test_fault_injection.py (whose helpers and
leftover-process check this module shares)."""

from __future__ import annotations

import pytest

from tests.faults.test_fault_injection import (  # noqa: F401 - the fixture guards this module too
    _no_leftover_processes,
    assert_failed,
    assert_valid,
    run_soak,
)

pytestmark = pytest.mark.slow
"""Every case is a real ``soak-run`` (2.5-4 s each on 2 cores), like test_fault_injection.py."""
ENFORCE = ("--learning-mode", "enforce")


def test_healthy_learning_passes(tmp_path) -> None:
    soak = run_soak(tmp_path, "learning.py", "healthy", extra=ENFORCE)
    assert_valid(soak)
    assert soak.artifact["status"] == "passed", soak.reason
    learning = soak.artifact["learning"]
    assert (learning["mode"], learning["verdict"], learning["findings"]) == (
        "enforce",
        "passed",
        [],
    )
    assert [p["iteration"] for p in learning["evaluation"]["points"]] == [10, 20, 30]
    assert set(learning["losses"]["tags"]) == {
        "Loss/critic",
        "Loss/actor",
        "Loss/entropy",
        "Loss/temperature",
    }


@pytest.mark.parametrize(
    ("case", "extra", "classification", "reason"),
    [
        (
            "declining",
            (),
            "learning_regression",
            (
                "learning regression: final uniform-start R-MPKPE 78.1 mm (iteration 30) is more "
                "than 5.0 % and more than 2 mm above the best point's 12.1 mm (iteration 10)"
            ),
        ),
        (
            "nan_loss",
            (),
            "learning_regression",
            "learning regression: Loss/critic is non-finite (nan) from env step 1600",
        ),
        (
            "null_metric",
            (),
            "learning_regression",
            "learning regression: evaluated metrics are non-finite (null) at iteration 20",
        ),
        (
            "low_success",
            ("--min-success-rate", "0.9"),
            "learning_regression",
            (
                "learning regression: final uniform-start success rate 80.0 % (iteration 30) is "
                "below --min-success-rate 90.0 %"
            ),
        ),
        (
            "no_evaluation",
            (),
            "learning_unverified",
            "learning not verified: run_summary has no evaluation section",
        ),
        (
            "skipped",
            (),
            "learning_unverified",
            "learning not verified: the evaluation was skipped (training.evaluate=false)",
        ),
    ],
)
def test_bad_learning_fails_an_enforcing_soak(
    tmp_path, case: str, extra: tuple[str, ...], classification: str, reason: str
) -> None:
    soak = run_soak(tmp_path, "learning.py", case, extra=(*ENFORCE, *extra))
    assert_failed(soak, classification, reason)
    assert soak.reason.startswith(reason)  # the only failure: resources and run dir are fine
    assert soak.artifact["learning"]["verdict"] == classification.removeprefix("learning_")


def test_low_success_passes_without_a_floor_and_report_mode_records_only(tmp_path) -> None:
    soak = run_soak(tmp_path / "a", "learning.py", "low_success", extra=ENFORCE)
    assert soak.artifact["status"] == "passed", soak.reason
    soak = run_soak(tmp_path / "b", "learning.py", "declining")  # soak-run reports by default
    assert_valid(soak)
    assert soak.artifact["status"] == "passed"
    assert soak.artifact["learning"]["mode"] == "report"
    assert soak.artifact["learning"]["verdict"] == "regression"
