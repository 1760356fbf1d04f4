"""The one exception type of configuration problems (docs/contracts.md §train steps 1–5).

A ``ConfigError`` means the command line or an owner file is wrong: it is found before
anything is written or launched, ``train`` prints its message as one ``error: ...`` line
and exits 2. The message names the bad key or value and the fix. It is defined in
``contracts.errors`` because the owner chain (``contracts.owners``) raises it too.
"""

from __future__ import annotations

from contracts.errors import ConfigError

__all__ = ["FLAGS_TOGETHER", "ConfigError"]

FLAGS_TOGETHER = "--algo, --task and --sim must be given together"
"""The one message of an owner selection that is incomplete (``train``, ``--print-config``,
``g1-check-config``)."""
