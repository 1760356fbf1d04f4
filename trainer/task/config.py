"""``G1TrackingCfg``: every parameter of the G1 motion-tracking task (TASK.md) as data.

The owner YAML files hold the values (CONTRACTS §2); ``trainer/config/loader.py`` fills this
frozen dataclass and downstream code reads only the fields it needs. The defaults equal
TASK.md so a test or benchmark can build the task without a config file. Names carry units
(``_s``, ``_m``, ``_rad``); ranges are half-widths of symmetric uniform draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from trainer.config.defaults import default_scene_cfg
from trainer.sim.scene import SceneCfg

__all__ = ["REWARD_TERM_NAMES", "G1TrackingCfg"]

REWARD_TERM_NAMES: tuple[str, ...] = (
    "motion_global_root_pos",
    "motion_global_root_ori",
    "motion_body_pos",
    "motion_body_ori",
    "motion_body_lin_vel",
    "motion_body_ang_vel",
    "action_rate_l2",
    "joint_limit",
    "undesired_contacts",
)
"""Reward terms in logging order (``reward/<term>``, TASK.md §6)."""


@dataclass(frozen=True, kw_only=True)
class G1TrackingCfg:
    """The G1 motion-tracking task (``G1MotionTracking``), TASK.md §1–§8."""

    # --- motion (CONTRACTS §12) ---------------------------------------------------------------
    motion_file: str = "motions/g1/dance1_subject2_part.npz"
    """Motion asset id or path (``env.commands.motion.motion_file``); offline alternative
    ``motions/g1/synthetic_dance.npz``."""
    hub_repo: str = "unilabsim/unilab-motions"
    """Hugging Face dataset repo for motion downloads (``env.commands.motion.hub_repo``)."""

    # --- timing and scene (TASK.md §1, §2) ----------------------------------------------------
    scene: SceneCfg = field(default_factory=default_scene_cfg)
    """Physics timestep, substeps (decimation) and MJWarp buffers; ctrl dt = sim_dt·decimation."""
    episode_length_s: float = 10.0
    """Episode length; ceil(10 / 0.02) = 500 control steps (``time_out`` truncation)."""

    # --- actions (TASK.md §5) -----------------------------------------------------------------
    action_scale: float = 2.0
    """Position target = q_default + action_scale · a (one scale for all joints)."""
    simulate_action_latency: bool = False
    """If true, ctrl uses a_{t-1} (0 after a reset); obs and action_rate still use a_t."""

    # --- execution (not task semantics) --------------------------------------------------------
    torch_compile: bool = True
    """Compile the step phases' torch arithmetic with inductor before the CUDA graphs are
    captured (CUDA only; the CPU backend steps eagerly). Results equal the eager step up to
    float rounding; the run manifest records ``task_compile``."""

    # --- observation noise, uniform half-widths (TASK.md §4) ----------------------------------
    noise_motion_anchor_pos: float = 0.0
    """Noise on ``motion_anchor_pos_b`` (none; mjlab 0.25)."""
    noise_motion_anchor_ori: float = 0.0
    """Noise on ``motion_anchor_ori_b`` (none; mjlab 0.05)."""
    noise_base_lin_vel: float = 0.1
    """Noise on ``base_lin_vel`` (pelvis velocimeter), m/s."""
    noise_base_ang_vel: float = 0.2
    """Noise on ``base_ang_vel`` (torso gyro), rad/s."""
    noise_joint_pos: float = 0.01
    """Noise on ``joint_pos`` (q − q_default), rad."""
    noise_joint_vel: float = 1.5
    """Noise on ``joint_vel``, rad/s."""

    # --- rewards (TASK.md §6): weights w and sigmas σ of exp(−e/σ²) ---------------------------
    weight_motion_global_root_pos: float = 1.0
    sigma_motion_global_root_pos: float = 0.3
    weight_motion_global_root_ori: float = 0.5
    sigma_motion_global_root_ori: float = 0.4
    weight_motion_body_pos: float = 2.0
    sigma_motion_body_pos: float = 0.3
    weight_motion_body_ori: float = 1.0
    sigma_motion_body_ori: float = 0.4
    weight_motion_body_lin_vel: float = 1.0
    sigma_motion_body_lin_vel: float = 1.0
    weight_motion_body_ang_vel: float = 1.0
    sigma_motion_body_ang_vel: float = 3.14
    weight_action_rate_l2: float = -0.1
    """Σ(a_t − a_{t−1})² of raw actions."""
    weight_joint_limit: float = -2.0
    """Σ squared violation of the XML joint range."""
    weight_undesired_contacts: float = -0.1
    """Count of U bodies whose origin is below ``undesired_contact_height_m``."""
    undesired_contact_height_m: float = 0.05
    """Height test of ``undesired_contacts`` (no contact forces are read)."""

    # --- terminations (TASK.md §7) ------------------------------------------------------------
    anchor_pos_z_threshold_m: float = 0.5
    """``anchor_pos``: |p*_a.z − p_a.z| above this terminates (mjlab 0.25)."""
    anchor_ori_threshold: float = 0.8
    """``anchor_ori``: |g(q*_a) − g(q_a)| above this terminates (projected-gravity z)."""
    ee_body_pos_z_threshold_m: float = 0.5
    """``ee_body_pos``: any EE body height error above this terminates (mjlab 0.25)."""

    # --- reset ranges, half-widths of U(−r, r) (TASK.md §8) -----------------------------------
    reset_root_pos_range_m: tuple[float, float, float] = (0.05, 0.05, 0.01)
    """Root position noise (x, y, z)."""
    reset_root_rpy_range_rad: tuple[float, float, float] = (0.1, 0.1, 0.2)
    """Root orientation noise (roll, pitch, yaw); q_n = Rz(yaw)·Ry(pitch)·Rx(roll)."""
    reset_root_lin_vel_range: tuple[float, float, float] = (0.5, 0.5, 0.2)
    """Root linear velocity noise, world (x, y, z), m/s."""
    reset_root_ang_vel_range: tuple[float, float, float] = (0.52, 0.52, 0.78)
    """Root angular velocity noise, world (x, y, z), rad/s."""
    reset_joint_pos_range_rad: float = 0.1
    """Joint position noise before clamping to the XML range."""

    # --- adaptive start-frame sampling (TASK.md §8) -------------------------------------------
    sampler_bin_frames: int = 50
    """Frames per bin: B = floor(T / sampler_bin_frames) + 1."""
    sampler_alpha: float = 0.001
    """EMA rate of the failure statistics F (applied only on steps with a termination)."""
    sampler_uniform_ratio: float = 0.1
    """Uniform mix: p ∝ F + uniform_ratio / B."""
    sampler_kernel_size: int = 1
    """Smoothing kernel size (1 = no smoothing)."""
    sampler_kernel_lambda: float = 0.8
    """Kernel decay λ (weights λⁱ / Σλⁱ, right-padded with the edge value)."""
    sampling_start_ratio: float = 0.0
    """Initial F as a fraction of uniform (0 = F starts at zero, i.e. uniform sampling)."""

    def __post_init__(self) -> None:
        for name in ("episode_length_s", "action_scale", "undesired_contact_height_m"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                msg = f"task.{name}={value!r} must be a finite number > 0"
                raise ValueError(msg)
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

    def reward_weights(self) -> dict[str, float]:
        """Weight per reward term, in :data:`REWARD_TERM_NAMES` order."""
        return {name: float(getattr(self, f"weight_{name}")) for name in REWARD_TERM_NAMES}
