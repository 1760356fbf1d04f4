"""``g1-pull-assets`` (docs/contracts.md §other-commands, §assets-and-motion): rows, statuses, exit codes, idempotence."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest

from trainer import assets_cli
from trainer.assets_cli import main
from trainer.task.motion import DANCE_MOTION_ID, SYNTHETIC_MOTION_ID, npz_sha256

ITEMS = [
    "robots/g1/g1.xml",
    "robots/g1/scene_flat.xml",
    SYNTHETIC_MOTION_ID,
    DANCE_MOTION_ID,
]


def _run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "g1-pull-assets"  # the [project.scripts] entry
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


@pytest.mark.slow
def test_console_script_pulls_then_reports_present(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("G1SOAK_ASSET_DIR", "HF_HUB_OFFLINE")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    cache = tmp_path / "assets"
    args = ("--robot", "g1", "--asset-dir", str(cache), "--hub", "skip", "--json")
    first = _run_cli(*args, env=env)
    assert first.returncode == 0, first.stderr
    rows = json.loads(first.stdout)
    assert [r["item"] for r in rows] == ITEMS
    assert [r["status"] for r in rows] == ["copied", "generated", "generated", "missing"]
    assert (rows[3]["file_sha256"], rows[3]["arrays_sha256"]) == (None, None)
    clip = cache / SYNTHETIC_MOTION_ID
    assert rows[2]["arrays_sha256"] == npz_sha256(clip)
    assert rows[2]["file_sha256"] == hashlib.sha256(clip.read_bytes()).hexdigest()
    scene = Path(rows[1]["path"])
    assert rows[1]["file_sha256"] == hashlib.sha256(scene.read_bytes()).hexdigest()
    assert rows[1]["arrays_sha256"] is None and "sha256" not in rows[1]
    assert all(Path(r["path"]).is_relative_to(cache) for r in rows)
    loaded = mujoco.MjModel.from_xml_path(rows[1]["path"])
    assert (loaded.nq, loaded.nv, loaded.nu, loaded.nbody) == (36, 35, 29, 31)

    second = _run_cli(*args, env=env)
    assert second.returncode == 0, second.stderr
    again = json.loads(second.stdout)
    assert [r["status"] for r in again] == ["present", "present", "present", "missing"]
    assert [r["file_sha256"] for r in again] == [r["file_sha256"] for r in rows]
    assert not (tmp_path / "xdg").exists()  # --asset-dir wins over the default cache root


def test_table_output_and_default_cache_root(
    isolated_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--hub", "skip"]) == 0
    out = capsys.readouterr().out
    header, _, *lines = out.splitlines()
    assert header.split() == ["item", "status", "file_sha256", "arrays_sha256", "path"]
    clip = isolated_cache / "g1soak/assets" / SYNTHETIC_MOTION_ID
    row = next(line.split() for line in lines if line.startswith(SYNTHETIC_MOTION_ID))
    assert row == [
        SYNTHETIC_MOTION_ID,
        "generated",
        hashlib.sha256(clip.read_bytes()).hexdigest()[:16] + "...",
        npz_sha256(clip)[:16] + "...",
        str(clip),
    ]
    assert (isolated_cache / "g1soak/assets/robots/g1/scene_flat.xml").is_file()


def test_unknown_robot_is_a_usage_error_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--robot", "h1", "--asset-dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == ["error: --robot 'h1' is not supported; use --robot g1"]
    assert not any(tmp_path.iterdir())


def test_bad_hub_choice_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--hub", "always", "--asset-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "--hub" in err[0]


def test_auto_hub_offline_warns_but_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["--asset-dir", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[3]["status"] == "missing"
    assert "warning:" in captured.err and "HF_HUB_OFFLINE" in captured.err
    assert "error:" not in captured.err


def test_require_hub_fails_when_the_clip_cannot_be_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def unreachable(motion_id: str, hub_repo: str, local_dir: Path) -> Path:
        raise ConnectionError("hub unreachable")

    monkeypatch.setattr(assets_cli, "download_from_hub", unreachable)
    assert main(["--asset-dir", str(tmp_path), "--hub", "require", "--json"]) == 1
    captured = capsys.readouterr()
    rows = json.loads(captured.out)  # the report is still printed and parses
    assert rows[3]["status"] == "missing"
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "ConnectionError: hub unreachable" in errors[0]


def test_require_hub_passes_after_a_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls: list[tuple[str, str]] = []

    def fake_download(motion_id: str, hub_repo: str, local_dir: Path) -> Path:
        calls.append((motion_id, hub_repo))
        target = local_dir / motion_id
        target.parent.mkdir(parents=True, exist_ok=True)
        np.savez(target, fps=np.asarray(50))
        return target

    monkeypatch.setattr(assets_cli, "download_from_hub", fake_download)
    assert main(["--asset-dir", str(tmp_path), "--hub", "require", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[3]["status"] == "downloaded" and rows[3]["arrays_sha256"]
    assert calls == [(DANCE_MOTION_ID, "unilabsim/unilab-motions")]
    assert main(["--asset-dir", str(tmp_path), "--hub", "require", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[3]["status"] == "present"
    assert len(calls) == 1


def test_the_soak_artifact_names_the_same_file_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.soak.context import motion_context

    monkeypatch.setenv("G1SOAK_ASSET_DIR", str(tmp_path))
    assert main(["--hub", "skip", "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out) if r["item"] == SYNTHETIC_MOTION_ID)
    context = motion_context(SYNTHETIC_MOTION_ID)
    assert context["file_sha256"] == row["file_sha256"] != row["arrays_sha256"]


def test_a_relative_asset_dir_is_taken_from_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--hub", "skip", "--asset-dir", "assets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(Path(r["path"]).is_relative_to(tmp_path / "assets") for r in rows)
