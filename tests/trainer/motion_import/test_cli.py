"""``g1-motion inspect/convert/list``: tables, strict JSON against its schema, the PNG, exit
codes, and nothing written when --strict fails."""

from __future__ import annotations

import json
from pathlib import Path

import g1soak_motion_writers as writers
import numpy as np
import pytest

from contracts.schemas import validate
from trainer.motion_import.cli import main
from trainer.motion_import.report import INSPECT_SCHEMA
from trainer.sim.scene import JOINT_NAMES
from trainer.task.motion import SYNTHETIC_MOTION_ID


@pytest.fixture
def csv_clip(synthetic30: dict[str, np.ndarray], tmp_path: Path) -> Path:
    return writers.write_csv(synthetic30, tmp_path / "walk.csv")


def test_inspect_prints_the_convention_and_the_check_table(
    csv_clip: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", str(csv_clip)]) == 0
    out = capsys.readouterr().out
    assert "csv (retargeted CSV" in out and "301 at 30 fps" in out and "501 frames at 50 fps" in out
    for name in ("joint_limit_excess", "foot_height_min", "root_height_max", "joint_speed_max"):
        assert name in out
    assert "FAIL" not in out


def test_inspect_at_80_columns_cuts_no_name_and_no_fix(
    synthetic30: dict[str, np.ndarray],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arrays = {k: np.array(v) for k, v in synthetic30.items()}
    arrays["joint_pos"][100, JOINT_NAMES.index("right_shoulder_pitch_joint")] += 1.5
    clip = writers.write_csv(arrays, tmp_path / "spiked.csv")
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["inspect", str(clip)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert "FAIL" in rows["joint_discontinuities"] and "joint_limit_excess" in rows
    assert "right_shoulder_pitch_joint" in out and "--repair despike" in " ".join(out.split())


@pytest.mark.slow  # draws the PNG with matplotlib
def test_inspect_json_follows_its_schema_and_the_png_is_drawn(
    synthetic: dict[str, np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = writers.write_root_included(synthetic, tmp_path / "r.npz")
    png = tmp_path / "fig" / "r.png"
    assert main(["inspect", str(src), "--json", "--png", str(png)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert validate(doc, INSPECT_SCHEMA) == []
    assert doc["convention"] == "root-included" and doc["passed"] is True
    assert len(doc["residual"]) == 30 and doc["frames"] == 500
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_convert_writes_the_contract_and_refuses_to_overwrite(
    csv_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "walk.npz"
    assert main(["convert", str(csv_clip), str(out), "--strict"]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert main(["inspect", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["convention"], doc["native"]) == ("g1soak", True)
    assert doc["provenance"]["import_convention"] == "csv"
    assert doc["provenance"]["import_fps_in"] == 30.0
    assert main(["convert", str(csv_clip), str(out)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert main(["convert", str(csv_clip), str(out), "--force", "--fps-in", "25"]) == 0
    assert main(["convert", str(csv_clip), str(tmp_path / "x.csv")]) == 2


def test_strict_fails_with_the_numbers_and_writes_nothing(
    synthetic: dict[str, np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    high = dict(synthetic)
    high["body_pos_w"] = synthetic["body_pos_w"] + np.float32(0.5)  # the whole clip floats
    src = writers.write_mjlab(high, tmp_path / "float.npz")
    out = tmp_path / "out.npz"
    assert main(["convert", str(src), str(out)]) == 0  # reported, not fatal
    assert "FAIL" in capsys.readouterr().out
    out.unlink()
    assert main(["convert", str(src), str(out), "--strict"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fail under --strict: airborne_max_s = 10 s" in err[0]
    assert err[0].endswith("nothing written") and not out.exists()
    assert main(["inspect", str(src), "--strict"]) == 1


def test_list_names_the_aliases_and_the_cached_clips(
    isolated_cache: Path,
    synthetic30: dict[str, np.ndarray],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from trainer.task.motion import resolve_motion

    resolve_motion(SYNTHETIC_MOTION_ID, hub="skip")
    resolve_motion(str(writers.write_csv(synthetic30, tmp_path / "walk.csv")), hub="skip")
    assert main(["list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["synthetic"]["kind"] == "alias" and rows["synthetic"]["frames"] == 500
    assert rows["dance"]["path"] is None and "not cached yet" in rows["dance"]["note"]
    assert rows[SYNTHETIC_MOTION_ID]["kind"] == "cache"
    converted = [r for r in rows.values() if r["kind"] == "converted"]
    assert len(converted) == 1 and converted[0]["note"] == "converted from walk.csv (csv)"
    assert resolve_motion(converted[0]["name"], hub="skip").path == Path(converted[0]["path"])
    assert main(["list"]) == 0
    assert "clips --motion can name" in capsys.readouterr().out


def test_a_wrong_joint_order_shows_the_residual_per_body(
    synthetic: dict[str, np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = synthetic | {"joint_pos": synthetic["joint_pos"][:, ::-1].copy()}
    src = writers.write_mjlab(wrong, tmp_path / "isaac_order.npz")
    assert main(["inspect", str(src)]) == 0
    out = capsys.readouterr().out
    assert "largest forward-kinematics residuals (of 30 bodies)" in out and "FAIL" in out
