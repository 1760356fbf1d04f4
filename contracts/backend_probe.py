"""The backend probe document's fixed vocabulary (``backend_probe.0.3.0.json``, docs/probe.md).

Shared by the ``g1-backend-probe`` parent (harness) and the ``python -m trainer.probe`` child.
"""

from __future__ import annotations

from contracts.names import Backend, ProbePhase

SCHEMA_VERSION = "0.3.0"
PROBE_SCHEMA = "backend_probe.0.3.0.json"
BACKENDS: tuple[str, ...] = tuple(b.value for b in Backend)
"""The backends a probe can run, in the order they are reported."""
PHASES: tuple[str, ...] = tuple(p.value for p in ProbePhase)
"""The timed phases of one probe iteration (each backend result's ``phases`` keys)."""
