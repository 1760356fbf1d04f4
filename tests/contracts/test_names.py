"""Every StrEnum in contracts.names spells exactly what the schemas (or the trainer) enumerate."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import pytest

from contracts import names
from contracts.jsonio import dumps_strict
from contracts.schemas import load_schema


def schema_at(schema_name: str, *path: str) -> Any:
    node: Any = load_schema(schema_name)
    for key in path:
        node = node[key]
    return node


BACKEND_ENUMS = [
    ("run_config.v1.json", "properties", "run", "properties", "sim_backend", "enum"),
    ("evaluation.v1.json", "$defs", "protocol", "properties", "sim_backend", "enum"),
    ("campaign.v1.json", "properties", "sims", "propertyNames", "enum"),
    ("campaign_result.v1.json", "$defs", "cell", "properties", "sim", "enum"),
    ("backend_probe.0.3.0.json", "$defs", "result", "properties", "backend", "enum"),
    (
        "backend_probe.0.3.0.json",
        "properties",
        "requested",
        "properties",
        "backends",
        "items",
        "enum",
    ),
]
SHUTDOWN = ("runtime_manifest.v1.json", "$defs", "shutdown", "properties")


def values(enum: type[StrEnum]) -> list[str]:
    return [member.value for member in enum]


@pytest.mark.parametrize("where", BACKEND_ENUMS, ids=lambda w: w[0])
def test_backend_is_every_schemas_sim_backend_enum(where: tuple[str, ...]) -> None:
    assert values(names.Backend) == schema_at(*where)


def test_shutdown_classification_owner_and_the_soak_classification() -> None:
    assert values(names.ShutdownClassification) == schema_at(*SHUTDOWN, "classification", "enum")
    assert values(names.Owner) == schema_at(*SHUTDOWN, "owner", "enum")
    assert values(names.Classification) == schema_at(
        "soak_artifact.0.3.0.json", "$defs", "classification", "enum"
    )


def test_probe_phases_are_the_required_phase_keys_in_order() -> None:
    phases = schema_at("backend_probe.0.3.0.json", "$defs", "result", "properties", "phases")
    assert values(names.ProbePhase) == phases["required"] == list(phases["properties"])


def test_shutdown_phases_are_the_trainers_phases_in_order() -> None:
    from trainer.runtime.shutdown import ALL_PHASES  # pure Python: no torch import

    assert tuple(values(names.ShutdownPhase)) == ALL_PHASES
    for phase in names.ShutdownPhase:
        assert phase.group.holds(phase.value)
    assert not names.PhaseGroup.TRAINING.holds("startup/begin")
    assert not names.PhaseGroup.TRAINING.holds(None)


def test_members_serialize_and_compare_as_their_values() -> None:
    doc = {names.Backend.MUJOCO: names.Classification.TIMEOUT_STALE_TICK}
    assert dumps_strict(doc) == dumps_strict({"mujoco": "timeout/stale_tick"})
    assert names.ShutdownClassification.LEARNER_FAILURE == names.Classification.LEARNER_FAILURE
    assert f"{names.Owner.EXTERNAL}" == "external"
