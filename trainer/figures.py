"""matplotlib for the trainer's figures: the headless backend, and a PNG written whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display), imported only when drawing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_png(fig: Any, path: Path, dpi: int) -> Path:
    """Save ``fig`` as a PNG at ``path`` atomically (temp file, then rename) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", dpi=dpi)
    pyplot().close(fig)
    tmp.replace(path)
    return path
