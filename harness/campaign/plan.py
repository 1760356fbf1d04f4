"""``--dry-run``: what a campaign would run, after every cell passed its pre-launch check."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from harness.campaign.spec import CampaignSpec, CellSpec, motion_label

HEADERS = ("cell", "motion", "seed", "budget", "GPU", "MPS")


def _flag(cell: CellSpec, name: str) -> str | None:
    args = list(cell.args)
    return args[args.index(name) + 1] if name in args else None


def budget(cell: CellSpec) -> str:
    """The soak's size: its time budget, its iterations, or both (budget with a cap)."""
    seconds, iterations = _flag(cell, "--duration-seconds"), _flag(cell, "--iterations")
    parts = ([f"{seconds} s"] if seconds else []) + ([f"{iterations} it"] if iterations else [])
    return " ≤ ".join(parts) if parts else "65000 it"


def per_gpu(spec: CampaignSpec) -> str:
    gpus = {cell.gpus for cell in spec.cells if cell.gpus > 0}
    if not gpus:
        return "CPU cells only"
    share = min(gpus)
    return f"{int(1 / share + 1e-9)} at once per GPU (gpus_per_cell {share:g})"


def headline(spec: CampaignSpec, checked: int) -> list[str]:
    mps = "on" if spec.mps_requested else "off"
    lines = [
        f"campaign {spec.name}: {len(spec.cells)} cell(s), {per_gpu(spec)}, MPS {mps}; "
        + str(spec.directory),
        f"preflight: {checked} distinct cell(s) passed g1-soak --check-only"
        + " (the trainer's config check included)",
    ]
    if spec.candidate_overrides:
        lines.append(
            "candidate overrides (after each override set's own, in every cell): "
            + " ".join(spec.candidate_overrides)
        )
    if spec.over_seeds is not None:
        cfg = spec.over_seeds
        lines.append(
            f"judged over seeds: mean of the last {cfg.window_points} evaluation point(s), "
            f"olympic over seeds, at most {cfg.max_failing_seeds} failing seed(s) per "
            "configuration"
        )
    lines.append("dry run: nothing was started")
    return lines


def print_plan(spec: CampaignSpec, checked: int, console: Console) -> None:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for name in HEADERS:
        table.add_column(name, overflow="fold", no_wrap=name in ("seed", "GPU", "MPS"))
    for cell in spec.cells:
        gpus = f"{cell.gpus:g}" if cell.gpus else "-"
        table.add_row(
            cell.id, motion_label(cell.motion), str(cell.seed), budget(cell), gpus,
            "yes" if cell.mps else "no",
        )  # fmt: skip
    console.print(table)
    for line in headline(spec, checked):
        console.print(line, markup=False, highlight=False)


def plan_document(spec: CampaignSpec, checked: int) -> dict[str, Any]:
    """The plan as JSON (``--dry-run --json``)."""
    return {
        "name": spec.name,
        "campaign_file": str(spec.path),
        "directory": str(spec.directory),
        "preflight_checked": checked,
        "mps": spec.mps_requested,
        "over_seeds": None if spec.over_seeds is None else spec.over_seeds.to_json(),
        "candidate_overrides": list(spec.candidate_overrides),
        "cells": [
            {
                "id": cell.id,
                "override": cell.override,
                "seed": cell.seed,
                "motion": cell.motion,
                "sim": cell.sim,
                "gpus": cell.gpus,
                "cpus": cell.cpus,
                "mps": cell.mps,
                "g1_soak_args": list(cell.args),
            }
            for cell in spec.cells
        ],
    }
