"""The G1 task's observation layouts and its :class:`~contracts.env_spec.EnvSpec` (docs/task.md
"Observations"), torch-free so preflight can size memory before any env exists.

Every width follows from the scene: 29 actuated joints and 14 tracked bodies. The actor sees
the reference command (joint positions and velocities at frame k), the anchor error, the IMU,
its joints and its last action; the critic sees that plus every tracked body's pose.
"""

from __future__ import annotations

from contracts.env_spec import EnvSpec
from trainer.sim.scene import JOINT_NAMES, TRACKED_BODY_NAMES

__all__ = [
    "ACTOR_OBS_DIM",
    "ACTOR_OBS_LAYOUT",
    "CRITIC_OBS_DIM",
    "CRITIC_OBS_LAYOUT",
    "G1_TRACKING_SPEC",
    "NUM_JOINTS",
    "NUM_TRACKED",
]

NUM_JOINTS = len(JOINT_NAMES)
NUM_TRACKED = len(TRACKED_BODY_NAMES)


def _layout(terms: tuple[tuple[str, int], ...], start: int = 0) -> tuple[tuple[str, int, int], ...]:
    """``(term, offset, width)`` of consecutive terms from ``start``."""
    out, offset = [], start
    for name, width in terms:
        out.append((name, offset, width))
        offset += width
    return tuple(out)


ACTOR_OBS_LAYOUT: tuple[tuple[str, int, int], ...] = _layout(
    (
        ("command", 2 * NUM_JOINTS),
        ("motion_anchor_pos_b", 3),
        ("motion_anchor_ori_b", 6),
        ("base_lin_vel", 3),
        ("base_ang_vel", 3),
        ("joint_pos", NUM_JOINTS),
        ("joint_vel", NUM_JOINTS),
        ("actions", NUM_JOINTS),
    )
)
"""(term, offset, width) of the actor observation."""
ACTOR_OBS_DIM = ACTOR_OBS_LAYOUT[-1][1] + ACTOR_OBS_LAYOUT[-1][2]

CRITIC_OBS_LAYOUT: tuple[tuple[str, int, int], ...] = (
    *ACTOR_OBS_LAYOUT,
    *_layout(
        (("body_pos", 3 * NUM_TRACKED), ("body_ori", 6 * NUM_TRACKED), ("sac_base_lin_vel", 3)),
        ACTOR_OBS_DIM,
    ),
)
"""(term, offset, width) of the critic observation: the actor terms, then the body terms."""
CRITIC_OBS_DIM = CRITIC_OBS_LAYOUT[-1][1] + CRITIC_OBS_LAYOUT[-1][2]

G1_TRACKING_SPEC = EnvSpec(
    obs_dim=ACTOR_OBS_DIM, critic_obs_dim=CRITIC_OBS_DIM, action_dim=NUM_JOINTS
)
"""What ``G1TrackingEnv.spec`` reports (obs 160, critic obs 289, actions 29, row 930)."""
