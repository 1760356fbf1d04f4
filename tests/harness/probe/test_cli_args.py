"""g1-backend-probe flag validation: every bad flag is exit 2 with exactly one ``error:`` line,
before anything is launched or written (docs/probe.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.errors import UsageError
from harness.probe.cli import main, parse_backends


def _errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        pytest.param(["--backends", "physx"], "unknown backend 'physx'", id="unknown-backend"),
        pytest.param(["--backends", "mujoco,mujoco"], "more than once", id="duplicate"),
        pytest.param(["--backends", "mjwarp,,mujoco"], "empty entry", id="empty-entry"),
        pytest.param(["--backends", ""], "empty entry", id="empty-list"),
        pytest.param(["--num-envs", "0"], "--num-envs", id="num-envs-0"),
        pytest.param(["--num-envs", "two"], "--num-envs", id="num-envs-text"),
        pytest.param(["--warmup", "-1"], "--warmup", id="warmup-negative"),
        pytest.param(["--iters", "0"], "--iters", id="iters-0"),
        pytest.param(["--frobnicate"], "--frobnicate", id="unknown-flag"),
    ],
)
def test_bad_flags_exit_2_with_one_error_line_and_write_nothing(
    args: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "probe.json"
    rc = main([*args, "--output", str(out)])
    captured = capsys.readouterr()
    errors = _errors(captured.err)
    assert rc == 2
    assert len(errors) == 1, captured.err
    assert needle in errors[0]
    assert not out.exists()
    assert captured.out == ""


def test_missing_output_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--backends", "mujoco"])
    errors = _errors(capsys.readouterr().err)
    assert rc == 2
    assert errors == [
        "error: --output PATH is required; e.g. --output artifacts/probe/current-host.json"
    ]


def test_output_directory_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["--backends", "mujoco", "--output", str(tmp_path)])
    errors = _errors(capsys.readouterr().err)
    assert rc == 2
    assert len(errors) == 1 and "is a directory" in errors[0]


def test_bad_gpu_query_source_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("G1SOAK_PROBE_GPU_QUERY", "dcgm")
    out = tmp_path / "p.json"
    rc = main(["--backends", "mujoco", "--output", str(out)])
    errors = _errors(capsys.readouterr().err)
    assert rc == 2
    assert len(errors) == 1 and "G1SOAK_PROBE_GPU_QUERY='dcgm'" in errors[0]
    assert not out.exists()


def test_parse_backends_keeps_the_requested_order() -> None:
    assert parse_backends("mujoco,mjwarp") == ["mujoco", "mjwarp"]
    assert parse_backends(" mjwarp ") == ["mjwarp"]
    with pytest.raises(UsageError, match="mjwarp more than once"):
        parse_backends("mjwarp,mujoco,mjwarp")


def test_help_lists_the_contract_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for flag in (
        "--backends",
        "--num-envs",
        "--warmup",
        "--iters",
        "--acceptance",
        "--output",
        "--json",
        "--plot",
    ):
        assert flag in text
    assert "--_single-result" not in text  # hidden child flag


def test_relative_output_and_plot_are_taken_from_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    assert main(["--backends", "mujoco", "--output", "results"]) == 2
    assert _errors(capsys.readouterr().err) == [
        f"error: --output {tmp_path / 'results'} is a directory; name a JSON file inside it"
    ]
    assert main(["--backends", "mujoco", "--output", "p.json", "--plot", "results"]) == 2
    assert _errors(capsys.readouterr().err) == [
        f"error: --plot {tmp_path / 'results'} is a directory; name a PNG file"
    ]
