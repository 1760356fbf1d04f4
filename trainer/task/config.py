"""``G1TrackingCfg``: every parameter of the G1 motion-tracking task (docs/task.md) as data.

The owner YAML files hold the values (docs/contracts.md §owner-routing); ``trainer/config/loader.py`` fills this
frozen dataclass and downstream code reads only the fields it needs. It declares no defaults:
code outside a run (tests, benchmarks) takes the owner's values from
``trainer.config.defaults.default_task_cfg``. Names carry units (``_s``, ``_m``, ``_rad``);
ranges are half-widths of symmetric uniform draws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from trainer.sim.scene import SceneCfg

__all__ = [
    "KERNEL_TERM_NAMES",
    "PENALTY_TERM_NAMES",
    "REWARD_TERM_NAMES",
    "G1TrackingCfg",
    "RewardTerm",
    "check_rewards",
]

KERNEL_TERM_NAMES: tuple[str, ...] = (
    "motion_global_root_pos",
    "motion_global_root_ori",
    "motion_body_pos",
    "motion_body_ori",
    "motion_body_lin_vel",
    "motion_body_ang_vel",
)
"""Tracking terms ``exp(−e/σ²)``: each needs a ``sigma``."""
PENALTY_TERM_NAMES: tuple[str, ...] = ("action_rate_l2", "joint_limit", "undesired_contacts")
"""Penalty terms (a raw error times a negative weight): ``sigma`` is null."""
REWARD_TERM_NAMES: tuple[str, ...] = KERNEL_TERM_NAMES + PENALTY_TERM_NAMES
"""Reward terms in logging and summation order (``reward/<term>``, docs/task.md)."""


@dataclass(frozen=True, kw_only=True)
class RewardTerm:
    """One reward term: its weight w and, for a tracking term, the σ of ``exp(−e/σ²)``."""

    weight: float
    sigma: float | None


def check_rewards(rewards: Mapping[str, RewardTerm]) -> None:
    """Raise ``ValueError`` unless ``rewards`` has exactly the terms of
    :data:`REWARD_TERM_NAMES`, finite weights, a finite σ > 0 for each tracking term and a
    null σ for each penalty term."""
    unknown = [name for name in rewards if name not in REWARD_TERM_NAMES]
    if unknown:
        msg = (
            f"env.rewards.{unknown[0]} is no reward term; the terms are "
            f"{', '.join(REWARD_TERM_NAMES)}"
        )
        raise ValueError(msg)
    missing = [name for name in REWARD_TERM_NAMES if name not in rewards]
    if missing:
        msg = f"env.rewards.{missing[0]} is missing; add {{weight: ..., sigma: ...}} for it"
        raise ValueError(msg)
    for name, term in rewards.items():
        if not math.isfinite(term.weight):
            msg = f"env.rewards.{name}.weight={term.weight!r} must be a finite number"
            raise ValueError(msg)
        kernel = name in KERNEL_TERM_NAMES
        if kernel and (term.sigma is None or not math.isfinite(term.sigma) or term.sigma <= 0):
            msg = f"env.rewards.{name}.sigma={term.sigma!r} must be a finite number > 0"
            raise ValueError(msg)
        if not kernel and term.sigma is not None:
            msg = f"env.rewards.{name}.sigma={term.sigma!r} must be null: {name} has no kernel"
            raise ValueError(msg)


@dataclass(frozen=True, kw_only=True)
class G1TrackingCfg:
    """The G1 motion-tracking task (``G1MotionTracking``), docs/task.md §timing-and-step-order, docs/assets.md §the-g1-model-and-the-scene, docs/task.md §tracked-bodies, §observations, §actions, §rewards, §terminations-and-truncations, §reset."""

    # --- motion (docs/contracts.md §assets-and-motion) ---------------------------------------------------------------
    motion_file: str
    """Motion asset id or path (``env.commands.motion.motion_file``); offline alternative
    ``motions/g1/synthetic_dance.npz``."""
    hub_repo: str
    """Hugging Face dataset repo for motion downloads (``env.commands.motion.hub_repo``)."""

    # --- timing and scene (docs/task.md §timing-and-step-order, docs/assets.md §the-g1-model-and-the-scene) ----------------------------------------------------
    scene: SceneCfg
    """Physics timestep, substeps (decimation) and MJWarp buffers; ctrl dt = sim_dt·decimation."""
    episode_length_s: float
    """Episode length; ceil(10 / 0.02) = 500 control steps (``time_out`` truncation)."""

    # --- actions (docs/task.md §actions) -----------------------------------------------------------------
    action_scale: float
    """Position target = q_default + action_scale · a (one scale for all joints)."""
    simulate_action_latency: bool
    """If true, ctrl uses a_{t-1} (0 after a reset); obs and action_rate still use a_t."""

    # --- execution (not task semantics) --------------------------------------------------------
    torch_compile: bool
    """Compile the step phases' torch arithmetic with inductor before the CUDA graphs are
    captured (CUDA only; the CPU backend steps eagerly). Results equal the eager step up to
    float rounding; the run manifest records ``task_compile``."""

    # --- observation noise, uniform half-widths (docs/task.md §observations) ----------------------------------
    noise_motion_anchor_pos: float
    """Noise on ``motion_anchor_pos_b`` (none; mjlab 0.25)."""
    noise_motion_anchor_ori: float
    """Noise on ``motion_anchor_ori_b`` (none; mjlab 0.05)."""
    noise_base_lin_vel: float
    """Noise on ``base_lin_vel`` (pelvis velocimeter), m/s."""
    noise_base_ang_vel: float
    """Noise on ``base_ang_vel`` (torso gyro), rad/s."""
    noise_joint_pos: float
    """Noise on ``joint_pos`` (q − q_default), rad."""
    noise_joint_vel: float
    """Noise on ``joint_vel``, rad/s."""

    # --- rewards (docs/task.md §rewards): weights w and sigmas σ of exp(−e/σ²) ---------------------------
    rewards: dict[str, RewardTerm]
    """``env.rewards.<term>: {weight, sigma}`` for every term of :data:`REWARD_TERM_NAMES`;
    ``sigma`` is null for the penalty terms."""
    undesired_contact_height_m: float
    """Height test of ``undesired_contacts`` (no contact forces are read)."""

    # --- terminations (docs/task.md §terminations-and-truncations) ------------------------------------------------------------
    anchor_pos_z_threshold_m: float
    """``anchor_pos``: |p*_a.z − p_a.z| above this terminates (mjlab 0.25)."""
    anchor_ori_threshold: float
    """``anchor_ori``: |g(q*_a) − g(q_a)| above this terminates (projected-gravity z)."""
    ee_body_pos_z_threshold_m: float
    """``ee_body_pos``: any EE body height error above this terminates (mjlab 0.25)."""

    # --- reset ranges, half-widths of U(−r, r) (docs/task.md §reset) -----------------------------------
    reset_root_pos_range_m: tuple[float, float, float]
    """Root position noise (x, y, z)."""
    reset_root_rpy_range_rad: tuple[float, float, float]
    """Root orientation noise (roll, pitch, yaw); q_n = Rz(yaw)·Ry(pitch)·Rx(roll)."""
    reset_root_lin_vel_range: tuple[float, float, float]
    """Root linear velocity noise, world (x, y, z), m/s."""
    reset_root_ang_vel_range: tuple[float, float, float]
    """Root angular velocity noise, world (x, y, z), rad/s."""
    reset_joint_pos_range_rad: float
    """Joint position noise before clamping to the XML range."""

    # --- adaptive start-frame sampling (docs/task.md §reset) -------------------------------------------
    sampler_bin_frames: int
    """Frames per bin: B = floor(T / sampler_bin_frames) + 1."""
    sampler_alpha: float
    """EMA rate of the failure statistics F (applied only on steps with a termination)."""
    sampler_uniform_ratio: float
    """Uniform mix: p ∝ F + uniform_ratio / B."""
    sampler_kernel_size: int
    """Smoothing kernel size (1 = no smoothing)."""
    sampler_kernel_lambda: float
    """Kernel decay λ (weights λⁱ / Σλⁱ, right-padded with the edge value)."""
    sampling_start_ratio: float
    """Initial F as a fraction of uniform (0 = F starts at zero, i.e. uniform sampling)."""

    def __post_init__(self) -> None:
        for name in ("episode_length_s", "action_scale", "undesired_contact_height_m"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                msg = f"task.{name}={value!r} must be a finite number > 0"
                raise ValueError(msg)
        check_rewards(self.rewards)
        if self.sampler_bin_frames < 1 or self.sampler_kernel_size < 1:
            msg = (
                f"task.sampler_bin_frames={self.sampler_bin_frames} and "
                f"task.sampler_kernel_size={self.sampler_kernel_size} must be >= 1"
            )
            raise ValueError(msg)
        if not 0.0 < self.sampler_alpha <= 1.0:
            msg = f"task.sampler_alpha={self.sampler_alpha} must lie in (0, 1]; use 0.001"
            raise ValueError(msg)
        if self.sampler_uniform_ratio <= 0:
            msg = f"task.sampler_uniform_ratio={self.sampler_uniform_ratio} must be > 0; use 0.1"
            raise ValueError(msg)

    @property
    def ctrl_dt(self) -> float:
        """Control period, s (sim_dt · decimation)."""
        return self.scene.ctrl_dt

    @property
    def max_episode_steps(self) -> int:
        """Episode length in control steps: ceil(episode_length_s / ctrl_dt) (500)."""
        # Round before ceil so 10 / 0.02 = 500.00000000000006 stays 500.
        return math.ceil(round(self.episode_length_s / self.ctrl_dt, 9))
