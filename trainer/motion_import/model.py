"""The G1 model conversion works on: the one ``train`` builds from the default scene config.

Forward kinematics only needs the kinematic tree (body offsets, joint axes), which comes from
the robot MJCF that :func:`trainer.sim.scene.locate_g1_mjcf` finds; the scene's timestep and
actuators do not matter here. The model is built once per process.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from trainer.sim.scene import JOINT_NAMES, SceneCfg, build_g1_model

if TYPE_CHECKING:
    import mujoco

__all__ = ["g1_body_names", "g1_model"]


@functools.cache
def g1_model() -> mujoco.MjModel:
    """The G1 scene model of ``SceneCfg()`` (cached; treat it as read-only)."""
    model = build_g1_model(SceneCfg())
    hinges = tuple(model.joint(j).name for j in range(1, model.njnt))
    if hinges != JOINT_NAMES:
        msg = f"G1 model hinge joints {hinges[:3]}... differ from the 29-DoF order; rebuild the asset cache (g1-pull-assets --robot g1)"
        raise RuntimeError(msg)
    return model


@functools.cache
def g1_body_names() -> tuple[str, ...]:
    """Every body of the model in MuJoCo id order, world included (31)."""
    model = g1_model()
    return tuple(model.body(b).name for b in range(model.nbody))
