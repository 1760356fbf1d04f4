"""Motion libraries: the manifest's rates and attribution, subsets by glob, ``g1-motion
import`` (one table, strict JSON, the clip set it writes), and ``--motion LIB:GLOB``."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import g1soak_motion_writers as writers
import numpy as np
import pytest

from contracts.schemas import validate
from trainer.motion_import.checks import BOUNDS
from trainer.motion_import.cli import LIBRARY_SCHEMA, main
from trainer.motion_import.library import parse_library_id, read_library
from trainer.motion_import.model import g1_model
from trainer.sim.scene import JOINT_NAMES
from trainer.task.motion import MotionError, load_motion, resolve_motion

ATTRIBUTION = "Test Moves, A. Author, CC-BY-4.0, example/test-moves"
G1_MOVES = Path(__file__).parents[3] / ".." / "shared" / "motions" / "g1-moves"
LEGEND_LINE = re.compile(r"^  (?P<label>\S+) +(?P<check>\w+) [<>] \S+.*: (?P<clips>\d+) clips?\b")


def _write_library(synthetic30: dict, root: Path, *, spike: bool = False) -> Path:
    """Three 60-fps CSV clips in two category folders with a manifest and a README."""
    clips = []
    for i, (category, name) in enumerate(
        (("dance", "D_One"), ("dance", "D_Two"), ("karate", "K_Kick"))
    ):
        arrays = {k: np.array(v) for k, v in synthetic30.items()}
        arrays["joint_pos"] = arrays["joint_pos"][i * 20 :]
        arrays["body_pos_w"] = arrays["body_pos_w"][i * 20 :]
        arrays["body_quat_w"] = arrays["body_quat_w"][i * 20 :]
        if spike and name == "K_Kick":
            arrays["joint_pos"][100, JOINT_NAMES.index("left_shoulder_yaw_joint")] += 0.8
        path = root / category / f"{name}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        writers.write_csv(arrays, path)
        frames = arrays["joint_pos"].shape[0]
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        clips.append(
            {"clip": name, "category": category, "path": f"{category}/{name}.csv",
             "frames": frames, "fps": 60, "sha256": digest}
        )  # fmt: skip
    (root / "manifest.json").write_text(json.dumps({"source": "x", "license": "y", "clips": clips}))
    (root / "README.md").write_text(f"Keep this attribution: `{ATTRIBUTION}`.\n")
    return root


@pytest.fixture
def library(synthetic30: dict, tmp_path: Path) -> Path:
    return _write_library(synthetic30, tmp_path / "lib", spike=True)


def test_the_manifest_gives_rates_categories_and_the_attribution(library: Path) -> None:
    lib = read_library(library)
    assert [c.name for c in lib.clips] == ["D_One", "D_Two", "K_Kick"]
    assert {c.fps for c in lib.clips} == {60.0} and lib.clips[2].category == "karate"
    assert lib.attribution == ATTRIBUTION
    assert [c.name for c in lib.select(("karate/*", "D_T*")).clips] == ["D_Two", "K_Kick"]
    with pytest.raises(MotionError, match="no clip matches 'nope'"):
        lib.select(("nope",))


def test_library_ids_are_a_folder_or_a_folder_and_globs(library: Path, tmp_path: Path) -> None:
    assert parse_library_id(str(library)) == (library, ())
    assert parse_library_id(f"{library}:karate/*,D_One") == (library, ("karate/*", "D_One"))
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "a.csv").write_text("0\n")
    assert parse_library_id(str(flat)) is None  # a flat folder stays a clip set
    assert parse_library_id("motions/g1/synthetic_dance.npz") is None
    with pytest.raises(MotionError, match="names no clip after ':'"):
        parse_library_id(f"{library}:")


def test_a_changed_file_is_refused_by_its_manifest_digest(library: Path, tmp_path: Path) -> None:
    clip = library / "dance" / "D_One.csv"
    clip.write_text(clip.read_text() + "\n# edited\n")
    with pytest.raises(MotionError, match="its manifest says"):
        resolve_motion(str(library), asset_roots=(tmp_path / "pkg", tmp_path / "cache"), hub="skip")


def test_motion_names_a_library_subset_as_one_clip_set_with_names(
    library: Path, tmp_path: Path
) -> None:
    roots = (tmp_path / "pkg", tmp_path / "cache")
    resolved = resolve_motion(f"{library}:karate/*,D_One", asset_roots=roots, hub="skip")
    clip = load_motion(resolved.path, g1_model())
    assert clip.clip_names == ("D_One", "K_Kick") and clip.num_clips == 2
    # 60 fps → 50 fps: 301 source frames last 5 s (251 frames), 261 last 4.333 s (217)
    assert clip.clip_ends.tolist() == [251, 251 + 217]
    with np.load(resolved.path) as npz:
        assert str(npz["library_attribution"]) == ATTRIBUTION
        assert str(npz["library_repairs"]) == "none"
    again = resolve_motion(f"{library}:karate/*,D_One", asset_roots=roots, hub="skip")
    assert again == resolved


def test_import_prints_one_table_and_writes_the_clip_set(
    library: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("G1SOAK_ASSET_DIR", str(tmp_path / "cache"))
    out = tmp_path / "set.npz"
    assert main(["import", str(library), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "3 clips" in text and "K_Kick" in text and "2 of 3 clips pass every check" in text
    assert f"attribution: {ATTRIBUTION}" in text
    clip = load_motion(out, g1_model())
    assert clip.clip_names == ("D_One", "D_Two", "K_Kick")
    assert main(["import", str(library), "--out", str(out)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err


def test_import_json_follows_its_schema_and_records_the_repair(
    library: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("G1SOAK_ASSET_DIR", str(tmp_path / "cache"))
    assert main(["import", str(library), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert validate(doc, LIBRARY_SCHEMA) == []
    kick = doc["clips"][2]
    assert kick["discontinuities"] == {"wrap": 0, "spike": 1, "step": 0}
    assert kick["failed_checks"] == ["joint_discontinuities"] and doc["passed"] is False
    out = tmp_path / "fixed.npz"
    assert main(["import", str(library), "--repair", "despike", "--json", "--out", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] is True and doc["clips"][2]["repaired"] == 1 and doc["output"] == str(out)
    with np.load(out) as npz:
        assert str(npz["library_repairs"]) == "despike"


def test_import_strict_writes_nothing_and_bad_input_is_one_line(
    library: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("G1SOAK_ASSET_DIR", str(tmp_path / "cache"))
    out = tmp_path / "set.npz"
    assert main(["import", str(library), "--strict", "--out", str(out)]) == 1
    assert (
        "1 of 3 clips fail a check under --strict (K_Kick); nothing written"
        in capsys.readouterr().err
    )
    assert not out.exists()
    assert main(["import", str(library), "--repair", "smooth"]) == 2
    assert "unknown repair 'smooth'" in capsys.readouterr().err
    assert main(["import", str(tmp_path / "none")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def _label_counts(table: str) -> dict[str, int]:
    """How often each check's short label appears in the table's lines."""
    return {
        name: len(re.findall(rf"(?<![\w-]){re.escape(b.label)}(?![\w-])", table))
        for name, b in BOUNDS.items()
    }


def _check_narrow_import(text: str, clips: list[str]) -> dict[str, int]:
    """Every line fits 80 columns, every clip starts a row, and the legend below the table
    names each failed check's label with as many clips as the table shows it for."""
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    for clip in clips:
        assert any(line.startswith(f"{clip} ") for line in lines), clip
    start = next(i for i, line in enumerate(lines) if line.startswith("failed checks ("))
    legend = {}
    for line in lines[start + 1 :]:
        match = LEGEND_LINE.match(line)
        if not match:
            break
        assert BOUNDS[match["check"]].label == match["label"]
        legend[match["check"]] = int(match["clips"])
    shown = _label_counts("\n".join(lines[:start]))
    assert legend == {name: n for name, n in shown.items() if n}
    return legend


def test_import_table_fits_80_columns_and_names_the_failed_checks_below(
    library: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("G1SOAK_ASSET_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["import", str(library)]) == 0
    text = capsys.readouterr().out
    legend = _check_narrow_import(text, ["D_One", "D_Two", "K_Kick"])
    assert legend == {"joint_discontinuities": 1}
    assert "  jumps  joint_discontinuities > 0: 1 clip (--repair despike)" in text
    assert main(["import", str(library), "--repair", "despike"]) == 0
    assert "failed checks" not in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(not G1_MOVES.is_dir(), reason=f"the motion library is not at {G1_MOVES}")
def test_import_of_the_g1_moves_library_reads_at_80_columns(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "80", "G1SOAK_ASSET_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "g1-motion"), "import", str(G1_MOVES)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    manifest = json.loads((G1_MOVES / "manifest.json").read_text(encoding="utf-8"))
    legend = _check_narrow_import(proc.stdout, [c["clip"] for c in manifest["clips"]])
    assert legend["joint_discontinuities"] > 0
    assert "(--repair despike,blend-steps)" in proc.stdout
