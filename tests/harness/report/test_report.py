"""``soak-report``: PNGs and a self-contained HTML page from a real artifact (CONTRACTS §1.3)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest

from harness.jsonio import write_json_atomic
from harness.report.cli import PLOTS, main
from harness.soak.monitor import MonitorCfg, run_soak

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CHILDREN = Path(__file__).resolve().parents[2] / "faults" / "children"


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real failed soak (an eventfd leak) with a few dozen samples."""
    root = tmp_path_factory.mktemp("soak")
    cfg = MonitorCfg(
        sample_interval_s=0.05,
        startup_timeout_s=5,
        stale_progress_s=5,
        post_shutdown_grace_s=0,
        min_duration_s=0,
        trend_warmup_s=0,
        trend_min_window_s=0.5,
    )
    command = [sys.executable, str(CHILDREN / "leak.py"), str(root / "run"), "eventfd", "1.0"]
    result = run_soak(
        command, log_dir=root / "run", output=root / "artifact.json", cfg=cfg, status_stream=None
    )
    assert result.written and result.artifact["failure_classification"] == "resource_leak"
    return root / "artifact.json"


def test_report_renders_pngs_and_a_self_contained_page(
    artifact: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "report"
    assert main([str(artifact), "--out", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["report.html", *(name for name, _ in PLOTS)])
    for name, _ in PLOTS:
        assert (out / name).read_bytes().startswith(PNG_MAGIC)
    page = (out / "report.html").read_text()
    assert "Soak FAILED" in page and "resource_leak" in page
    assert "sustained resource growth" in page
    assert page.count("data:image/png;base64,") == len(PLOTS)
    embedded = page.split("data:image/png;base64,")[1].split('"')[0]
    assert base64.b64decode(embedded).startswith(PNG_MAGIC)
    assert 'src="' + "rss.png" not in page  # nothing refers to a side file
    assert str(out / "report.html") in capsys.readouterr().out


def test_default_out_dir_is_beside_the_artifact(artifact: Path, tmp_path: Path) -> None:
    copy = tmp_path / "a.json"
    copy.write_text(artifact.read_text())
    assert main([str(copy)]) == 0
    assert (tmp_path / "a-report" / "report.html").is_file()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        ("{not json", "is unreadable"),
        ('{"a": NaN}', "is unreadable"),
        ("[1]", "is not a JSON object"),
        ('{"schema_version": "0.2.0"}', "is not a valid 0.3.0 soak artifact"),
    ],
)
def test_bad_artifacts_exit_1_with_one_error_line(
    tmp_path: Path, capsys, content: str | None, message: str
) -> None:
    path = tmp_path / "a.json"
    if content is not None:
        path.write_text(content)
    assert main([str(path), "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err
    assert not (tmp_path / "r").exists()


def test_schema_invalid_artifact_names_the_path(artifact: Path, tmp_path: Path, capsys) -> None:
    doc = json.loads(artifact.read_text())
    doc["samples"][0]["process"]["rss_kib_total"] = -1
    write_json_atomic(tmp_path / "bad.json", doc)
    assert main([str(tmp_path / "bad.json")]) == 1
    assert "$.samples[0].process.rss_kib_total" in capsys.readouterr().err


def test_report_without_gpu_or_samples_still_renders(artifact: Path, tmp_path: Path) -> None:
    doc = json.loads(artifact.read_text())
    doc["samples"] = []
    write_json_atomic(tmp_path / "empty.json", doc)
    assert main([str(tmp_path / "empty.json"), "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "gpu_memory.png").read_bytes().startswith(PNG_MAGIC)
