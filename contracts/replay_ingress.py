"""The replay-ingress invariants of a completed run summary (docs/contracts.md §invariants).

``runtime_manifest.replay_ingress`` holds the ingress counters; a completed run must have
consistent counters (:data:`INVARIANTS`, checked only when every counter they name is an
exact int), a drained, used ingress, and published/released chunk counts equal to
``total_env_steps / ingress_slot_rows``. :func:`replay_ingress_problems` returns every
violation as a ``(json path, message)`` pair; ``contracts.run_summary.check`` applies them
to a completed summary, and the soak's verdict reports them in its step 4.2. Pure Python.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from contracts.jsonio import is_exact_int, is_finite_number, show

RI_PATH = "$.runtime_manifest.replay_ingress"
RI_COUNTERS = (
    "ingress_depth",
    "ingress_slot_rows",
    "published_sequence",
    "release_sequence",
    "occupancy",
    "high_water_occupancy",
    "backpressure_waits",
    "early_returns",
    "dropped_batches",
    "closed_returns",
    "stop_returns",
)

Problem = tuple[str, str]


@dataclass(frozen=True)
class Invariant:
    """``ok(*counters)`` must hold; else ``message`` (formatted with the counters) at ``field``."""

    counters: tuple[str, ...]
    ok: Callable[..., bool]
    field: str
    message: str

    def problem(self, values: Mapping[str, int]) -> Problem | None:
        if not all(n in values for n in self.counters):
            return None  # a counter is missing or malformed: reported on its own
        if self.ok(*(values[n] for n in self.counters)):
            return None
        return f"{RI_PATH}.{self.field}", self.message.format(**values)


INVARIANTS: tuple[Invariant, ...] = (
    Invariant(("ingress_depth",), lambda d: d > 0, "ingress_depth",
              "ingress_depth={ingress_depth} must be > 0"),
    Invariant(("ingress_slot_rows",), lambda r: r > 0, "ingress_slot_rows",
              "ingress_slot_rows={ingress_slot_rows} must be > 0"),
    Invariant(("release_sequence", "published_sequence"), lambda r, p: r <= p, "release_sequence",
              "release_sequence={release_sequence} exceeds published_sequence={published_sequence}"),
    Invariant(("occupancy", "published_sequence", "release_sequence"),
              lambda o, p, r: o == p - r, "occupancy",
              "occupancy={occupancy} must equal published_sequence - release_sequence "
              "({published_sequence} - {release_sequence})"),
    Invariant(("occupancy", "ingress_depth"), lambda o, d: o <= d, "occupancy",
              "occupancy={occupancy} exceeds ingress_depth={ingress_depth}"),
    Invariant(("occupancy", "high_water_occupancy", "ingress_depth"),
              lambda o, h, d: o <= h <= d, "high_water_occupancy",
              "high_water_occupancy={high_water_occupancy} must lie between "
              "occupancy={occupancy} and ingress_depth={ingress_depth}"),
    Invariant(("early_returns", "dropped_batches"), lambda e, d: e == d, "early_returns",
              "early_returns={early_returns} must equal dropped_batches={dropped_batches}"),
    Invariant(("closed_returns", "stop_returns", "early_returns"),
              lambda c, s, e: c + s == e, "closed_returns",
              "closed_returns + stop_returns ({closed_returns} + {stop_returns}) must equal "
              "early_returns={early_returns}"),
    Invariant(("occupancy",), lambda o: o == 0, "occupancy",
              "final occupancy={occupancy}, expected 0 (replay ingress not drained)"),
    Invariant(("dropped_batches",), lambda d: d == 0, "dropped_batches",
              "dropped_batches={dropped_batches}, expected 0"),
    Invariant(("early_returns",), lambda e: e == 0, "early_returns",
              "early_returns={early_returns}, expected 0"),
    Invariant(("high_water_occupancy",), lambda h: h > 0, "high_water_occupancy",
              "high_water_occupancy=0; a completed run must have used the ingress"),
)  # fmt: skip
"""In the order they are reported (the most basic first)."""


def _counters(ingress: Mapping[str, Any]) -> tuple[dict[str, int], list[Problem]]:
    """The well-formed counters, and a problem for each missing or malformed one."""
    values: dict[str, int] = {}
    out: list[Problem] = []
    for name in RI_COUNTERS:
        value = ingress.get(name)
        if name not in ingress:
            out.append((f"{RI_PATH}.{name}", "is missing; expected an exact int >= 0"))
        elif not is_exact_int(value) or value < 0:
            out.append((f"{RI_PATH}.{name}", f"must be an exact int >= 0, got {show(value)}"))
        else:
            values[name] = value
    wait_s = ingress.get("backpressure_wait_s")
    if "backpressure_wait_s" not in ingress:
        out.append((f"{RI_PATH}.backpressure_wait_s", "is missing; expected a finite number >= 0"))
    elif not is_finite_number(wait_s) or wait_s < 0:
        out.append(
            (f"{RI_PATH}.backpressure_wait_s", f"must be a finite number >= 0, got {show(wait_s)}")
        )
    return values, out


def _chunk_problems(summary: Mapping[str, Any], values: Mapping[str, int]) -> list[Problem]:
    """``total_env_steps`` is a whole number of slots, each published and released once."""
    total = summary.get("total_env_steps")
    if not is_exact_int(total) or total <= 0:
        return [
            ("$.total_env_steps", f"must be an exact int > 0 in a completed run, got {show(total)}")
        ]
    rows = values.get("ingress_slot_rows")
    if not rows:
        return []
    if total % rows:
        return [
            (
                "$.total_env_steps",
                f"total_env_steps={total} is not a multiple of ingress_slot_rows={rows}",
            )
        ]
    chunks = total // rows
    return [
        (
            f"{RI_PATH}.{name}",
            (
                f"{name}={values[name]} must equal total_env_steps / ingress_slot_rows = "
                f"{total} / {rows} = {chunks}"
            ),
        )
        for name in ("published_sequence", "release_sequence")
        if name in values and values[name] != chunks
    ]


def replay_ingress_problems(summary: Mapping[str, Any], ingress: Any) -> list[Problem]:
    """Every replay-ingress invariant of a completed run, as (json path, message) pairs."""
    if not isinstance(ingress, dict):
        got = show(ingress) if ingress is not None else "null or missing"
        return [(RI_PATH, f"expected an object, got {got}")]
    values, out = _counters(ingress)
    out += [p for inv in INVARIANTS if (p := inv.problem(values)) is not None]
    return out + _chunk_problems(summary, values)
