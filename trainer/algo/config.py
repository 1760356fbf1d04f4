"""``FlashSacCfg``: the typed ``algo.*`` section of a run (docs/configuration.md §algo-flashsac).

The owner YAML owns the values (``trainer/conf/flashsac/config.yaml`` and the task's
``base.yaml``); the fields declare no defaults, so a value cannot drift from the YAML. Code
outside a run takes the owner's values from :func:`trainer.config.defaults.default_algo_cfg`.
``validate()`` is the fail-closed semantic check (one-line messages naming the key, the bad
value and the fix).
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Literal

from contracts.errors import ConfigError

AmpDtype = Literal["auto", "bf16", "fp32"]
"""Accepted ``algo.amp_dtype`` values; ``fp16`` is rejected (its GradScaler syncs, docs/flashsac.md §update-schedule)."""


class FlashSacConfigError(ConfigError, ValueError):
    """A bad ``algo.*`` value: ``train`` prints ``error: <message>`` and exits 2."""


UNSIZED_DECAY_STEPS = 2**40
"""Cosine period of a null ``lr_decay_steps`` before any horizon is known: the rate stays at
its peak (a time-budgeted run without a cap, until its first forecast)."""


@dataclass(frozen=True, kw_only=True)
class FlashSacCfg:
    """``algo.*``: every FlashSAC hyper-parameter (docs/configuration.md §algo-flashsac names, no ``algo.`` prefix)."""

    num_envs: int
    """Parallel environments N (the soak passes 1024)."""

    max_iterations: int | None
    """Training iterations (update cycles) after warm-up (the soak passes 65000). Under a
    time budget (``training.duration_seconds``) a cap, and null means no cap."""

    batch_size: int
    """Rows B per gradient update."""

    updates_per_step: int
    """Critic updates U per iteration; U*B rows are sampled once per iteration."""

    policy_frequency: int
    """Actor and temperature update after critic update k when ``k % policy_frequency == 0``."""

    gamma: float
    """Discount factor, also used by the reward scaler's running return."""

    tau: float
    """Polyak factor of the target critic, applied after every critic update."""

    n_step: int
    """Bootstrap horizon; only 1 is implemented (any other value exits 2)."""

    actor_lr: float
    """Peak learning rate of the actor Adam."""

    critic_lr: float
    """Peak learning rate of the critic Adam."""

    temp_lr: float
    """Peak learning rate of the log-temperature Adam."""

    lr_end: float
    """Final learning rate of the cosine schedules."""

    lr_warmup_steps: int
    """Linear warm-up updates of the schedules (0 = none, the FlashSAC default)."""

    lr_decay_steps: int | None
    """Cosine period T in updates; lr stays at ``lr_end`` once an optimizer made T updates.

    null: each optimizer decays over its own updates in the whole run, as the official FlashSAC
    schedules it: ``max_iterations``, or under a time budget the iterations the budget is
    forecast to reach (docs/configuration.md); see :meth:`resolved_lr_decay_steps`."""

    learning_starts: int
    """Warm-up ticks before the first iteration (W = max(learning_starts, ceil(B/N)))."""

    replay_buffer_n: int
    """Replay capacity per env: the ring holds ``replay_buffer_n * num_envs`` rows (the
    mjwarp owner sets 8192)."""

    actor_hidden_dim: int
    """Actor trunk width d."""

    critic_hidden_dim: int
    """Critic trunk width d (per ensemble member)."""

    num_blocks: int
    """Inverted residual blocks per trunk."""

    num_atoms: int
    """Atoms K of the categorical critic."""

    critic_min_v: float
    """Lowest atom z_0 of the critic support."""

    critic_max_v: float
    """Highest atom z_{K-1} of the critic support."""

    temp_initial: float
    """Initial temperature alpha (log alpha starts at ln of it)."""

    temp_target_sigma: float
    """sigma_t of the target entropy |A| * 0.5 * ln(2 pi e sigma_t^2)."""

    target_entropy: float | None
    """Explicit target entropy; null derives it from ``temp_target_sigma`` (-13.867262 for 29 actions)."""

    noise_zeta_mu: float
    """Exponent mu of the truncated zeta distribution of noise repeats."""

    noise_max_repeat: int
    """Largest noise repeat count k of the truncated zeta distribution."""

    normalize_reward: bool
    """Scale rewards by the running return statistics (docs/flashsac.md §reward-scaling)."""

    normalized_g_max: float
    """G_max divisor of the reward scale; keep equal to ``critic_max_v``."""

    reward_scale_horizon: int | None
    """Ticks the return statistics of the reward scale average over: the running moments keep
    at most this many ticks' weight, so each new tick counts at least 1/H. null: the whole run
    (docs/flashsac.md §reward-scaling)."""

    policy_average_rate: float
    """Each update cycle moves the averaged policy this fraction of the way to the actor
    (a Polyak average over about 1/rate cycles); checkpoints then carry it and evaluation, play
    and export use it. 0: off, the policy is the actor itself
    (docs/flashsac.md §averaged-policy)."""

    use_amp: bool
    """bf16 autocast of the network matmuls on CUDA (never on CPU)."""

    amp_dtype: AmpDtype
    """``auto`` (bf16 on CUDA), ``bf16`` or ``fp32``; ``fp16`` exits 2."""

    use_compile: bool
    """torch.compile the pure loss maths where available (falls back to eager, recorded)."""

    use_cuda_graph: bool
    """Replay the whole update cycle (and act) as CUDA graphs on CUDA (falls back, recorded)."""

    fuse_renorm: bool
    """Compile each network's norm control into one function (needs ``use_compile``;
    docs/runtime.md "Learner profile")."""

    fuse_losses: bool
    """Compile the loss maths around the networks (needs ``use_compile``; docs/runtime.md
    "Learner profile")."""

    fuse_networks: bool
    """Compile each network's whole forward instead of its trunk alone (needs
    ``use_compile``; docs/runtime.md "Learner profile")."""

    fuse_combo_kernels: bool
    """Compile the learner with inductor's combo kernels: independent kernels of one graph
    launched as one (needs ``use_compile``; docs/runtime.md "Learner profile")."""

    fuse_multi_kernel: bool
    """Compile the learner with inductor's multi-kernel: the faster of a persistent and a
    looped version of each reduction (needs ``use_compile``; docs/runtime.md "Learner
    profile")."""

    seed: int | None
    """Torch seed of the learner; null leaves seeding to the caller."""

    save_interval: int
    """Checkpoint every this many iterations (and at the last one)."""

    def validate(self) -> FlashSacCfg:
        """Check the semantic constraints; returns ``self`` so calls can chain.

        Raises:
            FlashSacConfigError: one line naming the key, the bad value and the fix.
        """
        self._validate_sizes()
        self._validate_schedule()
        self._validate_counts()
        self._validate_reals()
        self._validate_amp()
        self._validate_capacity()
        return self

    def _validate_sizes(self) -> None:
        for key in _POSITIVE_INTS:
            value = getattr(self, key)
            if key == "max_iterations" and value is None:
                continue  # no cap: the time budget ends the run (trainer.config.checks)
            if not _is_int(value) or value <= 0:
                _fail(f"algo.{key}={value!r} must be a positive integer; use e.g. {_EXAMPLES[key]}")

    def _validate_counts(self) -> None:
        for key in ("learning_starts", "lr_warmup_steps"):
            value = getattr(self, key)
            if not _is_int(value) or value < 0:
                _fail(f"algo.{key}={value!r} must be an integer >= 0; use e.g. {_EXAMPLES[key]}")
        if self.n_step != 1:
            _fail(
                f"algo.n_step={self.n_step!r} is not supported; only algo.n_step=1 is implemented"
            )
        if self.num_atoms < 2:
            _fail(f"algo.num_atoms={self.num_atoms} must be at least 2; use e.g. 101")

    def _validate_schedule(self) -> None:
        horizon = self.reward_scale_horizon
        if horizon is not None and (not _is_int(horizon) or horizon <= 0):
            _fail(
                f"algo.reward_scale_horizon={horizon!r} must be a positive integer of ticks or "
                "null (the whole run); use e.g. 8192"
            )
        decay = self.lr_decay_steps
        if decay is not None and (not _is_int(decay) or decay <= 0):
            _fail(
                f"algo.lr_decay_steps={decay!r} must be a positive integer or null (the whole run); "
                "use e.g. null"
            )

    def _validate_reals(self) -> None:
        if not self.critic_min_v < self.critic_max_v:
            _fail(
                f"algo.critic_min_v={self.critic_min_v} must be below algo.critic_max_v="
                f"{self.critic_max_v}; use e.g. -5.0 and 5.0"
            )
        if not 0.0 < self.gamma <= 1.0:
            _fail(f"algo.gamma={self.gamma!r} must lie in (0, 1]; use e.g. 0.99")
        if not 0.0 < self.tau <= 1.0:
            _fail(f"algo.tau={self.tau!r} must lie in (0, 1]; use e.g. 0.05")
        rate = self.policy_average_rate
        if isinstance(rate, bool) or not (isinstance(rate, int | float) and 0.0 <= rate <= 1.0):
            _fail(f"algo.policy_average_rate={rate!r} must lie in [0, 1] (0: off); use e.g. 0.002")
        for key in _POSITIVE_REALS:
            value = getattr(self, key)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                _fail(
                    f"algo.{key}={value!r} must be a finite number > 0; use e.g. {_EXAMPLES[key]}"
                )
        if not (math.isfinite(self.lr_end) and self.lr_end >= 0):
            _fail(f"algo.lr_end={self.lr_end!r} must be a finite number >= 0; use e.g. 1.5e-4")
        if self.target_entropy is not None and not math.isfinite(self.target_entropy):
            _fail(f"algo.target_entropy={self.target_entropy!r} must be finite or null")
        if not (math.isfinite(self.noise_zeta_mu) and self.noise_zeta_mu > 0):
            _fail(
                f"algo.noise_zeta_mu={self.noise_zeta_mu!r} must be a finite number > 0; use e.g. 2.0"
            )

    def _validate_amp(self) -> None:
        # The loader rejects a value outside AmpDtype already; this covers a config built in
        # Python (no runtime Literal check) and says why fp16 is out.
        if self.amp_dtype in ("fp16", "float16", "half"):
            _fail(
                f"algo.amp_dtype={self.amp_dtype!r} is not supported (fp16 needs a GradScaler that "
                "cannot live in one CUDA graph); use algo.amp_dtype=bf16 or auto"
            )
        if self.amp_dtype not in typing.get_args(AmpDtype):
            _fail(
                f"algo.amp_dtype={self.amp_dtype!r} is not one of {list(typing.get_args(AmpDtype))}"
            )

    def _validate_capacity(self) -> None:
        capacity = self.replay_capacity
        if self.batch_size > capacity:
            _fail(
                f"algo.batch_size={self.batch_size} exceeds the replay capacity {capacity} "
                f"(algo.replay_buffer_n={self.replay_buffer_n} x algo.num_envs={self.num_envs}); "
                "raise algo.replay_buffer_n"
            )
        threshold = max(self.batch_size, self.learning_starts * self.num_envs)
        if threshold > capacity:
            _fail(
                f"warm-up threshold {threshold} rows (algo.learning_starts={self.learning_starts} x "
                f"algo.num_envs={self.num_envs}) exceeds the replay capacity {capacity}; "
                "lower algo.learning_starts or raise algo.replay_buffer_n"
            )

    @property
    def replay_capacity(self) -> int:
        """Rows C of the device ring: ``replay_buffer_n * num_envs``."""
        return self.replay_buffer_n * self.num_envs

    def resolved_lr_decay_steps(self, iterations: int | None = None) -> tuple[int, int, int]:
        """Cosine period T of the (actor, critic, temperature) schedules, in their own updates.

        ``lr_decay_steps`` when set; when null, the updates each optimizer makes in
        ``iterations`` (default ``max_iterations``): the critic steps ``updates_per_step``
        times per iteration, the actor and the temperature
        ``ceil(updates_per_step / policy_frequency)`` times. Without either (a time budget
        before its first forecast) the period is :data:`UNSIZED_DECAY_STEPS`: peak rate.
        """
        if self.lr_decay_steps is not None:
            return (self.lr_decay_steps,) * 3
        horizon = iterations if iterations is not None else self.max_iterations
        if horizon is None:
            return (UNSIZED_DECAY_STEPS,) * 3
        horizon = max(int(horizon), 1)
        policy = -(-self.updates_per_step // self.policy_frequency) * horizon
        return policy, self.updates_per_step * horizon, policy

    @property
    def warmup_ticks(self) -> int:
        """W, the ticks before the first iteration (docs/flashsac.md §update-schedule)."""
        return warmup_ticks(self.learning_starts, self.batch_size, self.num_envs)

    @property
    def total_env_steps(self) -> int | None:
        """``(W + max_iterations) * num_envs`` (docs/configuration.md); None without a cap."""
        if self.max_iterations is None:
            return None
        return (self.warmup_ticks + self.max_iterations) * self.num_envs

    def resolved_target_entropy(self, action_dim: int) -> float:
        """``target_entropy`` or, when null, ``|A| * 0.5 * ln(2 pi e sigma_t^2)``."""
        if self.target_entropy is not None:
            return float(self.target_entropy)
        return target_entropy_for(action_dim, self.temp_target_sigma)

    def resolved_amp_dtype(self, device_type: str) -> Literal["bf16", "fp32"]:
        """The matmul precision actually used on ``device_type`` (CPU is always fp32)."""
        if device_type != "cuda" or not self.use_amp or self.amp_dtype == "fp32":
            return "fp32"
        return "bf16"


def warmup_ticks(learning_starts: int, batch_size: int, num_envs: int) -> int:
    """W = max(learning_starts, ceil(B/N)): ticks whose rows only fill the replay."""
    return max(learning_starts, -(-batch_size // num_envs))


def target_entropy_for(action_dim: int, sigma: float) -> float:
    """H-bar = |A| * 0.5 * ln(2 pi e sigma^2) (docs/flashsac.md §losses; -13.867262 for 29, 0.15)."""
    return action_dim * 0.5 * math.log(2.0 * math.pi * math.e * sigma * sigma)


_POSITIVE_INTS = (
    "num_envs", "max_iterations", "batch_size", "updates_per_step", "policy_frequency",
    "replay_buffer_n", "actor_hidden_dim", "critic_hidden_dim",
    "num_blocks", "num_atoms", "noise_max_repeat", "save_interval",
)  # fmt: skip
_POSITIVE_REALS = (
    "actor_lr", "critic_lr", "temp_lr", "temp_initial", "temp_target_sigma", "normalized_g_max",
)  # fmt: skip

# Values the error messages suggest ("use e.g. ..."): hints for a fix, not defaults (the
# owner YAML holds the values a run uses).
_EXAMPLES: dict[str, object] = {
    "num_envs": 2048, "max_iterations": 25000, "batch_size": 2048, "updates_per_step": 4,
    "policy_frequency": 2, "replay_buffer_n": 512, "actor_hidden_dim": 128,
    "critic_hidden_dim": 256, "num_blocks": 2, "num_atoms": 101, "noise_max_repeat": 16,
    "save_interval": 1000, "learning_starts": 98, "lr_warmup_steps": 0, "actor_lr": 0.0003,
    "critic_lr": 0.0003, "temp_lr": 0.0003, "temp_initial": 0.01, "temp_target_sigma": 0.15,
    "normalized_g_max": 5.0,
}  # fmt: skip


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fail(message: str) -> None:
    raise FlashSacConfigError(message)
