"""``soak-campaign compare``: a candidate's learning regression check beside the baseline's.

Both directories hold a finished check (``campaign.json``, read and validated by
``state.load_state``). Their cells pair by (clip, seed, sim), the clip by its name
(``motion_label``), so two machines may keep the library in different places. The two must
have run the same clips, seeds and sims with the same budget and evaluation protocol: every
g1-soak argument of paired cells is equal once each side's candidate overrides
(``candidate.py``) and the seed are set aside, the evaluation points (``algo.save_interval``)
and ``eval.*`` take the same values with them, and both judge over seeds alike. Anything
else is a :class:`CompareError` (exit 2) naming the first difference.

The candidate passes when it passed over seeds on every clip and its olympic R-MPKPE (the
over-seeds score: the mean of the last ``window_points`` evaluation points, best and worst
seed dropped) on each clip is no worse than the baseline's by more than the learning
verdict's own margin: worse means above the baseline's by more than ``--learning-margin``
(relative) and by more than ``--learning-tolerance-mm``, the rule a soak applies to its
final point against its best (harness/soak/learning.py), with the cells' flags or, as in the
regression spec, that module's defaults. Pure apart from reading the two documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.errors import UsageError
from harness.campaign import candidate as candidate_mod
from harness.campaign.spec import SEED_KEY, motion_label
from harness.campaign.state import CampaignStateError, load_state
from harness.soak.invocation import override_key
from harness.soak.learning import DEFAULT_MARGIN, DEFAULT_TOLERANCE_MM

SIDES = ("baseline", "candidate")
MARGIN_FLAG = "--learning-margin"
TOLERANCE_FLAG = "--learning-tolerance-mm"
OVERRIDE_FLAG = "--extra-override"
REPEATED = (OVERRIDE_FLAG, "--trend-threshold")
BUDGET_FLAGS = ("--duration-seconds", "--iterations", "--num-envs", "--min-duration-seconds")
SAVE_INTERVAL = candidate_mod.SAVE_INTERVAL_KEY


class CompareError(UsageError):
    """The two campaigns cannot be compared (exit 2): unreadable, unfinished or unlike."""


@dataclass(frozen=True)
class Side:
    """One finished check: its directory, document and candidate overrides."""

    name: str
    directory: Path
    doc: dict[str, Any]

    @property
    def overrides(self) -> list[str]:
        return candidate_mod.recorded(self.doc)


@dataclass(frozen=True)
class SeedPair:
    motion: str
    seed: int
    sim: str
    baseline: Mapping[str, Any]
    candidate: Mapping[str, Any]

    @property
    def final_difference_mm(self) -> float | None:
        return _difference(self.baseline["final_r_mpkpe_mm"], self.candidate["final_r_mpkpe_mm"])


@dataclass(frozen=True)
class ClipPair:
    motion: str
    sim: str
    baseline: Mapping[str, Any]
    candidate: Mapping[str, Any]
    reasons: tuple[str, ...]

    @property
    def difference_mm(self) -> float | None:
        return _difference(
            self.baseline["olympic_r_mpkpe_mm"], self.candidate["olympic_r_mpkpe_mm"]
        )

    @property
    def passed(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class Comparison:
    baseline: Side
    candidate: Side
    margin: float
    tolerance_mm: float
    margin_source: str
    seeds: tuple[SeedPair, ...]
    clips: tuple[ClipPair, ...]

    @property
    def passed(self) -> bool:
        return all(clip.passed for clip in self.clips)


def _difference(base: float | None, cand: float | None) -> float | None:
    return None if base is None or cand is None else cand - base


def read_side(name: str, directory: Path) -> Side:
    """A finished check judged over seeds.

    Raises:
        CompareError: not a directory, no valid campaign.json, unfinished, not over seeds.
    """
    if not directory.is_dir():
        raise CompareError(f"the {name} {directory} is not a directory; pass a check's directory")
    try:
        doc = load_state(directory)
    except CampaignStateError as err:
        raise CompareError(f"the {name}: {err}") from err
    if doc["status"] != "finished":
        raise CompareError(
            f"the {name} {directory} is {doc['status']}, not finished; finish it with "
            f"`soak-campaign regression --directory {directory} --resume` (same --override)"
        )
    if doc.get("over_seeds") is None:
        raise CompareError(
            f"the {name} {directory} is not judged over seeds (no over_seeds); "
            "compare takes two `soak-campaign regression` directories"
        )
    return Side(name, directory, doc)


def _pairs(args: Sequence[str]) -> list[tuple[str, str]]:
    return list(zip(args[::2], args[1::2], strict=True))


def _overrides(cell: Mapping[str, Any]) -> list[str]:
    return [value for flag, value in _pairs(cell["g1_soak_args"]) if flag == OVERRIDE_FLAG]


def _shared_args(side: Side, cell: Mapping[str, Any]) -> dict[str, Any]:
    """The cell's g1-soak flags without the candidate's overrides and the seed; the motion
    by its name."""
    flags: dict[str, Any] = {flag: [] for flag in REPEATED}
    for flag, value in _pairs(cell["g1_soak_args"]):
        if flag in REPEATED:
            flags[flag].append(value)
        else:
            flags[flag] = motion_label(value) if flag == "--motion" else value
    entries, added = flags[OVERRIDE_FLAG], side.overrides
    tail = [*added, f"{SEED_KEY}={cell['seed']}"]
    if entries[-len(tail) :] != tail:
        raise CompareError(
            f"the {side.name}'s cell {cell['id']} does not end its --extra-override list with "
            f"the campaign's candidate overrides and its seed ({', '.join(tail)}); "
            f"{side.directory} was not written by soak-campaign regression"
        )
    flags[OVERRIDE_FLAG] = entries[: -len(tail)]
    return flags


def _protocol(cell: Mapping[str, Any]) -> dict[str, str]:
    """The last value of each protocol key (``algo.save_interval``, ``eval.*``) in effect."""
    found: dict[str, str] = {}
    for text in _overrides(cell):
        key = override_key(text)
        if candidate_mod.is_protocol_key(key):
            found[key] = text.split("=", 1)[1].strip()
    return found


def _unlike(what: str, base: Any, cand: Any, sides: tuple[Side, Side]) -> CompareError:
    return CompareError(
        f"not the same {what}: {base} in the baseline ({sides[0].directory}), {cand} in the "
        f"candidate ({sides[1].directory}); run both with the same spec"
    )


def _check_sets(what: str, base: set[Any], cand: set[Any], sides: tuple[Side, Side]) -> None:
    if base != cand:
        only_b = ", ".join(map(str, sorted(base - cand))) or "none"
        only_c = ", ".join(map(str, sorted(cand - base))) or "none"
        raise CompareError(
            f"not the same {what}: only the baseline ({sides[0].directory}) has {only_b}; "
            f"only the candidate ({sides[1].directory}) has {only_c}"
        )


def _check_cells(pair: tuple[Mapping, Mapping], sides: tuple[Side, Side]) -> None:
    base, cand = (_protocol(cell) for cell in pair)
    for key in sorted(set(base) | set(cand)):
        what = "save interval (evaluation points)" if key == SAVE_INTERVAL else "evaluation"
        shown = [f"{key}={p[key]}" if key in p else f"{key} unset" for p in (base, cand)]
        if base.get(key) != cand.get(key):
            raise _unlike(what, *shown, sides)
    b_args, c_args = (_shared_args(side, cell) for side, cell in zip(sides, pair, strict=True))
    for flag in sorted(set(b_args) | set(c_args), key=lambda f: (f not in BUDGET_FLAGS, f)):
        b_value, c_value = b_args.get(flag, "unset"), c_args.get(flag, "unset")
        if b_value != c_value:
            what = "budget" if flag in BUDGET_FLAGS else "g1-soak flags"
            if flag == OVERRIDE_FLAG:
                what = "trainer overrides besides the candidate's"
            raise _unlike(f"{what} ({flag}, cell {pair[0]['id']})", b_value, c_value, sides)


def _index(side: Side) -> tuple[dict[tuple, Mapping], dict[tuple, Mapping], dict[str, Mapping]]:
    seeds: dict[tuple, Mapping] = {}
    clips: dict[tuple, Mapping] = {}
    for config in side.doc["over_seeds"]["configurations"]:
        clip = (motion_label(config["motion"]), config["sim"])
        if clip in clips:
            raise CompareError(
                f"the {side.name} {side.directory} runs more than one override set on "
                f"{clip[0]}; compare takes checks of one override set each"
            )
        clips[clip] = config
        for seed in config["seeds"]:
            seeds[(clip[0], seed["seed"], clip[1])] = seed
    cells = {cell["id"]: cell for cell in side.doc["cells"]}
    return seeds, clips, cells


def _flag(cell: Mapping[str, Any], name: str) -> str | None:
    return dict(_pairs(cell["g1_soak_args"])).get(name)


def _margin(cell: Mapping[str, Any]) -> tuple[float, float, str]:
    margin, tolerance = _flag(cell, MARGIN_FLAG), _flag(cell, TOLERANCE_FLAG)
    source = (
        f"{MARGIN_FLAG} / {TOLERANCE_FLAG} of the cells"
        if margin is not None or tolerance is not None
        else "harness.soak.learning DEFAULT_MARGIN / DEFAULT_TOLERANCE_MM"
    )
    return (
        DEFAULT_MARGIN if margin is None else float(margin),
        DEFAULT_TOLERANCE_MM if tolerance is None else float(tolerance),
        source,
    )


def _judge_clip(
    clip: tuple[str, str], base: Mapping, cand: Mapping, margin: float, tolerance: float
) -> ClipPair:
    reasons = []
    label = clip[0]
    if cand["verdict"] != "passed":
        why = "; ".join(cand["reasons"]) or cand["verdict"]
        reasons.append(f"{label}: the candidate failed over seeds ({why})")
    b, c = base["olympic_r_mpkpe_mm"], cand["olympic_r_mpkpe_mm"]
    if c is None:
        reasons.append(f"{label}: the candidate has no olympic R-MPKPE")
    elif b is None:
        reasons.append(
            f"{label}: the baseline has no olympic R-MPKPE to compare with "
            f"(over seeds it {base['verdict']}); rerun the baseline"
        )
    elif c > b * (1 + margin) and c - b > tolerance:
        reasons.append(
            f"{label}: the candidate's olympic R-MPKPE {c:.1f} mm is more than "
            f"{margin:.0%} and more than {tolerance:g} mm above the baseline's {b:.1f} mm"
        )
    return ClipPair(label, clip[1], base, cand, tuple(reasons))


def compare_sides(baseline: Side, candidate: Side) -> Comparison:
    """Pair, check and judge two finished checks.

    Raises:
        CompareError: they did not run the same clips, seeds, sims, budget or protocol.
    """
    sides = (baseline, candidate)
    (b_seeds, b_clips, b_cells), (c_seeds, c_clips, c_cells) = _index(baseline), _index(candidate)
    _check_sets("clips", {k[0] for k in b_clips}, {k[0] for k in c_clips}, sides)
    _check_sets("sims", {k[1] for k in b_clips}, {k[1] for k in c_clips}, sides)
    _check_sets("seeds", {k[1] for k in b_seeds}, {k[1] for k in c_seeds}, sides)
    _check_sets("cells (clip, seed, sim)", set(b_seeds), set(c_seeds), sides)
    b_cfg, c_cfg = (side.doc["over_seeds"]["config"] for side in sides)
    for key in b_cfg:
        if b_cfg[key] != c_cfg.get(key):
            raise _unlike(f"over-seeds judging ({key})", b_cfg[key], c_cfg.get(key), sides)
    pairs = []
    for key in b_seeds:
        pair = (b_cells[b_seeds[key]["cell"]], c_cells[c_seeds[key]["cell"]])
        _check_cells(pair, sides)
        pairs.append(SeedPair(*key, b_seeds[key], c_seeds[key]))
    first = b_cells[next(iter(b_seeds.values()))["cell"]]
    margin, tolerance, source = _margin(first)
    clips = [_judge_clip(k, b_clips[k], c_clips[k], margin, tolerance) for k in b_clips]
    return Comparison(baseline, candidate, margin, tolerance, source, tuple(pairs), tuple(clips))


def compare_directories(baseline: Path, candidate: Path) -> Comparison:
    """:func:`compare_sides` of two check directories (see :func:`read_side`)."""
    return compare_sides(read_side("baseline", baseline), read_side("candidate", candidate))
