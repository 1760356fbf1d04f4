"""Motion resolution with the importer: our files pass unchanged, foreign ones are converted
into the cache once (keyed by digest), comma lists and directories become one clip set."""

from __future__ import annotations

from pathlib import Path

import g1soak_motion_writers as writers
import numpy as np
import pytest

from trainer.motion_import import resolve as resolve_mod
from trainer.motion_import.model import g1_model
from trainer.task.motion import MotionError, arrays_sha256, load_motion, resolve_motion


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    package, cache = tmp_path / "pkg", tmp_path / "cache"
    package.mkdir()
    cache.mkdir()
    return package, cache


def _resolve(motion_id: str, roots: tuple[Path, Path]):
    return resolve_motion(motion_id, asset_roots=roots, hub="skip")


def test_a_clip_in_our_contract_is_returned_unchanged(
    synthetic: dict[str, np.ndarray], roots: tuple[Path, Path], tmp_path: Path
) -> None:
    path = tmp_path / "ours.npz"
    np.savez(path, **synthetic)
    got = _resolve(str(path), roots)
    assert (got.path, got.source, got.sha256) == (path, "path", arrays_sha256(synthetic))
    assert not (roots[1] / resolve_mod.IMPORT_DIR).exists()


def test_a_foreign_clip_is_converted_into_the_cache_once(
    synthetic30: dict[str, np.ndarray],
    roots: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = writers.write_csv(synthetic30, tmp_path / "walk.csv")
    got = _resolve(str(src), roots)
    assert got.source == "converted"
    assert got.path.parent == roots[1] / resolve_mod.IMPORT_DIR
    assert got.path.name.startswith("walk.") and got.path.suffix == ".npz"
    clip = load_motion(got.path, g1_model())
    assert clip.num_frames == 501 and clip.sha256 == got.sha256

    def no_conversion(*args: object, **kwargs: object) -> None:
        raise AssertionError("an unchanged source must reuse its cached conversion")

    monkeypatch.setattr(resolve_mod, "convert", no_conversion)
    again = _resolve(str(src), roots)
    assert (again.path, again.sha256) == (got.path, got.sha256)
    monkeypatch.undo()

    changed = synthetic30 | {"joint_pos": synthetic30["joint_pos"] + np.float32(0.01)}
    writers.write_csv(changed, src)
    other = _resolve(str(src), roots)
    assert other.path != got.path and other.sha256 != got.sha256


def test_a_cached_conversion_of_another_source_is_redone(
    synthetic30: dict[str, np.ndarray], roots: tuple[Path, Path], tmp_path: Path
) -> None:
    src = writers.write_mjlab(synthetic30, tmp_path / "m.npz")
    first = _resolve(str(src), roots)
    with np.load(first.path) as npz:
        stale = {k: npz[k] for k in npz.files}
    stale["import_source_sha256"] = np.asarray("0" * 64)
    stale["joint_pos"] = stale["joint_pos"] + np.float32(1.0)
    np.savez(first.path, **stale)
    again = _resolve(str(src), roots)
    assert again.sha256 == first.sha256


def test_an_asset_id_in_the_cache_root_is_converted_too(
    synthetic30: dict[str, np.ndarray], roots: tuple[Path, Path]
) -> None:
    rel = "motions/g1/walk.csv"
    (roots[1] / rel).parent.mkdir(parents=True)
    writers.write_csv(synthetic30, roots[1] / rel)
    got = _resolve(rel, roots)
    assert got.source == "converted" and got.path.is_file()


def test_a_comma_list_and_a_directory_become_one_clip_set(
    synthetic: dict[str, np.ndarray],
    synthetic30: dict[str, np.ndarray],
    roots: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    folder = tmp_path / "clips"
    folder.mkdir()
    a = folder / "a_ours.npz"
    np.savez(a, **synthetic)
    b = writers.write_csv(synthetic30, folder / "b_walk.csv")
    listed = _resolve(f"{a}, {b}", roots)
    assert listed.source == "clip-set"
    clip = load_motion(listed.path, g1_model())
    assert clip.clip_ends.tolist() == [500, 1001] and clip.num_clips == 2
    np.testing.assert_array_equal(clip.joint_pos[:500], synthetic["joint_pos"])
    with np.load(listed.path) as npz:
        assert [str(n) for n in npz["clip_names"]] == [str(a), str(b)]
    from_dir = _resolve(str(folder), roots)
    assert (from_dir.path, from_dir.sha256) == (listed.path, listed.sha256)


def test_bad_clip_sets_are_named(roots: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(MotionError, match="has an empty item; separate clips with single commas"):
        _resolve("a.npz,,b.npz", roots)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(MotionError, match="holds no .npz or .csv clip"):
        _resolve(str(empty), roots)
    with pytest.raises(MotionError, match="motion file 'nothere.npz' not found"):
        _resolve("nothere.npz,other.npz", roots)


def test_a_nameless_clip_in_physx_order_is_converted_not_taken_by_position(
    synthetic: dict[str, np.ndarray], roots: tuple[Path, Path], tmp_path: Path
) -> None:
    mujoco_order = _resolve(str(writers.write_mjlab(synthetic, tmp_path / "m.npz")), roots)
    assert mujoco_order.source == "path"  # our world-exclusive layout: used as it is
    physx = _resolve(str(writers.write_physx_order(synthetic, tmp_path / "p.npz")), roots)
    assert physx.source == "converted"
    model = g1_model()
    ours, theirs = load_motion(mujoco_order.path, model), load_motion(physx.path, model)
    np.testing.assert_array_equal(theirs.joint_pos, ours.joint_pos)
    np.testing.assert_allclose(theirs.body_pos_w, ours.body_pos_w, atol=1e-6)
