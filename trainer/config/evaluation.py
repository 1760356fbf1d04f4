"""``EvalCfg``: the ``eval.*`` config section (docs/configuration.md, docs/evaluation.md)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_UNIFORM", "MAX_EPISODES", "EvalCfg"]

DEFAULT_MAX_UNIFORM = 128
"""``eval.uniform_episodes: null`` resolves to ``min(DEFAULT_MAX_UNIFORM, algo.num_envs)``."""
MAX_EPISODES = 65536
"""Upper bound of either episode count (one evaluation point)."""


def _check_count(key: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_EPISODES:
        msg = f"eval.{key}={value!r} must be null or an int in 1..{MAX_EPISODES}"
        raise ValueError(msg)


@dataclass(frozen=True, kw_only=True)
class EvalCfg:
    """``eval.*``: evaluate every checkpoint and the final policy of a ``train`` run."""

    enabled: bool
    """Run the fixed-protocol evaluation after training (false: the run summary says
    ``evaluation.status: skipped``)."""
    uniform_episodes: int | None
    """Episodes per evaluation point from evenly spaced start frames; null =
    ``min(128, algo.num_envs)`` (small on a small CPU run, one rollout's share on the GPU)."""
    frame0_episodes: int | None
    """Episodes per evaluation point from frame 0; null = ``max(1, uniform // 8)``."""

    def __post_init__(self) -> None:
        _check_count("uniform_episodes", self.uniform_episodes)
        _check_count("frame0_episodes", self.frame0_episodes)

    def episodes(self, num_envs: int) -> tuple[int, int]:
        """``(uniform_episodes, frame0_episodes)`` with the nulls resolved for ``num_envs``."""
        uniform = self.uniform_episodes
        if uniform is None:
            uniform = max(1, min(DEFAULT_MAX_UNIFORM, num_envs))
        frame0 = self.frame0_episodes
        if frame0 is None:
            frame0 = max(1, uniform // 8)
        return uniform, frame0
