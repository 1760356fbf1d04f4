"""No artifact lost or overwritten (docs/soak.md, "Before the launch"): before anything is
launched the soak refuses an artifact path it cannot write, a full disk, and a path another
running soak holds; a crashed soak leaves no claim behind; a byte that is not UTF-8 in a path
or a summary string is escaped, never a reason to lose the artifact; a full disk at the end
is named.

Each scenario runs ``--fault-repeats`` times (default 3), each repeat in a directory of its
own, and returns its outcome: the repeats' outcomes must be identical (tests/faults/repeat.py).
The repeats of the scenarios that run soaks as subprocesses run side by side (their paths and
processes are their own); those that patch this process (``monkeypatch``, ``capsys``) run one
after another.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.jsonio import load_strict
from contracts.procfs import read_stat
from contracts.schemas import validate
from harness.soak import claim as claim_module
from harness.soak.claim import claim_soak_paths
from harness.soak.cli import soak_run_main
from tests.faults.repeat import Outcome, normalize, repeated

CHILDREN = Path(__file__).resolve().parents[2] / "faults" / "children"
SOAK_RUN = "import sys; from harness.soak.cli import soak_run_main; soak_run_main()"
QUICK = ["--min-duration-seconds", "0", "--sample-interval-seconds", "0.1",
         "--post-shutdown-grace-seconds", "0.2"]  # fmt: skip
WAIT_S = 60


def _soak_argv(log_dir: Path | bytes, output: Path | bytes, *child: str | bytes) -> list:
    return [sys.executable, "-c", SOAK_RUN, "--json", *QUICK, "--log-dir", log_dir,
            "--output", output, "--", sys.executable, *child]  # fmt: skip


def _marker_child(marker: Path) -> list[str]:
    """A trainer whose only act is to leave ``marker``: it exists iff it was launched."""
    return ["-c", f"open({str(marker)!r}, 'w').close()"]


def _refused(proc: subprocess.CompletedProcess[str], marker: Path) -> str:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and not marker.exists()
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    return lines[0]


@repeated(side_by_side=True)
def test_an_unwritable_output_is_refused_before_the_launch(tmp_path: Path) -> Outcome:
    (tmp_path / "file").write_text("not a directory")
    output, marker = tmp_path / "file" / "soak.json", tmp_path / "launched"
    proc = subprocess.run(
        _soak_argv(tmp_path / "run", output, *_marker_child(marker)),
        capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    line = _refused(proc, marker)
    assert f"--output {output}: cannot create its directory {output.parent}" in line
    assert "pick a writable path" in line
    assert not (tmp_path / "run").exists()
    return {"line": normalize(line, root=tmp_path)}


@repeated(side_by_side=True)
def test_a_log_dir_that_cannot_be_created_is_refused_before_the_launch(tmp_path: Path) -> Outcome:
    (tmp_path / "file").write_text("not a directory")
    log_dir, marker = tmp_path / "file" / "run", tmp_path / "launched"
    proc = subprocess.run(
        _soak_argv(log_dir, tmp_path / "soak.json", *_marker_child(marker)),
        capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    line = _refused(proc, marker)
    assert (
        line
        == f"error: --log-dir {log_dir}: cannot create it (Not a directory); pick a writable path"
    )
    assert not (tmp_path / "soak.json").exists()
    return {"line": normalize(line, root=tmp_path)}


@repeated()
def test_an_unwritable_log_dir_is_refused_before_the_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Outcome:
    """A run directory it may read but not write (root writes anywhere, so os.access plays
    the kernel's answer for another user)."""
    log_dir, marker = tmp_path / "run", tmp_path / "launched"
    log_dir.mkdir()
    real_access = os.access
    monkeypatch.setattr(
        claim_module.os,
        "access",
        lambda path, mode: (
            False if Path(path) == log_dir and mode & os.W_OK else real_access(path, mode)
        ),
    )
    code = soak_run_main(
        [*QUICK, "--log-dir", str(log_dir), "--output", str(tmp_path / "a.json"), "--",
         sys.executable, *_marker_child(marker)]
    )  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and not marker.exists() and list(log_dir.iterdir()) == []
    assert err == f"error: --log-dir {log_dir} is not writable; pick a writable path"
    return {"code": code, "err": normalize(err, root=tmp_path)}


@repeated()
def test_a_full_disk_is_refused_before_the_launch_naming_it(
    tmp_path, monkeypatch, capsys
) -> Outcome:
    monkeypatch.setattr(
        claim_module.shutil, "disk_usage", lambda _path: type("U", (), {"free": 4096})()
    )
    marker = tmp_path / "launched"
    code = soak_run_main(
        [*QUICK, "--log-dir", str(tmp_path / "run"), "--output", str(tmp_path / "a.json"), "--",
         sys.executable, *_marker_child(marker)]
    )  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and not marker.exists()
    assert err == (
        f"error: no space left on device at {tmp_path}; free space or pick another --output"
    )
    return {"code": code, "err": normalize(err, root=tmp_path), "launched": marker.exists()}


NO_SPACE_ON_WRITE = (
    "import errno, os\n"
    "from harness.soak import artifact\n"
    "def no_space(path, _doc):\n"
    "    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))\n"
    "artifact.write_json_atomic = no_space\n"
    "from harness.soak.cli import soak_run_main\n"
    "soak_run_main()\n"
)


@pytest.mark.slow  # a soak a repeat: 5 s on 2 cores
@repeated(side_by_side=True)
def test_a_full_disk_when_the_artifact_is_written_is_named(tmp_path: Path) -> Outcome:
    output = tmp_path / "a.json"
    argv = _soak_argv(
        tmp_path / "run", output, str(CHILDREN / "fake_trainer.py"), "{log_dir}", "ok"
    )
    argv[2] = NO_SPACE_ON_WRITE  # the real soak-run, its disk full when the artifact is written
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=WAIT_S, check=False)
    assert proc.returncode == 1 and not output.exists()
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: could not write the soak artifact {output}: no space left on device at "
        f"{output}; free space or pick another --output"
    )
    assert json.loads(proc.stdout)["artifact"] is None
    return {
        "returncode": proc.returncode,
        "said": normalize(proc.stderr.strip().splitlines()[-1], root=tmp_path),
        "artifact": output.exists(),
    }


# -- two soaks, one path ---------------------------------------------------------------
class GatedSoak:
    """A soak whose trainer (tests/faults/children/gated.py) waits at a FIFO until released."""

    def __init__(self, root: Path, log_dir: Path, output: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.log_dir, self.output = root, log_dir, output
        self.gate = root / "gate"
        os.mkfifo(self.gate)
        argv = _soak_argv(log_dir, output, str(CHILDREN / "gated.py"), "{log_dir}", str(self.gate))
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.trainer_pid = self._wait_started()

    def _wait_started(self) -> int:
        started = self.log_dir.parent / "started"
        deadline = time.monotonic() + WAIT_S
        while not (started.exists() and started.read_text()):
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "the gated trainer never started"
            time.sleep(0.02)  # polling for a condition, not a synchronizing sleep
        return int(started.read_text())

    def release(self) -> dict:
        with open(self.gate, "w", encoding="utf-8") as handle:
            handle.write("go\n")
        out, err = self.proc.communicate(timeout=WAIT_S)
        assert self.proc.returncode == 0, err
        return json.loads(out)

    def kill(self) -> None:
        """SIGKILL the soak itself (a crash), then the trainer it leaves running."""
        self.proc.kill()
        self.proc.communicate(timeout=WAIT_S)
        os.killpg(self.trainer_pid, signal.SIGKILL)


@pytest.fixture
def soaks() -> Iterator[list[GatedSoak]]:
    started: list[GatedSoak] = []
    yield started
    for soak in started:
        if soak.proc.poll() is None:
            soak.kill()
    for soak in started:
        stat = read_stat(soak.trainer_pid)
        assert stat is None or stat.state in ("Z", "X"), f"trainer {soak.trainer_pid} survived"


def _assert_passed(artifact_path: Path) -> None:
    doc = load_strict(artifact_path)
    assert validate(doc, "soak_artifact.0.3.0.json") == []
    assert (doc["status"], doc["failure_classification"]) == ("passed", None), doc["failure_reason"]
    assert doc["post_shutdown"]["residual_processes"] == []


@pytest.mark.slow  # two soaks a repeat
@pytest.mark.parametrize("shared", ["output", "log_dir"])
@repeated(side_by_side=True)
def test_a_second_soak_on_a_claimed_path_is_refused_and_launches_nothing(
    tmp_path: Path, soaks: list[GatedSoak], shared: str
) -> Outcome:
    first = GatedSoak(tmp_path / "a", tmp_path / "a" / "run", tmp_path / "a.json")
    soaks.append(first)
    log_dir = first.log_dir if shared == "log_dir" else tmp_path / "b" / "run"
    output = first.output if shared == "output" else tmp_path / "b.json"
    marker = tmp_path / "second-launched"
    proc = subprocess.run(
        _soak_argv(log_dir, output, *_marker_child(marker)),
        capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    line = _refused(proc, marker)
    if shared == "output":
        assert line.startswith(f"error: --output {output} is claimed by another running soak")
    else:  # the first soak's trainer already writes there
        assert line == f"error: --log-dir {log_dir} is not empty; pass a missing or empty directory"
    assert first.release()["status"] == "passed"
    _assert_passed(first.output)  # the first soak's artifact, not overwritten
    return {"line": normalize(line, root=tmp_path), "launched": marker.exists()}


@repeated(side_by_side=True)
def test_a_run_dir_claimed_before_its_trainer_starts_is_refused(tmp_path: Path) -> Outcome:
    """The window a second soak started a second later falls in: the first one holds the
    run directory, still empty, and has not launched yet (here: this test holds it)."""
    log_dir, marker = tmp_path / "run", tmp_path / "second-launched"
    with claim_soak_paths(log_dir, tmp_path / "first.json"):
        proc = subprocess.run(
            _soak_argv(log_dir, tmp_path / "second.json", *_marker_child(marker)),
            capture_output=True, text=True, timeout=WAIT_S, check=False,
        )  # fmt: skip
    line = _refused(proc, marker)
    assert line.startswith(f"error: --log-dir {log_dir} is claimed by another running soak")
    assert list(log_dir.iterdir()) == [] and not (tmp_path / "second.json").exists()
    return {"line": normalize(line, root=tmp_path), "launched": marker.exists()}


@pytest.mark.slow  # two soaks a repeat
@repeated(side_by_side=True)
def test_a_crashed_soak_leaves_no_claim_behind(tmp_path: Path, soaks: list[GatedSoak]) -> Outcome:
    crashed = GatedSoak(tmp_path / "a", tmp_path / "a" / "run", tmp_path / "soak.json")
    soaks.append(crashed)
    crashed.kill()
    crashed_wrote = crashed.output.exists()
    assert not crashed_wrote
    second = GatedSoak(tmp_path / "b", tmp_path / "b" / "run", crashed.output)
    soaks.append(second)
    status = second.release()["status"]
    assert status == "passed"
    _assert_passed(second.output)
    return {"crashed_wrote": crashed_wrote, "second": status}


# -- bytes that are not UTF-8 ----------------------------------------------------------
@pytest.mark.slow  # a soak a repeat: 6 s on 2 cores
@repeated(side_by_side=True)
def test_a_path_that_is_not_utf8_is_escaped_and_the_soak_passes(tmp_path: Path) -> Outcome:
    root = os.fsencode(tmp_path)
    log_dir, output = root + b"/run\xff", root + b"/soak\xfe.json"
    proc = subprocess.run(
        _soak_argv(log_dir, output, str(CHILDREN / "fake_trainer.py"), "{log_dir}", "ok"),
        capture_output=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = load_strict(os.fsdecode(output))
    assert validate(doc, "soak_artifact.0.3.0.json") == []
    assert doc["status"] == "passed"
    assert doc["console_log"] == f"{tmp_path}/run\\xff/soak-console.log"
    assert "$.console_log" in doc["non_utf8_escaped"]
    assert json.loads(proc.stdout)["artifact"] == f"{tmp_path}/soak\\xfe.json"
    return {
        "status": doc["status"],
        "console_log": normalize(doc["console_log"], root=tmp_path),
        "escaped": doc["non_utf8_escaped"],
    }


@pytest.mark.slow  # a soak a repeat: 6 s on 2 cores
@repeated(side_by_side=True)
def test_a_summary_string_that_is_not_utf8_is_escaped_and_judged(tmp_path: Path) -> Outcome:
    output = tmp_path / "soak.json"
    proc = subprocess.run(
        _soak_argv(tmp_path / "run", output, str(CHILDREN / "fake_trainer.py"), "{log_dir}",
                   "failed_non_utf8_error"),
        capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    doc = load_strict(output)
    assert validate(doc, "soak_artifact.0.3.0.json") == []
    assert doc["failure_classification"] == "learner_failure"
    assert "shutdown classification=learner_failure" in doc["failure_reason"]
    assert doc["run_summary"]["error"] == "CUDA error in /data/run\\xff: an illegal memory access"
    assert doc["non_utf8_escaped"] == ["$.run_summary.error"]
    return {
        "classification": doc["failure_classification"],
        "reason": doc["failure_reason"],
        "error": doc["run_summary"]["error"],
        "escaped": doc["non_utf8_escaped"],
    }


# -- an existing artifact --------------------------------------------------------------
@pytest.mark.slow  # soaks a repeat: 8 s on 2 cores
@repeated(side_by_side=True)
def test_an_existing_artifact_is_kept_unless_overwrite_says_replace(tmp_path: Path) -> Outcome:
    output = tmp_path / "soak.json"
    output.write_text('{"kept": true}\n', encoding="utf-8")
    marker = tmp_path / "launched"
    proc = subprocess.run(
        _soak_argv(tmp_path / "a", output, *_marker_child(marker)),
        capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    refusal = _refused(proc, marker)
    assert refusal == (
        f"error: --output {output} already exists; pass a new artifact path, or --overwrite to "
        "replace it"
    )
    assert load_strict(output) == {"kept": True}
    argv = _soak_argv(tmp_path / "b", output, str(CHILDREN / "fake_trainer.py"), "{log_dir}", "ok")
    proc = subprocess.run(
        [*argv[:3], "--overwrite", *argv[3:]],
        capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    _assert_passed(output)
    return {"refusal": normalize(refusal, root=tmp_path), "overwritten": proc.returncode}
