"""``soak-report``: the page's sections and PNGs from real soak artifacts (docs/soak.md).

The fixtures are real soaks of the fault children (tests/faults/children): a leaking run
(resource curves, judged trends), a run whose learning declined and a healthy one (training
curves from the event file, evaluation points, checkpoints), and a trainer that crashes.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from contracts.jsonio import load_strict, write_json_atomic
from harness.report.cli import main
from harness.report.page import acceleration_text
from harness.soak.learning import LearningCfg
from harness.soak.monitor import MonitorCfg, run_soak
from tests.harness.schemas.builders import make_learner_acceleration

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CHILDREN = Path(__file__).resolve().parents[2] / "faults" / "children"
RESOURCE_PNGS = ["fd_classes.png", "processes.png", "progress.png", "rss.png"]
TRAINING_PNGS = [
    "env_steps_per_s.png",
    "episode_length.png",
    "evaluation.png",
    "losses.png",
    "reward.png",
]


def _soak(root: Path, child: str, *args: str, **cfg: Any) -> Path:
    settings: dict[str, Any] = {
        "sample_interval_s": 0.05,
        "startup_timeout_s": 5,
        "stale_progress_s": 5,
        "post_shutdown_grace_s": 0,
        "min_duration_s": 0,
        **cfg,
    }
    command = [sys.executable, str(CHILDREN / child), str(root / "run"), *args]
    result = run_soak(
        command,
        log_dir=root / "run",
        output=root / "artifact.json",
        cfg=MonitorCfg(**settings),
        status_stream=None,
    )
    assert result.written
    return root / "artifact.json"


@pytest.fixture(scope="module")
def leak(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real failed soak (an eventfd leak) with a few dozen samples and judged trends."""
    root = tmp_path_factory.mktemp("leak")
    artifact = _soak(root, "leak.py", "eventfd", "1.0", trend_warmup_s=0, trend_min_window_s=0.5)
    assert load_strict(artifact)["failure_classification"] == "resource_leak"
    return artifact


def _regressed_soak(factory: pytest.TempPathFactory, case: str) -> Path:
    """A real soak of the learning child's ``case`` that fails learning_regression (enforced)."""
    root = factory.mktemp(case)
    artifact = _soak(root, "learning.py", case, learning=LearningCfg(mode="enforce"))
    assert load_strict(artifact)["failure_classification"] == "learning_regression"
    return artifact


@pytest.fixture(scope="module")
def declining(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real soak whose final evaluation is far behind its best (enforced)."""
    return _regressed_soak(tmp_path_factory, "declining")


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("healthy")
    artifact = _soak(root, "learning.py", "healthy", learning=LearningCfg(mode="enforce"))
    assert load_strict(artifact)["status"] == "passed"
    return artifact


@pytest.fixture(scope="module")
def clip_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real soak of a clip set whose clip ``spin`` ends behind its own best (enforced)."""
    return _regressed_soak(tmp_path_factory, "clip_declining")


def _render(artifact: Path, out: Path, capsys) -> str:
    assert main([str(artifact), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed[0] == str(out / "report.html")
    assert sorted(Path(p).name for p in printed[1:]) == sorted(p.name for p in out.glob("*.png"))
    for png in out.glob("*.png"):
        assert png.read_bytes().startswith(PNG_MAGIC)
    return (out / "report.html").read_text(encoding="utf-8")


def _section(page: str, anchor: str) -> str:
    start = page.index(f'<h2 id="{anchor}">')
    nxt = page.find("<h2 ", start + 1)
    return page[start : nxt if nxt != -1 else len(page)]


def _pngs(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob("*.png"))


def test_leak_report_has_resource_curves_and_a_failure_section(
    leak: Path, tmp_path: Path, capsys
) -> None:
    page = _render(leak, tmp_path / "r", capsys)
    assert "Soak FAILED" in page and "resource_leak" in page
    assert "sustained resource growth" in _section(page, "failure")
    # the leak child writes an empty event file and never evaluates: said, not drawn
    assert _pngs(tmp_path / "r") == RESOURCE_PNGS
    training = _section(page, "training")
    assert "the event file holds no Train/mean_reward scalar" in training
    assert "evaluation.json is missing" in training
    # CPU machine: no GPU, in words instead of an empty axis
    assert "no GPU" in _section(page, "resources")
    assert page.count("data:image/png;base64,") == len(RESOURCE_PNGS)
    embedded = page.split("data:image/png;base64,")[1].split('"')[0]
    assert base64.b64decode(embedded).startswith(PNG_MAGIC)
    assert 'src="rss.png"' not in page  # nothing refers to a side file


def test_declining_report_shows_training_evaluation_and_why_it_failed(
    declining: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "r"
    page = _render(declining, out, capsys)
    assert _pngs(out) == sorted([*RESOURCE_PNGS, *TRAINING_PNGS])
    failure = _section(page, "failure")
    assert "learning regression: final uniform-start R-MPKPE 78.1 mm (iteration 30)" in failure
    verdicts = _section(page, "verdicts")
    assert "Learning verdict (verdict: regression, mode: enforce)" in verdicts
    assert "final_behind_best" in verdicts and "5.0 %" in verdicts
    assert "policy judged" not in verdicts  # its evaluation.json predates the field
    training = _section(page, "training")
    for title in ("Mean episode reward", "Mean episode length", "Losses", "Env steps/s"):
        assert f"<h3>{title}" in training
    rows = re.findall(r"<tr><td>(\d+)</td><td>[\d,]+</td><td>([^<]*)</td>", training)
    assert rows == [("10", "best"), ("20", "&ndash;"), ("30", "final")]
    assert "<td>78.1</td>" in training and "<td>99.1 %</td>" in training


def test_a_clip_set_report_has_the_clip_table_and_heat_map(
    clip_set: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "r"
    page = _render(clip_set, out, capsys)
    assert _pngs(out) == sorted([*RESOURCE_PNGS, *TRAINING_PNGS, "clips.png"])
    assert "spin (R-MPKPE 28.0 mm vs 12.9 mm at iteration 20)" in _section(page, "failure")
    training = _section(page, "training")
    assert "<h3>R-MPKPE per clip over training (uniform starts)</h3>" in training
    assert "<h3>Clips (2, final point, worst R-MPKPE first)</h3>" in training
    rows = re.findall(r'<tr( class="bad")?><td>(\w+)</td><td>16</td>', training)
    assert rows == [(' class="bad"', "spin"), ("", "kick")]
    assert "<td>12.9 (20)</td><td>r_mpkpe_mm</td>" in training


def test_run_section_lists_config_and_context(declining: Path, tmp_path: Path, capsys) -> None:
    run = _section(_render(declining, tmp_path / "r", capsys), "run")
    cells = dict(re.findall(r"<tr><th>([^<]+)</th><td>([^<]*)</td></tr>", run))
    assert cells["sim backend"] == "mjwarp"  # the fake trainer's run_config and summary
    assert cells["envs"] == "64" and cells["checkpoint interval"] == "10"
    assert cells["iterations (completed of configured)"] == "30 of 30"
    assert cells["env steps"] == "2048"
    assert cells["GPU"].startswith("no GPU")
    assert "python " in cells["versions"]
    assert cells["evaluation protocol"].startswith("64 uniform-start and 64 frame-0 episodes")
    assert cells["learner acceleration"] == (
        "cycle graph on, act graph on, compile on, fusions renorm, losses, networks, "
        "combo_kernels, bf16; nothing fell back"
    )


def test_the_acceleration_line_names_what_fell_back() -> None:
    learner = make_learner_acceleration()
    learner["compile"]["enabled"] = False
    learner["fusion"]["enabled"] = dict.fromkeys(learner["fusion"]["enabled"], False)
    learner["fallbacks"] = [
        {"feature": "fusion", "reason": "graph warm-up/capture failed: E()"},
        {"feature": "compile", "reason": "graph warm-up/capture failed with compile: E()"},
    ]
    assert acceleration_text(learner) == (
        "cycle graph on, act graph on, compile off, fusions none, bf16; fell back: fusion "
        "(graph warm-up/capture failed: E()); compile (graph warm-up/capture failed with compile: E())"
    )
    assert acceleration_text({"error": "RuntimeError: x"}) is None


def test_links_point_at_the_run_files_and_checkpoints(
    declining: Path, tmp_path: Path, capsys
) -> None:
    links = _section(_render(declining, tmp_path / "r", capsys), "links")
    run_dir = declining.parent / "run"
    for name in ("soak-console.log", "run_summary.json", "run_config.json", "evaluation.json"):
        assert f'href="{(run_dir / name).as_uri()}"' in links
    assert f'href="{run_dir.as_uri()}"' in links
    assert re.findall(r">(model_\d+\.pt)</a>", links) == [
        "model_10.pt",
        "model_20.pt",
        "model_30.pt",
    ]


def test_healthy_report_has_no_failure_section_and_states_unjudged_trends(
    healthy: Path, tmp_path: Path, capsys
) -> None:
    page = _render(healthy, tmp_path / "r", capsys)
    assert "Soak PASSED" in page and 'id="failure"' not in page
    verdicts = _section(page, "verdicts")
    # a 0.5 s soak never reaches the 300 s trend warm-up: the page says so
    assert "Trends were not judged: the trend window never started" in verdicts
    assert "Learning verdict (verdict: passed, mode: enforce)" in verdicts
    assert "<tr><th>policy judged</th><td>the actor</td></tr>" in verdicts


def test_crash_report_shows_the_trainers_error_and_console_tail(tmp_path: Path, capsys) -> None:
    artifact = _soak(tmp_path, "crash.py", "start")
    failure = _section(_render(artifact, tmp_path / "r", capsys), "failure")
    assert "trainer exited with returncode 1" in failure
    assert "fatal: cannot start" in failure  # the child's own words, from the console log
    assert "Console tail (last 1 lines" in failure
    page = (tmp_path / "r" / "report.html").read_text()
    assert "Learning was not judged: no usable run_summary.json." in page


def test_a_failed_run_summary_shows_the_trainers_exception(tmp_path: Path, capsys) -> None:
    artifact = _soak(tmp_path, "crash.py", "mid")
    failure = _section(_render(artifact, tmp_path / "r", capsys), "failure")
    assert "RuntimeError: CUDA error: an illegal memory access" in failure
    assert "learner_failure (owner learner, phase training/learner_update)" in failure


@pytest.mark.slow  # renders a whole report
def test_gpu_curve_or_the_reason_there_is_none(leak: Path, tmp_path: Path, capsys) -> None:
    doc = json.loads(leak.read_text())
    device = {"index": "0", "uuid": "GPU-1", "name": "NVIDIA H200", "driver_version": "550"}
    doc["context"]["gpu_devices"] = [device]
    for sample in doc["samples"]:
        sample["gpu"]["errors"] = ["NVML: Not Supported under MPS"]
    write_json_atomic(tmp_path / "mps.json", doc)
    page = _render(tmp_path / "mps.json", tmp_path / "mps", capsys)
    assert "GPU memory unavailable: NVML: Not Supported under MPS" in page
    assert "NVIDIA H200 (driver 550, GPU-1)" in _section(page, "run")
    for k, sample in enumerate(doc["samples"]):
        sample["gpu"].update(source="nvml", used_memory_mib_total=1000 + k)
    write_json_atomic(tmp_path / "gpu.json", doc)
    _render(tmp_path / "gpu.json", tmp_path / "gpu", capsys)
    assert "gpu_memory.png" in _pngs(tmp_path / "gpu")


@pytest.mark.slow  # renders a whole report
def test_a_vanished_run_dir_is_stated(declining: Path, tmp_path: Path, capsys) -> None:
    doc = json.loads(declining.read_text())
    doc["console_log"] = str(tmp_path / "gone" / "soak-console.log")
    write_json_atomic(tmp_path / "moved.json", doc)
    page = _render(tmp_path / "moved.json", tmp_path / "r", capsys)
    assert f"the run directory {tmp_path / 'gone'} is gone" in _section(page, "run")
    assert _pngs(tmp_path / "r") == RESOURCE_PNGS
    # the verdict's record of the evaluation stays in the artifact
    assert "final_behind_best" in _section(page, "verdicts")


@pytest.mark.slow  # renders a whole report
def test_default_out_dir_is_beside_the_artifact(leak: Path, tmp_path: Path) -> None:
    copy = tmp_path / "a.json"
    shutil.copy(leak, copy)
    assert main([str(copy)]) == 0
    assert (tmp_path / "a-report" / "report.html").is_file()


@pytest.mark.parametrize(
    ("content", "message"),
    [
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
    assert err.endswith("; pass the artifact g1-soak or soak-run wrote (its --output)\n")
    assert not (tmp_path / "r").exists()


def test_a_missing_artifact_is_exit_2_and_a_relative_path_is_taken_from_the_cwd(
    leak: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["runs/../a.json", "--out", "r"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: artifact {tmp_path / 'a.json'} does not exist; pass the --output of "
        "g1-soak/soak-run\n"
    )
    assert not (tmp_path / "r").exists()
    shutil.copy(leak, tmp_path / "a.json")
    assert main(["runs/../a.json", "--out", "r"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == str(tmp_path / "r" / "report.html")


def test_schema_invalid_artifact_names_the_path(leak: Path, tmp_path: Path, capsys) -> None:
    doc = json.loads(leak.read_text())
    doc["samples"][0]["process"]["rss_kib_total"] = -1
    write_json_atomic(tmp_path / "bad.json", doc)
    assert main([str(tmp_path / "bad.json")]) == 1
    assert "$.samples[0].process.rss_kib_total" in capsys.readouterr().err


def test_report_without_samples_still_renders(leak: Path, tmp_path: Path, capsys) -> None:
    doc = json.loads(leak.read_text())
    doc["samples"] = []
    write_json_atomic(tmp_path / "empty.json", doc)
    page = _render(tmp_path / "empty.json", tmp_path / "r", capsys)
    assert _pngs(tmp_path / "r") == []
    assert "the monitor took no sample" in _section(page, "resources")
