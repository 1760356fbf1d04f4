"""``FlashSacLearner``: networks, optimizers, replay and the update cycle (docs/flashsac.md §losses, §reward-scaling, §exploration, §update-schedule, §replay).

The math lives in ``losses``; this module only orchestrates. One iteration is
``prepare_iteration()`` (fold reward statistics, fix D) then ``update_cycle()``: sample
``U*B`` rows and the cycle's noise into static buffers (eager, two kernels), then run the
body - U critic updates, an actor and a temperature update after every ``policy_frequency``-th
critic update, Polyak after each - either eagerly or by replaying one CUDA graph of it
(``trainer.cuda_graphs``). Both paths read the same static buffers, so they compute the
same thing. Metrics come back as device tensors; nothing in the hot path syncs the host.
``act()`` reads a snapshot of the actor (the *policy*) that each cycle publishes at its end,
so on CUDA the action can be served on its own stream while the next cycle runs
(docs/runtime.md "Inference stream"); the snapshot equals the actor the action would have
read on one stream.
What a checkpoint holds of it, and the restore, live in ``learner_state``.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from contracts.env_spec import EnvSpec
from trainer import cuda_graphs
from trainer.algo import learner_state, losses, norms
from trainer.algo.config import FlashSacCfg
from trainer.algo.exploration import RepeatedNoise
from trainer.algo.fusion import CompileOptions, CycleFusion, LossFns, compile_losses, compile_renorm
from trainer.algo.networks import Actor, Critic
from trainer.algo.policy_average import PolicyAverage
from trainer.algo.polyak import PolyakTarget, module_tensors
from trainer.algo.replay import DeviceReplay
from trainer.algo.reward_scaler import RewardScaler
from trainer.algo.schedule import cosine_lr_tensor
from trainer.compile_mode import compile_in_process, compile_threads, skip_multi_kernel_cache

log = logging.getLogger(__name__)

CYCLE_METRIC_NAMES: tuple[str, ...] = (
    "Loss/critic",
    "Loss/actor",
    "Loss/entropy",
    "Loss/temperature",
    "Policy/temperature",
    "Critic/q_mean",
    "Critic/q_target_mean",
    "Critic/batch_reward_scaled",
    "Train/lr_actor",
    "Train/lr_critic",
    "Train/lr_temperature",
    "Policy/obs_bn_mean_shift",
    "Policy/obs_bn_var_shift",
)
"""What the update body computes on the device, in every configuration (cycle means)."""
REWARD_METRIC_NAMES: tuple[str, ...] = (
    "Train/reward_scale_std",
    "Train/reward_return_mean",
    "Train/reward_return_abs_max",
    "Train/reward_scale",
    "Critic/return_estimate",
)
"""The reward normaliser's statistics: computed always, reported only with ``normalize_reward``."""
EAGER_METRIC_NAMES: tuple[str, ...] = (
    "Train/replay_sample_age",
    "Train/replay_fill",
    "Train/bf16",
)
"""Computed outside the update body (sampling, the ring's size, the precision)."""
METRIC_NAMES: tuple[str, ...] = CYCLE_METRIC_NAMES + REWARD_METRIC_NAMES + EAGER_METRIC_NAMES
"""Every key ``update_cycle()`` may return (device scalars; docs/metrics.md)."""
_BN_EPS = 1e-6

_ACTOR, _CRITIC, _TEMP = (
    learner_state.OPTIMIZER_NAMES.index(n) for n in ("actor", "critic", "temperature")
)
_ADAM_BETAS = (0.9, 0.999)
_ADAM_EPS = 1e-8


class FlashSacLearner:
    """The FlashSAC learner of one process: owns networks, optimizers, replay and exploration."""

    def __init__(
        self,
        cfg: FlashSacCfg,
        spec: EnvSpec,
        *,
        num_envs: int,
        device: torch.device | str,
        fusion: CycleFusion | None = None,
    ) -> None:
        """Build the learner for an env of ``spec``; ``fusion`` picks the compiled fusions.

        ``spec`` sizes the networks, the replay rows and the action noise (the env's
        ``spec``, or the task's torch-free ``G1_TRACKING_SPEC`` before any env exists).

        Default: the ``algo.fuse_*`` keys (the profile passes its variants).
        """
        cfg.validate()
        self.cfg = cfg
        self.num_envs = num_envs
        self.device = _resolve_device(device)
        self.spec = spec
        self.layout = spec.row
        self.batch_size = cfg.batch_size
        self.updates_per_step = cfg.updates_per_step
        self.target_entropy = cfg.resolved_target_entropy(spec.action_dim)
        self.fusion = CycleFusion.from_cfg(cfg) if fusion is None else fusion
        self._init_precision()
        self._init_networks()
        self._init_optimizers()
        self._init_data()
        self._init_static_buffers()
        self._init_graphs_and_compile()

    # ----------------------------------------------------------------- construction helpers
    def _init_precision(self) -> None:
        self.precision = self.cfg.resolved_amp_dtype(self.device.type)
        self.tf32_matmul = False
        if self.device.type == "cuda":
            # fp32 matmuls that remain (and the whole fp32 mode) may use TF32 tensor cores.
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            self.tf32_matmul = bool(torch.backends.cuda.matmul.allow_tf32)

    def _init_networks(self) -> None:
        cfg, lay = self.cfg, self.layout
        if cfg.seed is not None:
            torch.manual_seed(cfg.seed)

        def critic() -> Critic:
            return Critic(
                lay.critic_obs_dim, lay.action_dim, cfg.critic_hidden_dim, cfg.num_blocks,
                cfg.num_atoms,
            )  # fmt: skip

        # Built on the CPU (reproducible orthogonal init), then moved.
        actor = Actor(lay.obs_dim, lay.action_dim, cfg.actor_hidden_dim, cfg.num_blocks)
        self.actor = actor.to(self.device)
        self.policy = copy.deepcopy(self.actor).requires_grad_(False)
        """What ``act()`` reads: the actor as of the last ``update_cycle()`` (``_publish_policy``)."""
        self._actor_tensors = module_tensors(self.actor)
        self._policy_tensors = module_tensors(self.policy)
        self.critic = critic().to(self.device)
        self.critic_target = critic()
        self.critic_target.to(self.device).load_state_dict(self.critic.state_dict())
        self.critic_target.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(cfg.temp_initial), device=self.device))
        self.support = torch.linspace(
            cfg.critic_min_v, cfg.critic_max_v, cfg.num_atoms, device=self.device
        )
        norms.prepare_device(self.device)
        self.actor_plan = self.actor.renorm_plan()
        self.critic_plan = self.critic.renorm_plan()
        self._renorm: dict[str, Callable[[], None]] = {
            "actor": self.actor_plan.apply,
            "critic": self.critic_plan.apply,
        }
        self._critic_params = list(self.critic.parameters())
        self._polyak_target = PolyakTarget(self.critic, self.critic_target)
        rate = cfg.policy_average_rate
        self.policy_average = PolicyAverage(self.actor, rate) if rate > 0 else None
        """The averaged policy that checkpoints carry for evaluation and export (None: off)."""

    def _init_optimizers(self) -> None:
        cfg = self.cfg
        self._fused = self.device.type == "cuda"
        peaks = (cfg.actor_lr, cfg.critic_lr, cfg.temp_lr)
        self.optimizers = [
            self._make_adam(list(module_params), peak, self._fused)
            for module_params, peak in (
                (self.actor.parameters(), peaks[_ACTOR]),
                (self.critic.parameters(), peaks[_CRITIC]),
                ([self.log_alpha], peaks[_TEMP]),
            )
        ]
        self.lr_steps = torch.zeros(3, dtype=torch.float32, device=self.device)
        """Updates made by each schedule (actor, critic, temperature); skipped steps count."""
        policy_updates = -(-cfg.updates_per_step // cfg.policy_frequency)
        self._cycle_steps = torch.tensor(
            [policy_updates, cfg.updates_per_step, policy_updates],
            dtype=torch.float32,
            device=self.device,
        )
        self._peak_column = torch.tensor(peaks, dtype=torch.float32, device=self.device)[:, None]
        self._decay_column = torch.tensor(
            cfg.resolved_lr_decay_steps(), dtype=torch.float32, device=self.device
        )[:, None]
        self._step_offsets = torch.arange(
            cfg.updates_per_step, dtype=torch.float32, device=self.device
        )

    def _init_data(self) -> None:
        cfg, num_envs = self.cfg, self.num_envs
        self.replay = DeviceReplay(cfg.replay_buffer_n * num_envs, self.layout, self.device)
        self.reward_scaler = RewardScaler(
            num_envs,
            gamma=cfg.gamma,
            g_max=cfg.normalized_g_max,
            device=self.device,
            horizon=cfg.reward_scale_horizon,
        )
        self.exploration = RepeatedNoise(
            num_envs,
            self.layout.action_dim,
            zeta_mu=cfg.noise_zeta_mu,
            max_repeat=cfg.noise_max_repeat,
            device=self.device,
        )
        self._folded_rows = 0
        self.update_count = 0
        """Critic updates made (U per iteration)."""
        self.iterations = 0
        """Update cycles made."""

    def _init_static_buffers(self) -> None:
        cfg, lay, dev = self.cfg, self.layout, self.device
        rows = cfg.updates_per_step * cfg.batch_size
        self._batch = torch.zeros(rows, lay.width, device=dev)  # [U*B, width]
        self._noise = torch.zeros(
            cfg.updates_per_step, 2, cfg.batch_size, lay.action_dim, device=dev
        )
        self._inv_scale = torch.ones((), device=dev)  # 1/D, fixed within a cycle
        self._metrics = torch.zeros(len(CYCLE_METRIC_NAMES) + len(REWARD_METRIC_NAMES), device=dev)
        self._metric_names = CYCLE_METRIC_NAMES + (
            REWARD_METRIC_NAMES if cfg.normalize_reward else ()
        )
        bn = self.actor.trunk.input_bn
        self._bn_previous = torch.stack([bn.running_mean, bn.running_var]).clone()
        self._bf16 = torch.full((), float(self.precision == "bf16"), device=dev)
        self._act_obs = torch.zeros(self.num_envs, lay.obs_dim, device=dev)
        self._act_done = torch.zeros(self.num_envs, dtype=torch.bool, device=dev)
        self._act_out = torch.zeros(self.num_envs, lay.action_dim, device=dev)
        self._init_act_stream()

    def _init_act_stream(self) -> None:
        """On CUDA: the high-priority stream ``act()`` is served on (``acting()``) and the two
        events that order it against the policy copy of each cycle."""
        self._act_stream: torch.cuda.Stream | None = None
        if self.device.type != "cuda":
            return
        _, highest = torch.cuda.Stream.priority_range()
        self._act_stream = torch.cuda.Stream(self.device, priority=highest)
        self._policy_ready = torch.cuda.Event()  # recorded after each policy copy
        self._policy_read = torch.cuda.Event()  # recorded after each act's kernels

    def _init_graphs_and_compile(self) -> None:
        requested = self.cfg.use_cuda_graph
        self._graph_status = cuda_graphs.GraphStatus(requested=requested)
        self._act_graph_status = cuda_graphs.GraphStatus(requested=requested)
        reason = cuda_graphs.unavailable_reason(requested, self.device, "algo.use_cuda_graph")
        self._graph_status.disable_reason = reason
        self._act_graph_status.disable_reason = reason
        self._graph: torch.cuda.CUDAGraph | None = None
        self._act_graph: torch.cuda.CUDAGraph | None = None
        self._compile_status = cuda_graphs.GraphStatus(requested=self.cfg.use_compile)
        self._td_target: Callable[..., Tensor] = _td_target
        self._loss_fns = LossFns()
        self._critic_t: Callable[..., Tensor] = self.critic.forward_t
        self._target_t: Callable[..., Tensor] = self.critic_target.forward_t
        self._fusion_active = CycleFusion.none()
        self._fallbacks: list[dict[str, str]] = []
        self._setup_compile()

    def set_lr_horizon(self, iterations: int) -> None:
        """Re-size a whole-run cosine (``lr_decay_steps: null``) to ``iterations`` in total.

        A time budget learns the run's length only as it goes: the runtime forecasts it from
        the measured rate and calls this about once a second (docs/configuration.md). Filled
        in place with host scalars (no copy, no sync), so a captured update cycle reads the new
        period on its next replay.
        """
        if self.cfg.lr_decay_steps is not None:
            raise ValueError("set_lr_horizon needs algo.lr_decay_steps=null (a whole-run cosine)")
        for row, period in enumerate(self.cfg.resolved_lr_decay_steps(iterations)):
            self._decay_column[row].fill_(float(period))

    def _make_adam(self, params: list[nn.Parameter], peak: float, fused: bool) -> torch.optim.Adam:
        if fused:
            lr: float | Tensor = torch.tensor(peak, dtype=torch.float32, device=self.device)
            opt = torch.optim.Adam(
                params, lr=lr, betas=_ADAM_BETAS, eps=_ADAM_EPS, fused=True, capturable=True
            )
        else:
            opt = torch.optim.Adam(params, lr=peak, betas=_ADAM_BETAS, eps=_ADAM_EPS, foreach=False)
        # State exists from the start so that graph warm-up can be undone by copying values.
        for p in params:
            opt.state[p] = {
                "step": torch.zeros((), dtype=torch.float32, device=p.device if fused else "cpu"),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }
        return opt

    def _setup_compile(self) -> None:
        status = self._compile_status
        if not status.requested:
            status.disable_reason = "disabled by algo.use_compile=false"
        elif self.device.type != "cuda":
            status.disable_reason = f"device {self.device} is not CUDA; eager loss maths"
        elif not hasattr(torch, "compile"):
            status.disable_reason = "torch.compile is unavailable"
        else:
            compile_in_process()  # before the first compile: no inductor worker pool
            status.enabled = True
            self._enable_fusion(self.fusion)

    def _enable_fusion(self, fusion: CycleFusion, backend: str = "inductor") -> None:
        """Compile the fusions ``fusion`` asks for (once compile is on; tests pass ``backend``)."""
        self._fusion_active = fusion
        options = fusion.compile_options(backend)
        if options and options.get("triton.multi_kernel"):
            skip_multi_kernel_cache()  # a warm process's saved pick cannot be read
        if self._compile_status.enabled:
            self._td_target = torch.compile(
                _td_target, fullgraph=True, dynamic=False, backend=backend, options=options
            )
        self._loss_fns = compile_losses(backend, options) if fusion.losses else LossFns()
        plans = {"actor": self.actor_plan, "critic": self.critic_plan}
        self._renorm = {
            name: compile_renorm(plan, backend, options) if fusion.renorm else plan.apply
            for name, plan in plans.items()
        }
        self._compile_networks(fusion.networks, backend, options)

    def _compile_networks(
        self, whole: bool, backend: str, options: CompileOptions | None = None
    ) -> None:
        """Compile every network whole (``whole``), else its trunk alone while compile is on,
        else nothing. Trunk alone: inductor fuses BN statistics, ReLU, residual adds and casts
        around the cuBLAS matmuls (forward and backward), one compiled variant per BN mode."""
        nets = (self.actor, self.critic, self.critic_target, self.policy)
        for net in nets:
            net._compiled_call_impl = None  # back to the eager forward
            net.trunk._compiled_call_impl = None
        self._critic_t, self._target_t = self.critic.forward_t, self.critic_target.forward_t
        if whole:
            for net in nets:
                net.compile(dynamic=False, backend=backend, options=options)
            self._critic_t, self._target_t = (
                torch.compile(f, dynamic=False, backend=backend, options=options)
                for f in (self.critic.forward_t, self.critic_target.forward_t)
            )
        elif self._compile_status.enabled:
            for net in nets:
                net.trunk.compile(dynamic=False, backend=backend, options=options)

    def acting(self) -> contextlib.AbstractContextManager:
        """Where the tick loop serves ``act()``: the learner's high-priority inference stream
        on CUDA, so that an action never queues behind the update cycle (a no-op on the CPU).
        The ring's event waits and records inside it run on that stream too."""
        if self._act_stream is None:
            return contextlib.nullcontext()
        return torch.cuda.stream(self._act_stream)

    def _amp(self) -> contextlib.AbstractContextManager:
        if self.precision == "bf16":
            # No weight cache: weights change between the forwards of one cycle/graph.
            return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
        return contextlib.nullcontext()

    # -------------------------------------------------------------------------- inference
    def act(self, obs: Tensor, done: Tensor) -> Tensor:
        """Exploration actions ``[N, A]`` for ``obs [N, obs_dim]`` and the published ``done [N]``.

        Eval-mode policy (the actor as of the last cycle) under no-grad with repeated noise
        (docs/flashsac.md §exploration); a CUDA graph on CUDA. On CUDA the caller's stream
        waits for the last policy copy, and the next copy waits for this act's kernels.
        """
        if obs.shape != self._act_obs.shape or done.shape != self._act_done.shape:
            raise ValueError(
                f"act() takes obs {tuple(self._act_obs.shape)} and done {tuple(self._act_done.shape)}, "
                f"got {tuple(obs.shape)} and {tuple(done.shape)}"
            )
        self._act_obs.copy_(obs, non_blocking=True)
        self._act_done.copy_(done, non_blocking=True)
        self._ensure_act_graph()
        stream = self._ordered_stream()
        if stream is not None:
            stream.wait_event(self._policy_ready)
        if self._act_graph is not None:
            self._act_graph.replay()
        else:
            self._act_body()
        if stream is not None:
            self._policy_read.record(stream)
        return self._act_out.clone()

    @torch.no_grad()
    def act_deterministic(self, obs: Tensor) -> Tensor:
        """``tanh(mu)`` in BN eval mode (evaluation)."""
        with self._amp():
            mu, _ = self.actor(obs.to(self.device), training=False)
        return torch.tanh(mu.float())

    @torch.no_grad()
    def _act_body(self) -> None:
        eps = self.exploration.step(self._act_done)
        with self._amp():
            mu, rho = self.policy(self._act_obs, training=False)
        std = losses.log_std_from_rho(rho.float()).exp()
        self._act_out.copy_(torch.tanh(mu.float() + std * eps))

    # ------------------------------------------------------------------------- iteration
    def prepare_iteration(self) -> None:
        """Fold the reward statistics of complete ticks committed since the last call (docs/flashsac.md §reward-scaling).

        D is then fixed for the next ``update_cycle()``. A partial tick (fewer than N rows)
        waits for the next call.
        """
        if not self.cfg.normalize_reward:
            return
        pending = (self.replay.committed - self._folded_rows) // self.num_envs * self.num_envs
        if pending > 0:
            start, end = self._folded_rows, self._folded_rows + pending
            reward = self.replay.column_range(self.layout.reward, start, end).view(
                -1, self.num_envs
            )
            done = self.replay.column_range(self.layout.done, start, end).view(-1, self.num_envs)
            self.reward_scaler.fold(reward, done)
            self._folded_rows = end
        torch.reciprocal(self.reward_scaler.scale(), out=self._inv_scale)

    def update_cycle(self) -> dict[str, Tensor]:
        """One iteration's updates (docs/flashsac.md §update-schedule); returns device scalars keyed by ``METRIC_NAMES``."""
        self.replay.sample_into(self._batch)
        self._noise.normal_()
        self._ensure_cycle_graph()
        self.run_cycle_body()
        self._publish_policy()
        if self.policy_average is not None:
            self.policy_average.update()
        self.iterations += 1
        self.update_count += self.updates_per_step
        values = self._metrics.clone()
        metrics = {name: values[i] for i, name in enumerate(self._metric_names)}
        metrics.update(self._replay_metrics())
        metrics["Train/bf16"] = self._bf16
        return metrics

    def _replay_metrics(self) -> dict[str, Tensor]:
        """Mean age of this cycle's sampled rows (in iterations: ticks of N rows) and the
        ring's fill, from the sampled indices and host counters: kernels only, no sync."""
        replay = self.replay
        pointer = replay.committed % replay.capacity
        age_rows = torch.remainder(pointer - 1 - replay.last_index, replay.capacity)
        return {
            "Train/replay_sample_age": age_rows.float().mean() / self.num_envs,
            "Train/replay_fill": torch.full((), replay.size / replay.capacity, device=self.device),
        }

    def run_cycle_body(self) -> None:
        """The update body once on the current static buffers: the graph when captured.

        ``update_cycle()`` minus sampling and counters; the profile (``trainer.bench.
        learner_profile``) times and profiles exactly the captured cycle with it.
        """
        if self._graph is not None:
            self._graph.replay()
        else:
            self._cycle_body()

    def _ordered_stream(self) -> torch.cuda.Stream | None:
        """The caller's stream where acting and updating run on two streams (CUDA), else None."""
        return None if self._act_stream is None else torch.cuda.current_stream(self.device)

    def _publish_policy(self) -> None:
        """Copy the actor into ``policy`` (one foreach copy, outside the cycle graph).

        On CUDA the copy first waits for the last ``act()`` to finish reading the policy and
        then records ``_policy_ready``, which the next ``act()`` waits for: the action of the
        next tick reads exactly the actor this cycle left, while the cycle itself never
        waits for an action.
        """
        stream = self._ordered_stream()
        if stream is not None:
            stream.wait_event(self._policy_read)
        with torch.no_grad():
            torch._foreach_copy_(self._policy_tensors, self._actor_tensors)
        if stream is not None:
            self._policy_ready.record(stream)

    def capture_graphs(self) -> None:
        """Compile and capture ``act()`` and the update cycle now, before any data exists.

        Both graphs read only static buffers (observations, batch, noise), and capture restores
        every tensor the warm-up calls touched, so capturing on the zero buffers equals
        capturing at the first call. The runtime calls this while the collector builds its env,
        so the two slow startups overlap instead of adding up. Without CUDA graphs (CPU, or
        ``algo.use_cuda_graph=false``) it does nothing; ``act``/``update_cycle`` still capture
        lazily if it was never called.
        """
        self._ensure_act_graph()
        self._ensure_cycle_graph()

    def _ensure_act_graph(self) -> None:
        if self._act_graph is None and self._act_graph_status.disable_reason is None:
            self._act_graph = self._capture(
                self._act_body, self.exploration.tensors(), self._act_graph_status
            )

    def _ensure_cycle_graph(self) -> None:
        if self._graph is None and self._graph_status.disable_reason is None:
            self._graph = self._capture(self._cycle_body, self._cycle_state(), self._graph_status)

    def _capture(
        self, body: Callable[[], None], state: list[Tensor], status: cuda_graphs.GraphStatus
    ) -> torch.cuda.CUDAGraph | None:
        try:
            graph = cuda_graphs.capture_graph(body, state)
        except Exception as err:  # any capture failure falls back, recorded
            # the record keeps 300 characters; the console gets the whole traceback
            log.warning("learner graph warm-up/capture failed", exc_info=err)
            if self._fusion_active != CycleFusion.none():
                self._fell_back("fusion", f"graph warm-up/capture failed: {err!r}"[:300])
                self._enable_fusion(CycleFusion.none())
                return self._capture(body, state, status)
            if self._compile_status.enabled:
                self._disable_compile(f"graph warm-up/capture failed with compile: {err!r}"[:300])
                return self._capture(body, state, status)
            status.enabled = False
            status.disable_reason = f"capture failed: {type(err).__name__}: {err}"[:300]
            feature = "act_graph" if status is self._act_graph_status else "cycle_graph"
            self._fell_back(feature, status.disable_reason)
            return None
        status.enabled = True
        status.disable_reason = None
        return graph

    def _disable_compile(self, reason: str) -> None:
        self._compile_status.enabled = False
        self._compile_status.disable_reason = reason
        self._td_target = _td_target
        self._enable_fusion(CycleFusion.none())  # compile is off: every network eager
        self._fell_back("compile", reason)

    def _fell_back(self, feature: str, reason: str) -> None:
        """Record that ``feature`` was asked for and ran, then was dropped at run time (the
        soak fails on any: docs/contracts.md §verdict)."""
        self._fallbacks.append({"feature": feature, "reason": reason})
        log.warning("learner %s fell back: %s", feature, reason)

    def _cycle_state(self) -> list[Tensor]:
        tensors: list[Tensor] = [
            self.log_alpha.data, self.lr_steps, self._metrics, self._bn_previous,
        ]  # fmt: skip
        for module in (self.actor, self.critic, self.critic_target):
            tensors += module_tensors(module)
        for opt in self.optimizers:
            for group in opt.param_groups:
                if isinstance(group["lr"], Tensor):
                    tensors.append(group["lr"])
            for state in opt.state.values():
                tensors += [state["step"], state["exp_avg"], state["exp_avg_sq"]]
        return tensors

    def _cycle_body(self) -> None:
        critic_losses, actor_losses, entropies, temp_losses = [], [], [], []
        critic_stats: list[Tensor] = []
        # lr of every update of this cycle, one small kernel chain: [3, U] (actor, critic, temp)
        self._lr_table = cosine_lr_tensor(
            self.lr_steps.unsqueeze(1) + self._step_offsets,
            peak=self._peak_column,
            end=self.cfg.lr_end,
            decay_steps=self._decay_column,
            warmup_steps=self.cfg.lr_warmup_steps,
        )
        for k in range(self.updates_per_step):
            rows = self._batch[k * self.batch_size : (k + 1) * self.batch_size]  # [B, width]
            critic_loss, critic_ok, stats = self._critic_update(rows, self._noise[k, 0], k)
            critic_losses.append(critic_loss)
            critic_stats.append(stats)
            if k % self.cfg.policy_frequency == 0:
                actor_loss, temp_loss, entropy = self._actor_update(
                    rows, self._noise[k, 1], k // self.cfg.policy_frequency
                )
                actor_losses.append(actor_loss)
                temp_losses.append(temp_loss)
                entropies.append(entropy)
            self._polyak(critic_ok)
        with torch.no_grad():
            metrics = [
                torch.stack(critic_losses).mean(),
                torch.stack(actor_losses).mean(),
                torch.stack(entropies).mean(),
                torch.stack(temp_losses).mean(),
                self.log_alpha.exp(),
                *torch.stack(critic_stats).mean(0),
                *self._lr_table[:, 0],  # this cycle's first rate of each schedule
                *self._actor_input_drift(),
                *self._reward_statistics(),
            ]
            self._metrics.copy_(torch.stack(metrics))
            self.lr_steps.add_(self._cycle_steps)  # schedules advance even on skipped steps

    def _actor_input_drift(self) -> tuple[Tensor, Tensor]:
        """How far this cycle moved the actor's input BatchNorm statistics (the only
        observation normaliser): the mean shift in running standard deviations and the mean
        absolute log ratio of the running variances; then remember them for the next cycle."""
        bn = self.actor.trunk.input_bn
        mean, var = bn.running_mean, bn.running_var
        previous_mean, previous_var = self._bn_previous
        mean_shift = ((mean - previous_mean).abs() / (var.sqrt() + _BN_EPS)).mean()
        var_shift = ((var + _BN_EPS).log() - (previous_var + _BN_EPS).log()).abs().mean()
        self._bn_previous.copy_(torch.stack([mean, var]))
        return mean_shift, var_shift

    def _reward_statistics(self) -> tuple[Tensor, ...]:
        """sigma_G, mu_G, G_max, the scale D and mu_G / D (the return in the critic's units)."""
        scaler = self.reward_scaler
        return (
            scaler.var.sqrt(),
            scaler.mean.clone(),
            scaler.max_abs_return.clone(),
            self._inv_scale.reciprocal(),
            scaler.mean * self._inv_scale,
        )

    def _critic_update(
        self, rows: Tensor, eps: Tensor, index: int
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One critic step; returns the loss, the step's ``finite`` flag and ``[mean Q of the
        online critic (both members), mean Q of the TD target, mean scaled batch reward]``."""
        L, B = self.layout, self.batch_size
        cobs, action = rows[:, L.critic_obs], rows[:, L.action]
        with torch.no_grad():
            with self._amp():
                mu, rho = self.actor(rows[:, L.next_obs], training=False)
            next_action, next_log_prob = self._loss_fns.sample(mu, rho, eps)
            x_t = torch.cat(
                [
                    torch.cat([cobs, action], 1),
                    torch.cat([rows[:, L.next_critic_obs], next_action], 1),
                ],
                0,
            ).t()  # [in, 2B]: [c; c'] with [a; a']
            with self._amp():
                # BN statistics over all 2B rows; only the c' half reaches the head
                next_log_probs = self._target_t(
                    x_t, training=True, track=False, rows=slice(B, None)
                )  # [E, B, K]
            target = self._td_target(
                next_log_probs,
                rows[:, L.reward] * self._inv_scale,
                losses.bootstrap_mask(rows[:, L.done], rows[:, L.trunc]),
                self.log_alpha.exp() * next_log_prob,
                self.support,
                self.cfg.gamma,
            )  # [B, K]
        with self._amp():
            log_probs = self._critic_t(x_t, training=True, rows=slice(0, B))  # [E, B, K]
        loss = self._loss_fns.critic(target, log_probs)
        with torch.no_grad():
            stats = torch.stack(
                [
                    losses.expected_q(log_probs.detach().float(), self.support).mean(),
                    (target * self.support).sum(-1).mean(),
                    (rows[:, L.reward] * self._inv_scale).mean(),
                ]
            )
        ok = self._step(_CRITIC, loss, index)
        self._renorm["critic"]()
        return loss.detach(), ok, stats

    def _actor_update(self, rows: Tensor, eps: Tensor, index: int) -> tuple[Tensor, Tensor, Tensor]:
        L, B = self.layout, self.batch_size
        obs_pair = torch.cat([rows[:, L.obs], rows[:, L.next_obs]], 0)  # [2B, obs]
        with self._amp():
            mu, rho = self.actor(obs_pair, training=True, rows=B)  # BN over 2B rows, heads on o
        action, log_prob = self._loss_fns.sample(mu, rho, eps)
        for p in self._critic_params:
            p.requires_grad_(False)
        try:
            with self._amp():
                log_probs = self.critic(rows[:, L.critic_obs], action, training=False)  # [E, B, K]
        finally:
            for p in self._critic_params:
                p.requires_grad_(True)
        loss = self._loss_fns.actor(log_probs, self.support, log_prob, self.log_alpha.exp())
        self._step(_ACTOR, loss, index)
        self._renorm["actor"]()
        temp_loss, entropy = self._loss_fns.temperature(
            self.log_alpha, log_prob, self.target_entropy
        )
        self._step(_TEMP, temp_loss, index)
        return loss.detach(), temp_loss.detach(), entropy

    def _step(self, which: int, loss: Tensor, index: int) -> Tensor:
        """Backward + Adam step unless ``loss`` is non-finite (the schedule advances anyway).

        ``index`` is this optimizer's update number within the cycle. Returns the 0-dim
        float ``finite`` flag (1 = stepped).
        """
        opt = self.optimizers[which]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        finite = torch.isfinite(loss.detach()).float()
        lr = self._lr_table[which, index]
        if self._fused:
            opt.param_groups[0]["lr"].copy_(lr)
            opt.found_inf = 1.0 - finite  # fused Adam skips the step (and its count) on found_inf
            opt.step()
        else:
            opt.param_groups[0]["lr"] = float(lr)
            if bool(finite):  # CPU: reading a host value is no device sync
                opt.step()
        return finite

    def _polyak(self, critic_ok: Tensor) -> None:
        """``target += tau * (critic - target)``: a gather and one lerp (``trainer/algo/polyak.py``)."""
        self._polyak_target.update(critic_ok * self.cfg.tau)  # skipped step: tau 0, target kept

    # ----------------------------------------------------------------- diagnostics, state
    def cuda_graph_diagnostics(self) -> dict:
        """``{requested, enabled, disable_reason}`` of the update-cycle graph, plus details and
        ``fallbacks``: what was dropped at run time, in order (``runtime_manifest.cuda_graph.learner``)."""
        out = self._graph_status.as_dict()
        out["act_graph"] = self._act_graph_status.as_dict()
        out["compile"] = {
            **self._compile_status.as_dict(),
            # 1 = inductor compiled in this process, no worker pool (trainer/compile_mode.py)
            "compile_threads": compile_threads(),
        }
        out["fusion"] = {
            "requested": self.fusion.as_dict(),
            "enabled": self._fusion_active.as_dict(),
            "disable_reason": next(
                (f["reason"] for f in self._fallbacks if f["feature"] == "fusion"), None
            ),
        }
        out["act_stream"] = {
            "enabled": self._act_stream is not None,
            "priority": None if self._act_stream is None else self._act_stream.priority,
        }
        out["precision"] = self.precision
        out["tf32_matmul"] = self.tf32_matmul
        out["fallbacks"] = [dict(f) for f in self._fallbacks]
        return out

    def state_dict(self) -> dict:
        """Networks, target, log alpha, optimizers, schedules, reward scaler, exploration, counts."""
        return learner_state.state_dict(self)

    def load_state_dict(self, state: dict) -> None:
        """Restore ``state_dict()`` output in place (captured graphs stay valid); the policy
        that ``act()`` reads is the restored actor."""
        learner_state.load_state_dict(self, state)
        self._publish_policy()
        bn = self.actor.trunk.input_bn  # the drift metric starts from the restored statistics
        self._bn_previous.copy_(torch.stack([bn.running_mean, bn.running_var]))


def _resolve_device(device: torch.device | str) -> torch.device:
    """``device`` with the current CUDA index filled in (captured graphs need an index)."""
    resolved = torch.device(device)
    if resolved.type == "cuda" and resolved.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return resolved


def _td_target(
    next_log_probs: Tensor,
    reward: Tensor,
    mask: Tensor,
    entropy_term: Tensor,
    support: Tensor,
    gamma: float,
) -> Tensor:
    """Min-Q member selection then C51 projection: ``[E, B, K]`` -> ``[B, K]`` (pure, compilable)."""
    next_probs = losses.select_min_q_member(next_log_probs, support)
    return losses.categorical_projection(next_probs, reward, mask, gamma, entropy_term, support)
