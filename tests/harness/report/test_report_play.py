"""soak-report's "Policy playback" block: the run's filmstrip when play made one."""

from __future__ import annotations

import base64
from pathlib import Path

from contracts.jsonio import write_json_atomic
from harness.report.play import play_html, run_dir_of

PNG = b"\x89PNG\r\n\x1a\nfake"


def _run(tmp_path: Path, play: dict | None) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    doc = {"status": "completed", "log_dir": str(run)}
    if play is not None:
        doc["play"] = play
    write_json_atomic(run / "run_summary.json", doc)
    return run


def test_the_filmstrip_is_embedded_and_the_video_linked(tmp_path: Path) -> None:
    run = tmp_path / "run"
    strip, video = run / "play_filmstrip.png", run / "play.mp4"
    _run(tmp_path, {"status": "ok", "filmstrip": str(strip), "video": str(video), "frames": 500})
    strip.write_bytes(PNG)
    block = play_html({"run_summary": {"log_dir": str(run)}})
    embedded = block.split("data:image/png;base64,")[1].split('"')[0]
    assert base64.b64decode(embedded) == PNG
    assert f'href="{video.as_uri()}"' in block and "500 frames" in block


def test_a_failed_play_shows_its_reason_and_a_skip_shows_nothing(tmp_path: Path) -> None:
    run = _run(tmp_path, {"status": "failed", "reason": "video: cannot render <GL>"})
    block = play_html({"console_log": str(run / "soak-console.log"), "run_summary": None})
    assert "play failed: video: cannot render &lt;GL&gt;" in block
    write_json_atomic(run / "run_summary.json", {"play": {"status": "skipped", "reason": "x"}})
    assert play_html({"console_log": str(run / "soak-console.log")}) == ""


def test_no_summary_or_no_run_dir_gives_no_block(tmp_path: Path) -> None:
    assert play_html({"console_log": str(tmp_path / "soak-console.log")}) == ""
    assert play_html({}) == ""
    assert run_dir_of({"run_summary": {"log_dir": "/a/run"}, "console_log": "/b/x.log"}) == Path(
        "/a/run"
    )
