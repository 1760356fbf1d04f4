"""The soak's live one-line status and the printer that redraws it (``g1-soak`` console)."""

from __future__ import annotations

import os
from typing import Any, TextIO

from harness.soak.eta import SoakPlan, forecast, status_fields


def _fmt_bytes(num: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(num) < 1024 or unit == "GiB":
            return f"{num:.0f} {unit}" if unit == "B" else f"{num:.1f} {unit}"
        num /= 1024
    return f"{num:.1f} GiB"


def _fmt_elapsed(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "?"


def status_line(sample: dict[str, Any], plan: SoakPlan | None = None) -> str:
    """The live one-line status: elapsed, iteration/steps, the trainer's windowed env
    steps/s and it/s with the ETA against the plan, processes, RSS, GPU memory, FDs."""
    proc = sample["process"]
    classes = proc["fd_classes_total"]
    gpu = sample["gpu"]
    last = sample["progress"].get("last") or {}
    parts = [f"[{_fmt_elapsed(sample['elapsed_s'])}]"]
    if last:
        target = f"/{plan.iterations:,}" if plan is not None and plan.iterations else ""
        parts.append(
            f"{last.get('phase', '?')} iter {_count(last.get('iteration'))}{target} "
            f"steps {_count(last.get('total_env_steps'))}"
        )
        parts.extend(status_fields(plan, forecast(plan, sample["elapsed_s"], last)))
    else:
        parts.append(f"progress {_fmt_bytes(sample['progress']['bytes_total'])}")
    parts.append(f"procs {proc['process_count']}")
    parts.append(f"rss {_fmt_bytes(proc['rss_kib_total'] * 1024)}")
    gpu_text = f"{gpu['used_memory_mib_total']} MiB" if gpu.get("source") else "n/a"
    parts.append(f"gpu {gpu_text}")
    parts.append(
        f"fds {proc['fd_count_total']} (eventfd {classes['eventfd']}, shm {classes['shared_memory']}, "
        f"memfd {classes['memfd']}, nvidia {classes['nvidia']})"
    )
    return " | ".join(parts)


class StatusPrinter:
    """Redraws the status line in place on a TTY; one plain line per sample otherwise."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.tty = bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())
        self._drawn = False

    def _write(self, text: str) -> None:
        # A terminal gone with its SSH session (EIO) must not cost the soak its artifact.
        if self.stream is None:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.stream = None

    def warn(self, line: str) -> None:
        """A line that stays on screen (after the redrawn status line, on a TTY)."""
        if self.tty and self._drawn:
            self._drawn = False
            self._write("\n")
        self._write(line + "\n")

    def show(self, line: str) -> None:
        if self.tty:
            self._write("\r\x1b[2K" + line[: self._width()])
            self._drawn = True
        else:
            self._write(line + "\n")

    def _width(self) -> int:
        try:
            return max(20, os.get_terminal_size(self.stream.fileno()).columns - 1)  # type: ignore[union-attr]
        except (AttributeError, OSError, ValueError):
            return 200

    def finish(self) -> None:
        if self.tty and self._drawn:
            self._write("\n")
