"""Typed errors shared by the harness commands (and the trainer's small helpers)."""

from __future__ import annotations


class HarnessError(Exception):
    """A check or run failed: the command prints ``error: <msg>`` and exits 1."""


class UsageError(HarnessError):
    """Bad flags or configuration found before anything was launched: exit 2."""


class StrictJsonError(ValueError):
    """A JSON document is not strict JSON (NaN/Infinity tokens, duplicate keys, bad syntax)."""


class ConfigError(Exception):
    """A usage or configuration error: ``error: <message>``, exit 2, nothing written.

    Raised for a bad command line or owner file, before anything is written or launched; the
    message names the bad key or value and the fix. ``trainer.config.errors`` re-exports it.
    """
