"""Config keys that were removed, and the one message both sides print for them.

The trainer's loader rejects them in owner files and overrides (``contracts.owners``), and
``g1-soak`` rejects them in ``--extra-override`` before launching anything
(docs/configuration.md). Kept free of OmegaConf so the soak CLI imports it cheaply.
"""

from __future__ import annotations

from collections.abc import Sequence

REMOVED_KEYS: tuple[str, ...] = ("env.tensor_runtime", "env.tensor_runtime_device")
"""Keys removed without alias."""

MOVED_KEY_PREFIXES: tuple[tuple[str, str], ...] = (
    ("env.weight_", "env.rewards.{}.weight"),
    ("env.sigma_", "env.rewards.{}.sigma"),
)
"""Flat keys that became nested ones: (old prefix, new key with ``{}`` = the rest)."""


def removed_key_message(key: str) -> str:
    """The exact message for a removed key (``key`` is the one found)."""
    return (
        f"{key} was removed (no alias): tensor execution is a runtime invariant and the device "
        "follows the backend data plane and the rank device; delete the key"
    )


def removed_key_in(keys: Sequence[str]) -> str | None:
    """The first removed key that ``keys`` (dotted) holds or is under, else None."""
    for key in keys:
        for removed in REMOVED_KEYS:
            if key == removed or key.startswith(removed + "."):
                return removed
    return None


def moved_key_message(key: str) -> str | None:
    """``<key> was moved to <new key>; ...`` when ``key`` matches :data:`MOVED_KEY_PREFIXES`."""
    for prefix, new in MOVED_KEY_PREFIXES:
        rest = key[len(prefix) :]
        if key.startswith(prefix) and rest and "." not in rest:
            return f"{key} was moved to {new.format(rest)}; rename the key (docs/configuration.md)"
    return None
