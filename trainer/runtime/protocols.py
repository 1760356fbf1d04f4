"""What the runtime needs of the learner and of the env: the two seams it drives.

The runtime never imports the concrete classes on its hot path (``FlashSacLearner`` in
trainer/algo/learner.py, ``G1TrackingEnv`` in trainer/task/): it types them by these
Protocols, so the test doubles of tests/trainer/runtime honour the same interface
(docs/architecture.md). Each member is one the runtime calls; nothing is probed with
``hasattr``/``getattr``. ``isinstance`` against them checks that every member is there (the
tests do; the runtime relies on the static types).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from contracts.env_spec import EnvSpec


class ReplaySink(Protocol):
    """The learner's device replay as the runtime feeds it (trainer/algo/replay.py)."""

    def commit(self, rows: Tensor) -> None:
        """Append ``rows [n, row_width]`` in tick-then-env order (no host sync)."""
        ...


@runtime_checkable
class Learner(Protocol):
    """The learner the tick loop serves (``FlashSacLearner``)."""

    @property
    def replay(self) -> ReplaySink: ...

    def act(self, obs: Tensor, done: Tensor) -> Tensor:
        """Actions ``[N, action_dim]`` for ``obs [N, obs_dim]`` (stochastic, training)."""
        ...

    def acting(self) -> AbstractContextManager[Any]:
        """The stream context the tick loop observes, acts and publishes the action in."""
        ...

    def prepare_iteration(self) -> None:
        """Fold the rows committed since the last update into the learner's statistics."""
        ...

    def update_cycle(self) -> dict[str, Tensor]:
        """One update; the ``Loss/*``-style scalars stay on the device."""
        ...

    def capture_graphs(self) -> None:
        """Compile and capture the CUDA graphs now (does nothing where there are none)."""
        ...

    def set_lr_horizon(self, iterations: int) -> None:
        """Re-size a whole-run cosine to ``iterations`` in total (a time budget's forecast)."""
        ...

    def cuda_graph_diagnostics(self) -> dict[str, Any]:
        """``runtime_manifest.cuda_graph.learner``; a cold-path call."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class EnvStep(Protocol):
    """What one ``TrainingEnv.step`` returns, as far as the collector reads it."""

    obs: Tensor
    critic_obs: Tensor
    terminal_obs: Tensor
    terminal_critic_obs: Tensor
    reward: Tensor
    terminated: Tensor
    truncated: Tensor
    reward_terms: dict[str, Tensor]
    episode_return: Tensor
    episode_length: Tensor


@runtime_checkable
class EnvBackend(Protocol):
    """The env's simulator backend, as far as the collector reads it (trainer/sim/)."""

    @property
    def num_threads(self) -> int | None:
        """Physics threads in effect (None: the backend has no CPU thread pool)."""
        ...

    def diagnostics(self) -> dict[str, Any]:
        """``runtime_manifest.backend_diagnostics``; a cold-path call."""
        ...

    def close(self) -> None:
        """Free the backend's native resources (the collector's last call)."""
        ...


class MotionIdentity(Protocol):
    """Which clip the env tracks (``runtime_manifest.motion``)."""

    @property
    def source(self) -> str: ...

    @property
    def sha256(self) -> str: ...


@runtime_checkable
class TrainingEnv(Protocol):
    """The env the collector steps (``G1TrackingEnv``)."""

    @property
    def spec(self) -> EnvSpec:
        """Observation and action widths (the collector checks them at the hand-over)."""
        ...

    @property
    def backend(self) -> EnvBackend: ...

    @property
    def motion(self) -> MotionIdentity | None:
        """The tracked clip (None: an env without one, e.g. a test double)."""
        ...

    @property
    def setup_seconds(self) -> dict[str, float]:
        """Where the env build went (``timings.startup.collector.env_build_parts``)."""
        ...

    def reset_all(self) -> tuple[Tensor, Tensor]:
        """Reset every row; return ``(obs, critic_obs)``."""
        ...

    def step(self, actions: Tensor) -> EnvStep: ...

    def check_health(self) -> None:
        """Raise on a diverged policy or a physics overflow (syncs: once per report)."""
        ...
