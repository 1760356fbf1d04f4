"""The campaign file: YAML, then ``schemas/campaign.v1.json``, then the cells (docs/campaign.md).

A cell is one ``g1-soak`` run: override set x seed x motion x sim. Its arguments are the
``soak`` flags, then its sim's (a scalar flag of the sim wins, lists are appended), then
``--extra-override`` for each entry of its override set, then each candidate override
(``soak-campaign regression --override``, harness/campaign/candidate.py) and
``algo.seed=<seed>``, and ``--motion``. A motion ``library:<path>`` is a clip of the motion library, found under the
library root the command line gives. Every problem is a :class:`CampaignFileError` (exit 2)
whose one line names the file, the key and the fix; nothing is launched or written before the
file is valid.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contracts.errors import UsageError
from contracts.motions import MOTION_IDS, MOTION_KEY
from contracts.mps.gpus import MULTI_GPU_GATE
from contracts.names import Backend
from contracts.schemas import validate
from harness.soak.invocation import check_overrides, override_key
from harness.soak.trend import TrendThresholdError, parse_threshold_overrides

SCHEMA_FILE = "campaign.v1.json"
SEED_KEY = "algo.seed"
MPS_KEY = "training.cuda_process_sharing"
GPU_SIM = Backend.MJWARP
DEFAULT_OVERRIDES: dict[str, list[str]] = {"base": []}
DEFAULT_GPUS_PER_CELL = 1
DEFAULT_CPUS_PER_CELL = 1
DEFAULT_MAX_RETRIES = 1
LIBRARY_PREFIX = "library:"
DEFAULT_LIBRARY_ROOT = Path("../shared/motions/g1-moves")
"""The motion library (48 G1 Moves clips, CC-BY-4.0), relative to the current directory."""
MIN_SEEDS = 3
"""Olympic scoring drops the best and the worst seed: fewer than 3 leaves nothing to score."""
# Scalar g1-soak flags in the order a cell's argv lists them; list flags follow.
SCALAR_FLAGS = (
    "num_envs",
    "iterations",
    "duration_seconds",
    "min_duration_seconds",
    "sample_interval_seconds",
    "startup_timeout_seconds",
    "stale_progress_seconds",
    "post_shutdown_grace_seconds",
    "stop_grace_seconds",
    "trend_mode",
    "trend_warmup_seconds",
    "trend_min_window_seconds",
    "learning_mode",
    "learning_margin",
    "min_success_rate",
    "learning_tolerance_mm",
    "min_clip_success_rate",
)
LIST_FLAGS = {"trend_thresholds": "--trend-threshold", "extra_overrides": "--extra-override"}
_LABEL_RE = re.compile(r"[^a-z0-9]+")


class CampaignFileError(UsageError):
    """The campaign file is unreadable or invalid (exit 2, nothing launched)."""


@dataclass(frozen=True)
class CellSpec:
    """One cell of the matrix: what it soaks and what it asks Ray for."""

    id: str
    override: str
    seed: int
    motion: str
    sim: str
    args: tuple[str, ...]
    cpus: float
    gpus: float
    mps: bool


@dataclass(frozen=True)
class OverSeeds:
    """How a campaign judges learning over seeds (the file's ``over_seeds``)."""

    window_points: int = 3
    max_failing_seeds: int = 1
    max_r_mpkpe_mm: float | None = None
    min_success_rate: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "window_points": self.window_points,
            "max_failing_seeds": self.max_failing_seeds,
            "max_r_mpkpe_mm": self.max_r_mpkpe_mm,
            "min_success_rate": self.min_success_rate,
        }


@dataclass(frozen=True)
class CampaignSpec:
    """A validated campaign file."""

    name: str
    path: Path
    directory: Path
    cells: tuple[CellSpec, ...]
    max_retries: int
    spec_sha256: str
    over_seeds: OverSeeds | None = None
    candidate_overrides: tuple[str, ...] = ()
    """``soak-campaign regression --override``: appended to every override set."""

    @property
    def mps_requested(self) -> bool:
        return any(cell.mps for cell in self.cells)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (YAML keeps the last)."""


def _no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def _fail(path: Path, where: str, what: str) -> CampaignFileError:
    return CampaignFileError(" ".join(f"campaign file {path}: {where}: {what}".split()))


def read_document(path: Path) -> Any:
    """The YAML document of ``path`` (duplicate keys refused)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise CampaignFileError(
            f"campaign file {path} does not exist; pass the path of a CAMPAIGN.yaml"
        ) from err
    except (OSError, UnicodeDecodeError) as err:
        raise CampaignFileError(f"campaign file {path} is unreadable: {err}") from err
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        problem = getattr(err, "problem", None) or str(err)
        raise _fail(path, where, f"not valid YAML ({problem}); fix the syntax") from err


def _key_path(json_path: str) -> str:
    return json_path.removeprefix("$.").removeprefix("$") or "top level"


def _check_schema(path: Path, doc: Any) -> None:
    if isinstance(doc, dict):
        gpus = doc.get("gpus_per_cell")
        if isinstance(gpus, (int, float)) and not isinstance(gpus, bool) and gpus > 1:
            raise _fail(
                path,
                "gpus_per_cell",
                f"{gpus} GPUs per cell is the single_task_multi_gpu topology: {MULTI_GPU_GATE}; "
                "use 1 (one GPU per cell) or less (packing)",
            )
    violations = validate(doc, SCHEMA_FILE)
    if violations:
        first = violations[0]
        more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
        fix = f"expected {first.expected}" if first.expected else "see docs/campaign.md"
        raise _fail(path, _key_path(first.path), f"{first.message}{more}; {fix}")


CELL_KEYS = {
    SEED_KEY: "is set by the campaign; list it in seeds",
    MOTION_KEY: "is set by the campaign; list it in motions",
}
"""Trainer keys a campaign sets per cell, and why an override may not set them (the texts
docs/troubleshooting.md quotes)."""


def _check_entries(path: Path, where: str, entries: Sequence[str]) -> None:
    for index, text in enumerate(entries):
        location = f"{where}[{index}]"
        try:
            check_overrides([text])
        except UsageError as err:
            raise _fail(path, location, str(err)) from err
        key = override_key(text)
        if key in CELL_KEYS:
            raise _fail(path, location, f"'{key}' {CELL_KEYS[key]}")


def _unquoted(value: str) -> str:
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _asks_mps(entries: Sequence[str]) -> bool:
    """The last ``training.cuda_process_sharing=...`` entry wins, as in the trainer."""
    mode = None
    for text in entries:
        if override_key(text) == MPS_KEY:
            mode = _unquoted(text.split("=", 1)[1])
    return mode == "mps"


def _motion_value(path: Path, motion: str, library: Path) -> str:
    if motion.startswith(LIBRARY_PREFIX):
        return str(library / motion.removeprefix(LIBRARY_PREFIX))
    if motion.startswith(("./", "../")):
        return os.path.normpath(path.parent / motion)
    return motion


def motion_label(motion: str) -> str:
    if motion in MOTION_IDS:
        return motion
    stem = Path(motion).name.removesuffix(".npz").removesuffix(".csv")
    return _LABEL_RE.sub("-", stem.lower()).strip("-") or "motion"


def _check_library_clips(path: Path, motions: Sequence[str], library: Path) -> None:
    """Every ``library:`` motion names a file under an existing library root."""
    for index, motion in enumerate(motions):
        if not motion.startswith(LIBRARY_PREFIX):
            continue
        where = f"motions[{index}]"
        relative = motion.removeprefix(LIBRARY_PREFIX)
        if os.path.isabs(relative) or ".." in Path(relative).parts or not relative.strip():
            raise _fail(
                path, where, f"{motion!r} must name a file relative to the library root, "
                "e.g. library:dance/J_Dance18_TikTok.csv",
            )  # fmt: skip
        if not library.is_dir():
            raise CampaignFileError(
                f"motion library {library} does not exist ({path}: {where} is {motion!r}); "
                "pass --library-root DIR (the folder of the g1-moves manifest.json)"
            )
        if not (library / relative).is_file():
            clips = [str(p.relative_to(library)) for p in library.rglob("*.csv")]
            hint = difflib.get_close_matches(relative, clips, n=1, cutoff=0.5)
            fix = f"; did you mean 'library:{hint[0]}'?" if hint else f"; see {library}"
            raise _fail(path, where, f"{library / relative} does not exist{fix}")


def _merged_flags(soak: Mapping[str, Any], sim_flags: Mapping[str, Any]) -> dict[str, Any]:
    merged = {key: value for key, value in soak.items() if key not in LIST_FLAGS}
    merged.update({key: value for key, value in sim_flags.items() if key not in LIST_FLAGS})
    for key in LIST_FLAGS:
        merged[key] = [*soak.get(key, []), *sim_flags.get(key, [])]
    return merged


def _flag_args(flags: Mapping[str, Any]) -> list[str]:
    args: list[str] = []
    for key in SCALAR_FLAGS:
        if key in flags:
            args += ["--" + key.replace("_", "-"), _flag_text(flags[key])]
    for text in flags["trend_thresholds"]:
        args += [LIST_FLAGS["trend_thresholds"], text]
    return args


def _flag_text(value: Any) -> str:
    return format(value, "g") if isinstance(value, float) else str(value)


def _cell(
    path: Path,
    doc: Mapping[str, Any],
    override: tuple[str, list[str]],
    seed: int,
    motion: str,
    sim: str,
    library: Path,
    candidate: Sequence[str] = (),
) -> CellSpec:
    flags = _merged_flags(doc.get("soak", {}), doc["sims"][sim])
    entries = [*flags["extra_overrides"], *override[1], *candidate]
    mps = _asks_mps(entries)
    if mps and sim != GPU_SIM:
        raise _fail(
            path,
            f"sims.{sim}",
            f"{MPS_KEY}=mps (override set {override[0]!r}) needs --sim {GPU_SIM}; "
            f"drop it for {sim} or soak {GPU_SIM} only",
        )
    value = _motion_value(path, motion, library)
    args = ["--sim", sim, "--motion", value, *_flag_args(flags)]
    for text in [*entries, f"{SEED_KEY}={seed}"]:
        args += [LIST_FLAGS["extra_overrides"], text]
    gpus = float(doc.get("gpus_per_cell", DEFAULT_GPUS_PER_CELL)) if sim == GPU_SIM else 0.0
    return CellSpec(
        id=f"{override[0]}-s{seed}-{motion_label(motion)}-{sim}",
        override=override[0],
        seed=seed,
        motion=value,
        sim=sim,
        args=tuple(args),
        cpus=float(doc.get("cpus_per_cell", DEFAULT_CPUS_PER_CELL)),
        gpus=gpus,
        mps=mps,
    )


def _check_semantics(path: Path, doc: Mapping[str, Any]) -> None:
    for where, flags in [("soak", doc.get("soak", {}))] + [
        (f"sims.{sim}", flags) for sim, flags in doc["sims"].items()
    ]:
        _check_entries(path, f"{where}.extra_overrides", flags.get("extra_overrides", []))
        try:
            parse_threshold_overrides(flags.get("trend_thresholds", []))
        except TrendThresholdError as err:
            raise _fail(path, f"{where}.trend_thresholds", str(err)) from err
    for name, entries in doc.get("overrides", DEFAULT_OVERRIDES).items():
        _check_entries(path, f"overrides.{name}", entries)
    labels: dict[str, str] = {}
    for motion in doc["motions"]:
        label = motion_label(motion)
        if label in labels:
            raise _fail(
                path,
                "motions",
                f"{labels[label]!r} and {motion!r} both name cells '{label}'; "
                "give the files different names",
            )
        labels[label] = motion


def spec_sha256(doc: Mapping[str, Any]) -> str:
    """sha256 of the validated document without ``directory`` (keys sorted)."""
    body = {key: value for key, value in doc.items() if key != "directory"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _over_seeds(path: Path, doc: Mapping[str, Any]) -> OverSeeds | None:
    if "over_seeds" not in doc:
        return None
    if len(doc["seeds"]) < MIN_SEEDS:
        raise _fail(
            path,
            "seeds",
            f"over_seeds needs at least {MIN_SEEDS} seeds (the best and the worst are dropped), "
            f"got {len(doc['seeds'])}; list more seeds or drop over_seeds",
        )
    return OverSeeds(**doc["over_seeds"])


def load_campaign(
    path: Path,
    library_root: Path = DEFAULT_LIBRARY_ROOT,
    candidate_overrides: Sequence[str] = (),
) -> CampaignSpec:
    """Read, validate and expand a campaign file.

    ``library_root`` is where ``library:`` motions are found (relative: to the current
    directory). ``candidate_overrides`` (checked by ``candidate.check_candidate``) follow
    every override set's own entries in each cell; they are not part of ``spec_sha256``.

    Raises:
        CampaignFileError: unreadable, not YAML, schema violation or a semantic problem;
            the message names the file and the key.
    """
    path = Path(os.path.abspath(path))
    library = Path(os.path.abspath(library_root))
    doc = read_document(path)
    _check_schema(path, doc)
    _check_semantics(path, doc)
    over_seeds = _over_seeds(path, doc)
    _check_library_clips(path, doc["motions"], library)
    overrides = doc.get("overrides", DEFAULT_OVERRIDES)
    cells = tuple(
        _cell(path, doc, (name, list(entries)), seed, motion, sim, library, candidate_overrides)
        for name, entries in overrides.items()
        for seed in doc["seeds"]
        for motion in doc["motions"]
        for sim in doc["sims"]
    )
    directory = Path(os.path.normpath(path.parent / doc["directory"]))
    return CampaignSpec(
        name=doc["name"],
        path=path,
        directory=directory,
        cells=cells,
        max_retries=int(doc.get("max_retries", DEFAULT_MAX_RETRIES)),
        spec_sha256=spec_sha256(doc),
        over_seeds=over_seeds,
        candidate_overrides=tuple(candidate_overrides),
    )
