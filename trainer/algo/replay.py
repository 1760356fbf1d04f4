"""Device replay ring of packed transition rows (docs/flashsac.md §replay).

One fp32 tensor ``[C, width]`` on the learner device (``EnvSpec.row_width`` wide) written in
commit order with a host-int pointer, so committing and sampling never sync. Rows hold raw
rewards; sampling draws ``U*B`` indices uniformly from the committed rows with replacement,
once per iteration, into a caller-owned static buffer (what a captured update reads).
"""

from __future__ import annotations

import torch
from torch import Tensor

from contracts.env_spec import RowLayout


def stored_done_trunc(terminated: Tensor, truncated: Tensor) -> tuple[Tensor, Tensor]:
    """``(done, trunc)`` as stored: ``done = term | trunc``, ``trunc = trunc & ~term`` (fp32)."""
    terminated = terminated.bool()
    truncated = truncated.bool()
    return (terminated | truncated).float(), (truncated & ~terminated).float()


def pack_transitions(
    obs: Tensor,
    next_obs: Tensor,
    action: Tensor,
    reward: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    cobs: Tensor,
    next_cobs: Tensor,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """Build ``[n, width]`` fp32 rows in the docs/flashsac.md §replay column order.

    ``next_obs``/``next_cobs`` must already be the final (pre-reset) observations where an
    episode ended (the env's ``terminal_obs``).

    Args:
        obs, next_obs: ``[n, obs_dim]``; action: ``[n, A]``; reward: ``[n]``;
        terminated, truncated: ``[n]`` bool or 0/1; cobs, next_cobs: ``[n, critic_obs_dim]``.
        out: optional preallocated ``[n, width]`` destination (written in place).
    """
    done, trunc = stored_done_trunc(terminated, truncated)
    columns = [
        obs.float(),
        next_obs.float(),
        action.float(),
        reward.float().reshape(-1, 1),
        done.reshape(-1, 1),
        trunc.reshape(-1, 1),
        cobs.float(),
        next_cobs.float(),
    ]
    if out is None:
        return torch.cat(columns, dim=1)
    return torch.cat(columns, dim=1, out=out)


class DeviceReplay:
    """Ring of ``capacity`` packed rows on ``device``; commit order is preserved."""

    def __init__(self, capacity: int, layout: RowLayout, device: torch.device | str) -> None:
        if capacity <= 0:
            raise ValueError(
                f"replay capacity={capacity} must be positive; raise algo.replay_buffer_n"
            )
        self.capacity = capacity
        self.layout = layout
        self.device = torch.device(device)
        self.rows = torch.zeros(capacity, layout.width, dtype=torch.float32, device=self.device)
        self.committed = 0
        """Rows committed since construction (host int; the ring pointer is ``committed % C``)."""
        self.last_index = torch.zeros(0, dtype=torch.long, device=self.device)
        """The ring positions of the last ``sample_into`` (what the replay-age metric reads)."""

    @property
    def size(self) -> int:
        """Rows that may be sampled: ``min(committed, capacity)``."""
        return min(self.committed, self.capacity)

    def commit(self, rows: Tensor) -> None:
        """Append ``rows [n, width]`` after all earlier rows, overwriting the oldest when full."""
        n = rows.shape[0]
        if rows.dim() != 2 or rows.shape[1] != self.layout.width:
            raise ValueError(
                f"replay rows have shape {tuple(rows.shape)}, expected [n, {self.layout.width}]"
            )
        if n > self.capacity:
            raise ValueError(
                f"cannot commit {n} rows at once into a replay of {self.capacity} rows"
            )
        start = self.committed % self.capacity
        first = min(n, self.capacity - start)
        self.rows[start : start + first].copy_(rows[:first], non_blocking=True)
        if first < n:
            self.rows[: n - first].copy_(rows[first:], non_blocking=True)
        self.committed += n

    def sample_into(self, out: Tensor, generator: torch.Generator | None = None) -> None:
        """Fill ``out [M, width]`` with M rows drawn uniformly (with replacement) from committed rows."""
        size = self.size
        if size == 0:
            raise ValueError("cannot sample an empty replay; commit warm-up rows first")
        index = torch.randint(0, size, (out.shape[0],), device=self.device, generator=generator)
        torch.index_select(self.rows, 0, index, out=out)
        self.last_index = index

    def column_range(self, column: int, start: int, end: int) -> Tensor:
        """Column ``column`` of the committed rows with global indices ``[start, end)``.

        Raises:
            ValueError: when some of those rows were already overwritten or not committed.
        """
        if end > self.committed or start < self.committed - self.capacity or start > end:
            raise ValueError(
                f"replay rows [{start}, {end}) are not available (committed {self.committed}, "
                f"capacity {self.capacity}); fold reward statistics at least once per capacity"
            )
        a, b = start % self.capacity, end - start
        if a + b <= self.capacity:
            return self.rows[a : a + b, column]
        return torch.cat([self.rows[a:, column], self.rows[: a + b - self.capacity, column]])
