"""The collector's metrics report: its layout in the control block, the window it sums
over, the seqlock write (collector side) and read (learner side).

Every ``collector_metrics_interval`` ticks the collector publishes one report into the
floats area of the control block (``REPORT_FIELDS``, then the reward terms in the order
it published once in its text area); the learner copies it under the seqlock when it logs.
"""

from __future__ import annotations

import json
import math
import time

import torch

from trainer.runtime.control import ControlBlock, Word
from trainer.runtime.inference_ring import InferenceRing

# Fixed part of the metrics report (floats area of the control block), then reward terms.
REPORT_FIELDS: tuple[str, ...] = (
    "tick",
    "window_ticks",
    "Perf/collector_inference_request_ms",
    "Perf/collector_learner_action_wait_ms",
    "Perf/collector_env_step_ms",
    "Perf/collector_transition_extract_ms",
    "Perf/collector_replay_write_ms",
    "Perf/collector_metrics_publish_ms",
    "Perf/collector_inference_queue_depth",
    "Perf/collector_inference_action_backlog",
    "Perf/collector_inference_max_action_backlog",
    "Perf/collector_inference_in_flight",
    "Perf/collector_inference_max_in_flight",
    "Perf/collector_inference_publication_lag",
    "Perf/collector_inference_max_publication_lag",
    "Train/mean_reward",
    "Train/mean_episode_length",
    "Episode/timeout_rate",
    "episodes_ended_total",
    "env_step_wall_s_total",
)
MAX_REWARD_TERMS = 64
EPISODE_WINDOW = 100


class EpisodeWindow:
    """Returns and lengths of the last 100 ended episodes, on device without host syncs.

    Each tick appends the ended rows and keeps the 100 most recent valid entries (a
    ``topk`` over positions), so the only sync is the report's single ``.cpu()``.
    """

    def __init__(self, num_envs: int, device: torch.device) -> None:
        self.returns = torch.full((EPISODE_WINDOW,), math.nan, device=device)
        self.lengths = torch.full((EPISODE_WINDOW,), math.nan, device=device)
        self._position = torch.arange(EPISODE_WINDOW + num_envs, device=device)
        self.ended = torch.zeros((), dtype=torch.float64, device=device)
        self.interval_ended = torch.zeros((), dtype=torch.float64, device=device)
        self.interval_timeouts = torch.zeros((), dtype=torch.float64, device=device)

    def add(
        self,
        done: torch.Tensor,
        truncated: torch.Tensor,
        ep_return: torch.Tensor,
        ep_length: torch.Tensor,
    ) -> None:
        nan = torch.full_like(self.returns[:1], math.nan)
        rets = torch.cat([self.returns, torch.where(done, ep_return.float(), nan)])  # [100 + N]
        lens = torch.cat([self.lengths, torch.where(done, ep_length.float(), nan)])  # [100 + N]
        score = torch.where(torch.isnan(rets), -1, self._position)
        keep = torch.topk(score, EPISODE_WINDOW).indices  # the 100 most recent ended episodes
        self.returns = rets[keep]
        self.lengths = lens[keep]
        count = done.sum()
        self.ended += count
        self.interval_ended += count
        self.interval_timeouts += (truncated & done).sum()

    def stats(self) -> torch.Tensor:
        """[mean return, mean length, timeout rate, ended total] (nan where undefined)."""
        rate = self.interval_timeouts / self.interval_ended.clamp(min=1.0)
        rate = torch.where(self.interval_ended > 0, rate, torch.full_like(rate, math.nan))
        out = torch.stack(
            [
                torch.nanmean(self.returns).double(),
                torch.nanmean(self.lengths).double(),
                rate,
                self.ended,
            ]
        )
        self.interval_ended.zero_()
        self.interval_timeouts.zero_()
        return out


class CollectorMetrics:
    """Host timings, flight maxima and reward-term sums since the last report."""

    def __init__(self) -> None:
        self.reward_terms: list[str] = []
        self.timers = dict.fromkeys(REPORT_FIELDS[2:8], 0.0)
        self.env_step_total_s = 0.0
        self.window_ticks = 0
        self.max_in_flight = 0
        self.max_publication_lag = 0
        self.max_action_backlog = 0
        self._reward_sums: torch.Tensor | None = None
        self._terms_published = False

    def accumulate_rewards(self, terms: dict[str, torch.Tensor]) -> None:
        if not terms:
            return
        if not self.reward_terms:
            self.reward_terms = list(terms)[:MAX_REWARD_TERMS]
        values = torch.stack(
            [terms[k].detach().reshape(()).double() for k in self.reward_terms]
        )  # [T]
        if self._reward_sums is None:
            self._reward_sums = torch.zeros_like(values)
        self._reward_sums += values

    def publish(self, block: ControlBlock, tick: int, episodes: EpisodeWindow) -> None:
        """Write one metrics report into the shared floats area under the seqlock."""
        start = time.perf_counter()
        ticks = max(self.window_ticks, 1)
        stats = episodes.stats()
        if self._reward_sums is not None:
            stats = torch.cat([stats, self._reward_sums / ticks])
            self._reward_sums.zero_()
        host = stats.cpu().tolist()  # the report's single host sync
        flight = InferenceRing.flight(block)
        values = {
            "tick": float(tick),
            "window_ticks": float(ticks),
            **{k: 1000.0 * v / ticks for k, v in self.timers.items()},
            "Perf/collector_inference_queue_depth": float(flight.queue_depth),
            "Perf/collector_inference_action_backlog": float(flight.action_backlog),
            "Perf/collector_inference_max_action_backlog": float(self.max_action_backlog),
            "Perf/collector_inference_in_flight": float(flight.publication_lag),
            "Perf/collector_inference_max_in_flight": float(self.max_in_flight),
            "Perf/collector_inference_publication_lag": float(flight.publication_lag),
            "Perf/collector_inference_max_publication_lag": float(self.max_publication_lag),
            "Train/mean_reward": host[0],
            "Train/mean_episode_length": host[1],
            "Episode/timeout_rate": host[2],
            "episodes_ended_total": host[3],
            "env_step_wall_s_total": self.env_step_total_s,
        }
        if not self._terms_published:
            # Written once, before the first report becomes visible (the learner reads the
            # names only after it saw a report).
            doc = json.loads(block.read_text() or "{}")
            doc["reward_terms"] = self.reward_terms
            block.write_text(json.dumps(doc))
            self._terms_published = True
        _write_seqlocked(block, [values[name] for name in REPORT_FIELDS], host[4:])
        self.timers = dict.fromkeys(self.timers, 0.0)
        self.timers["Perf/collector_metrics_publish_ms"] = time.perf_counter() - start
        self.window_ticks = 0
        self.max_in_flight = self.max_publication_lag = self.max_action_backlog = 0


def _write_seqlocked(block: ControlBlock, fixed: list[float], terms: list[float]) -> None:
    ints, floats = block.ints, block.floats
    seq = int(ints[Word.METRICS_SEQ])
    ints[Word.METRICS_SEQ] = seq + 1  # odd: writing
    for i, value in enumerate(fixed):
        floats[i] = value
    for j, value in enumerate(terms):
        floats[len(REPORT_FIELDS) + j] = value
    ints[Word.METRICS_SEQ] = seq + 2
    ints[Word.METRICS_REPORTS] += 1


def read_report(block: ControlBlock, reward_terms: list[str]) -> dict[str, float] | None:
    """Consistent copy of the latest collector report (seqlock read), or None if none yet."""
    ints, floats = block.ints, block.floats
    for _ in range(1000):
        seq = int(ints[Word.METRICS_SEQ])
        if seq == 0:
            return None
        if seq % 2:
            time.sleep(10e-6)
            continue
        values = floats[: len(REPORT_FIELDS) + len(reward_terms)].copy()
        if int(ints[Word.METRICS_SEQ]) == seq:
            out = {name: float(values[i]) for i, name in enumerate(REPORT_FIELDS)}
            for j, term in enumerate(reward_terms):
                # The env may key its terms by name or by the full tag (reward/<term>).
                tag = term if term.startswith("reward/") else f"reward/{term}"
                out[tag] = float(values[len(REPORT_FIELDS) + j])
            return out
    return None
