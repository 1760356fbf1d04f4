"""RunIdentity and its parts: the artifact's context sections, and reading an identity back."""

from __future__ import annotations

from contracts.identity import MotionRef, RunIdentity, SourceTree
from contracts.schemas import load_schema

SHA = "ab" * 32


def test_sections_have_the_artifact_schemas_keys_in_order() -> None:
    context = load_schema("soak_artifact.0.3.0.json")["properties"]["context"]["properties"]
    source = SourceTree(path="/src", commit="c" * 40, branch="main", dirty_files=2).to_json()
    assert list(source) == list(context["source"]["properties"])
    motion = MotionRef(id="motions/g1/x.npz", file_sha256=SHA, source="cache").to_json()
    assert motion == {
        "id": "motions/g1/x.npz",
        "file_sha256": SHA,
        "sha256": SHA,
        "source": "cache",
    }
    assert set(motion) == set(context["motion"]["properties"])


def test_describe_names_commit_branch_and_dirty_state() -> None:
    tree = SourceTree(path="/src", commit="abc", branch="main", dirty_files=0)
    assert tree.describe() == "abc (main, clean)"
    assert SourceTree(path="/", commit="abc", branch="b", dirty_files=3).describe() == (
        "abc (b, 3 uncommitted files)"
    )
    assert SourceTree(path="/", commit=None, branch=None, dirty_files=0).describe() is None


def test_from_artifact_prefers_the_summary_and_falls_back_to_run_config() -> None:
    artifact = {
        "run_summary": {
            "algo": "flashsac",
            "task": "t",
            "sim_backend": "mujoco",
            "effective_seed": 7,
        },
        "context": {
            "source": {"path": "/src", "commit": "abc", "branch": "main", "dirty_files": 0},
            "motion": {"id": "m.npz", "sha256": SHA, "source": "path"},  # older artifact
        },
    }
    identity = RunIdentity.from_artifact(artifact, {"run": {"log_dir": "/runs/a", "algo": "x"}})
    assert identity.owner == "flashsac/t/mujoco" and identity.run_dir == "/runs/a"
    assert identity.seed == 7 and identity.commit == "abc"
    assert identity.motion == MotionRef(id="m.npz", file_sha256=SHA, source="path")
    died = RunIdentity.from_artifact({"run_summary": None, "context": {}}, {"run": {"algo": "a"}})
    assert (died.algo, died.owner, died.seed, died.source, died.motion) == (
        "a",
        None,
        None,
        None,
        None,
    )
