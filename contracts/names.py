"""The closed sets of names the JSON files use, as StrEnums (docs/schemas.md).

Each enum's values equal the corresponding ``enum`` in ``schemas/`` (tests/contracts checks
it), so code spells a classification or a backend once. Members are ``str``: they compare
equal to, hash like and serialize as their value.
"""

from __future__ import annotations

from enum import StrEnum


class Backend(StrEnum):
    """A simulator backend (``run_config.run.sim_backend``, ``--sim``)."""

    MJWARP = "mjwarp"
    MUJOCO = "mujoco"


class ShutdownClassification(StrEnum):
    """How a training process ended (``runtime_manifest.shutdown.classification``)."""

    NORMAL_COMPLETION = "normal_completion"
    LEARNER_FAILURE = "learner_failure"
    COLLECTOR_FAILURE = "collector_failure"
    BACKEND_WORKER_FAILURE = "backend_worker_failure"
    TIMEOUT_STALE_TICK = "timeout/stale_tick"
    EXTERNAL_CANCELLATION = "external_cancellation"
    UNKNOWN_FAILURE = "unknown_failure"


class Classification(StrEnum):
    """Why a soak failed (``soak_artifact.failure_classification``; docs/troubleshooting.md).

    The shutdown classifications other than ``normal_completion`` come first, in the same
    order, then the ones only the soak harness assigns.
    """

    LEARNER_FAILURE = "learner_failure"
    COLLECTOR_FAILURE = "collector_failure"
    BACKEND_WORKER_FAILURE = "backend_worker_failure"
    TIMEOUT_STALE_TICK = "timeout/stale_tick"
    EXTERNAL_CANCELLATION = "external_cancellation"
    UNKNOWN_FAILURE = "unknown_failure"
    TIMEOUT_STARTUP = "timeout/startup"
    MONITOR_FAILURE = "monitor_failure"
    RESOURCE_LEAK = "resource_leak"
    MISSING_RUN_SUMMARY = "missing_run_summary"
    INVALID_RUN_SUMMARY = "invalid_run_summary"
    SCHEMA_VIOLATION = "schema_violation"
    SHUTDOWN_CONTRACT_VIOLATION = "shutdown_contract_violation"
    ACCELERATION_FALLBACK = "acceleration_fallback"
    LEARNING_REGRESSION = "learning_regression"
    LEARNING_UNVERIFIED = "learning_unverified"
    TOO_SHORT = "too_short"
    """The run was sound but ended before ``--min-duration-seconds``."""
    LAUNCH_FAILURE = "launch_failure"
    """The trainer command could not be started (not found, not executable)."""


class Owner(StrEnum):
    """Which side a shutdown is attributed to (``runtime_manifest.shutdown.owner``)."""

    LEARNER = "learner"
    COLLECTOR = "collector"
    EXTERNAL = "external"
    UNKNOWN = "unknown"


class PhaseGroup(StrEnum):
    """The prefix of every shutdown/progress phase (``startup/...``, ``training/...``, ...)."""

    STARTUP = "startup"
    TRAINING = "training"
    FINALIZE = "finalize"

    def holds(self, phase: object) -> bool:
        """True when ``phase`` (any JSON value) is a phase of this group."""
        return isinstance(phase, str) and phase.startswith(f"{self.value}/")


class ShutdownPhase(StrEnum):
    """A learner phase (``runtime_manifest.shutdown.phase``, ``progress.jsonl`` ``phase``),
    in the order a run passes through them; a normal run ends in ``finalize/logger_finish``."""

    STARTUP_BEGIN = "startup/begin"
    STARTUP_MEMORY_BUDGET = "startup/memory_budget"
    STARTUP_CUDA_PREFLIGHT = "startup/cuda_preflight"
    STARTUP_REPLAY_RESOURCES = "startup/replay_resources"
    STARTUP_INFERENCE_RESOURCES = "startup/inference_resources"
    STARTUP_LOGGER = "startup/logger"
    STARTUP_LEARNER_PREPARE = "startup/learner_prepare"
    STARTUP_COLLECTOR_START = "startup/collector_start"
    TRAINING_STARTUP_COMPLETE = "training/startup_complete"
    TRAINING_WAIT_FOR_INFERENCE_REQUEST = "training/wait_for_inference_request"
    TRAINING_LEARNER_INFERENCE = "training/learner_inference"
    TRAINING_INFERENCE_RESPONSE = "training/inference_response"
    TRAINING_REPLAY_PREPARE = "training/replay_prepare"
    TRAINING_LEARNER_UPDATE = "training/learner_update"
    FINALIZE_COLLECTOR_QUIESCE = "finalize/collector_quiesce"
    FINALIZE_EVALUATION = "finalize/evaluation"
    FINALIZE_COLLECTOR_METRICS_DRAIN = "finalize/collector_metrics_drain"
    FINALIZE_REPLAY_PIPELINE_CLOSE = "finalize/replay_pipeline_close"
    FINALIZE_REPLAY_INGRESS_SNAPSHOT = "finalize/replay_ingress_snapshot"
    FINALIZE_LOGGER_FINISH = "finalize/logger_finish"

    @property
    def group(self) -> PhaseGroup:
        return PhaseGroup(self.value.split("/", 1)[0])


class ProbePhase(StrEnum):
    """A timed phase of one backend-probe iteration (``backend_probe`` result ``phases``)."""

    BACKEND_STEP_MS = "backend_step_ms"
    STATE_EXCHANGE_MS = "state_exchange_ms"
    UPDATE_STATE_MS = "update_state_ms"
    RESET_SELECTION_MS = "reset_selection_ms"
    RESET_DONE_MS = "reset_done_ms"
    BACKEND_RESET_MS = "backend_reset_ms"
    RESET_PUBLISH_MS = "reset_publish_ms"
    ITERATION_MS = "iteration_ms"
