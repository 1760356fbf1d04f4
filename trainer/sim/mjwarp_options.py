"""MJWarp execution options that leave the task's constraint problem unchanged.

They pick how MJWarp finds contacts and starts its solver, not what it solves: the broadphase
only proposes candidate geom pairs (the narrowphase keeps the same contacts), and skipping
``qacc_smooth`` starts Newton from the warm start alone (it still stops at the task's
tolerance). ``env_throughput --mjwarp-option KEY=VALUE`` measures them against MJWarp's
defaults (docs/task.md, "Throughput benchmark"); the task owners keep the defaults.

Also here: :data:`StreamPriority`, the CUDA stream priority the physics runs on
(``training.collector_stream_priority`` types its values with it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

StreamPriority = Literal["default", "high"]
"""The stream the mjwarp physics runs on: ``default`` (Warp's) or ``high`` (the device's
highest priority; docs/runtime.md §collector-stream)."""
STREAM_PRIORITIES: tuple[str, ...] = get_args(StreamPriority)

Broadphase = Literal["nxn", "sap_tile", "sap_segmented"]
BROADPHASES: tuple[str, ...] = get_args(Broadphase)
_BOOLS = {"true": True, "false": False}


@dataclass(frozen=True)
class MjWarpOptions:
    """``broadphase``: MJWarp's ``BroadphaseType`` (``nxn`` checks every pair, MJWarp's
    default); ``qacc_smooth``: MJWarp's ``run_qacc_smooth`` (true, the default, also tries the
    unconstrained acceleration as Newton's start and factorizes M for it)."""

    broadphase: Broadphase = "nxn"
    qacc_smooth: bool = True

    def __post_init__(self) -> None:
        if self.broadphase not in BROADPHASES:
            msg = f"broadphase={self.broadphase!r} must be one of {list(BROADPHASES)}"
            raise ValueError(msg)
        if not isinstance(self.qacc_smooth, bool):
            msg = f"qacc_smooth={self.qacc_smooth!r} must be true or false"
            raise TypeError(msg)

    @classmethod
    def parse(cls, items: Sequence[str]) -> MjWarpOptions:
        """Options from ``KEY=VALUE`` texts; a bad key or value raises ValueError naming it."""
        values: dict[str, Any] = {}
        for item in items:
            key, sep, value = item.partition("=")
            if not sep or key not in cls.__dataclass_fields__:
                msg = (
                    f"{item!r} is not KEY=VALUE with KEY one of "
                    f"{list(cls.__dataclass_fields__)}; use e.g. broadphase=sap_tile"
                )
                raise ValueError(msg)
            if key == "qacc_smooth":
                if value.lower() not in _BOOLS:
                    raise ValueError(f"qacc_smooth={value!r} must be true or false")
                values[key] = _BOOLS[value.lower()]
            else:
                values[key] = value
        return cls(**values)

    def apply(self, opt: Any) -> None:
        """Set them on an MJWarp ``Model.opt`` (after ``put_model``, before any capture)."""
        import mujoco_warp as mjw

        opt.broadphase = mjw.BroadphaseType[self.broadphase.upper()]
        opt.run_qacc_smooth = self.qacc_smooth

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_MJWARP_OPTIONS = MjWarpOptions()
"""MJWarp's own defaults: what every task owner runs."""
