"""Motion NPZ contract (docs/contracts.md §assets-and-motion): validation, layouts, the synthetic clip, resolution."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import mujoco
import numpy as np
import pytest

from trainer import hub
from trainer.config.defaults import default_scene_cfg
from trainer.sim.scene import DEFAULT_JOINT_POS, FOOT_BODY_NAMES, body_ids, build_g1_model
from trainer.task import motion
from trainer.task.motion import (
    DANCE_MOTION_ID,
    SYNTHETIC_MARCH_ID,
    SYNTHETIC_MOTION_ID,
    MotionError,
    arrays_sha256,
    ensure_synthetic_clip,
    generate_synthetic_clip,
    generate_synthetic_dance,
    load_motion,
    load_motions,
    load_resolved_motion,
    register_importer,
    resolve_motion,
)

# Recorded in docs/assets.md; a change here means the generator changed its output: bump
# SYNTHETIC_GENERATOR_VERSION and update the docs together with this constant.
SYNTHETIC_SHA256 = "ed28ebd74f38407321c6206e78181b39c7d202f79d2b40c78985f5035316769e"
MARCH_SHA256 = "16735c3272b2c7c4d46c0907e920c66baef51885780f15e39cb73ebe166d4e2e"


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return build_g1_model(default_scene_cfg(), asset_roots=())


@pytest.fixture(scope="module")
def synthetic(model: mujoco.MjModel) -> dict[str, np.ndarray]:
    return generate_synthetic_dance(model)


@pytest.fixture
def write_npz(tmp_path: Path) -> Callable[..., Path]:
    def _write(arrays: dict[str, np.ndarray], name: str = "clip.npz") -> Path:
        path = tmp_path / name
        np.savez(path, **arrays)
        return path

    return _write


def _short(arrays: dict[str, np.ndarray], frames: int = 8) -> dict[str, np.ndarray]:
    """A copy cut to a few frames (names kept), for fast malformed variants."""
    out = {}
    for key, value in arrays.items():
        out[key] = value[:frames].copy() if value.ndim >= 2 else value.copy()
    return out


# ---------------------------------------------------------------------------------------------
# Synthetic clip
# ---------------------------------------------------------------------------------------------


def test_synthetic_clip_is_deterministic_with_recorded_sha(
    model: mujoco.MjModel, synthetic: dict[str, np.ndarray]
) -> None:
    again = generate_synthetic_dance(model)
    assert list(again) == list(synthetic)
    for key, value in synthetic.items():
        np.testing.assert_array_equal(again[key], value)
    assert arrays_sha256(synthetic) == SYNTHETIC_SHA256


def test_march_clip_is_a_different_deterministic_motion_within_the_joint_ranges(
    model: mujoco.MjModel, synthetic: dict[str, np.ndarray], tmp_path: Path
) -> None:
    march = generate_synthetic_clip(model, SYNTHETIC_MARCH_ID)
    assert arrays_sha256(march) == MARCH_SHA256
    assert march["joint_pos"].shape == synthetic["joint_pos"].shape
    np.testing.assert_array_equal(
        march["joint_pos"][0], synthetic["joint_pos"][0]
    )  # both start standing
    assert np.abs(march["joint_pos"] - synthetic["joint_pos"]).max() > 0.5
    feet = [
        list(march["body_names"]).index(f"{side}_ankle_roll_link") for side in ("left", "right")
    ]
    lift = march["body_pos_w"][:, feet, 2] - march["body_pos_w"][0, feet, 2]
    assert lift.max() > 0.1 and lift.min() > -1e-4  # each foot rises, neither sinks
    path, status, sha = ensure_synthetic_clip(tmp_path, model, motion_id=SYNTHETIC_MARCH_ID)
    assert (path, status, sha) == (tmp_path / SYNTHETIC_MARCH_ID, "generated", MARCH_SHA256)
    assert resolve_motion(SYNTHETIC_MARCH_ID, asset_roots=(tmp_path,), hub="skip").path == path


def test_synthetic_clip_shape_rate_and_layout(synthetic: dict[str, np.ndarray]) -> None:
    assert int(synthetic["fps"]) == 50
    assert synthetic["joint_pos"].shape == (500, 29)
    assert synthetic["body_pos_w"].shape == (500, 31, 3)  # world-inclusive
    assert synthetic["body_quat_w"].shape == (500, 31, 4)
    assert synthetic["body_names"][0] == "world"
    assert int(synthetic["generator_version"]) == motion.SYNTHETIC_GENERATOR_VERSION


def test_synthetic_clip_stays_within_joint_limits(
    model: mujoco.MjModel, synthetic: dict[str, np.ndarray]
) -> None:
    q = synthetic["joint_pos"]
    assert (q >= model.jnt_range[1:, 0]).all() and (q <= model.jnt_range[1:, 1]).all()


def test_synthetic_clip_lowest_foot_point_is_on_the_floor(
    model: mujoco.MjModel, synthetic: dict[str, np.ndarray]
) -> None:
    data = mujoco.MjData(model)
    foot_bodies = set(body_ids(model, FOOT_BODY_NAMES).tolist())
    foot_geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] in foot_bodies]
    pelvis = model.body("pelvis").id
    for k in range(0, 500, 7):
        data.qpos[:3] = synthetic["body_pos_w"][k, pelvis]
        data.qpos[3:7] = synthetic["body_quat_w"][k, pelvis]
        data.qpos[7:] = synthetic["joint_pos"][k]
        mujoco.mj_kinematics(model, data)
        lowest = np.inf
        for g in foot_geoms:
            # capsule: endpoints along the geom z axis; sphere: half-length 0
            half = (
                model.geom_size[g, 1] if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE else 0
            )
            axis_z = data.geom_xmat[g].reshape(3, 3)[2, 2]
            bottom = data.geom_xpos[g, 2] - abs(axis_z) * half - model.geom_size[g, 0]
            lowest = min(lowest, bottom)
        assert abs(lowest) < 1e-4, k


def test_synthetic_clip_is_smooth_and_velocities_match_positions(
    synthetic: dict[str, np.ndarray],
) -> None:
    dt = 1.0 / 50.0
    q, qd = synthetic["joint_pos"].astype(np.float64), synthetic["joint_vel"].astype(np.float64)
    central = (q[2:] - q[:-2]) / (2 * dt)
    np.testing.assert_allclose(qd[1:-1], central, atol=1e-4)
    assert np.abs(np.diff(q, axis=0)).max() < 0.05  # no jumps between frames (rad)
    assert np.abs(np.diff(qd, axis=0) / dt).max() < 20.0  # bounded joint acceleration
    pos = synthetic["body_pos_w"].astype(np.float64)
    lin = synthetic["body_lin_vel_w"].astype(np.float64)
    np.testing.assert_allclose(lin[1:-1], (pos[2:] - pos[:-2]) / (2 * dt), atol=5e-3)
    np.testing.assert_allclose(synthetic["joint_pos"][0], DEFAULT_JOINT_POS, atol=1e-6)


def test_ensure_synthetic_clip_generates_then_reports_present(
    tmp_path: Path, model: mujoco.MjModel
) -> None:
    path, status, sha = ensure_synthetic_clip(tmp_path, model)
    assert (path, status, sha) == (tmp_path / SYNTHETIC_MOTION_ID, "generated", SYNTHETIC_SHA256)
    assert ensure_synthetic_clip(tmp_path, model)[1] == "present"
    np.savez(path, fps=np.asarray(50))  # a stale or foreign file is replaced
    assert ensure_synthetic_clip(tmp_path, model)[1:] == ("generated", SYNTHETIC_SHA256)


# ---------------------------------------------------------------------------------------------
# Loader
# ---------------------------------------------------------------------------------------------


def test_load_keeps_the_14_tracked_bodies_as_float32(
    model: mujoco.MjModel, synthetic: dict[str, np.ndarray], write_npz: Callable[..., Path]
) -> None:
    clip = load_motion(write_npz(synthetic), model)
    assert clip.fps == 50 and clip.num_frames == 500 and clip.clip_ends.tolist() == [500]
    assert clip.body_pos_w.shape == (500, 14, 3) and clip.body_quat_w.shape == (500, 14, 4)
    assert clip.joint_pos.dtype == np.float32 and clip.body_ang_vel_w.dtype == np.float32
    np.testing.assert_array_equal(clip.body_pos_w[:, 7], synthetic["body_pos_w"][:, 16])
    assert clip.sha256 == SYNTHETIC_SHA256


def test_world_inclusive_and_exclusive_layouts_load_identically(
    model: mujoco.MjModel, synthetic: dict[str, np.ndarray], write_npz: Callable[..., Path]
) -> None:
    base = {k: v for k, v in synthetic.items() if k not in ("body_names", "joint_names")}
    excl = dict(base)
    for key in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        excl[key] = base[key][:, 1:]  # drop the world column (mjlab layout)
    named = dict(excl, body_names=synthetic["body_names"][1:])
    a = load_motion(write_npz(base, "b31.npz"), model)
    b = load_motion(write_npz(excl, "b30.npz"), model)
    c = load_motion(write_npz(named, "named.npz"), model)
    for key in ("joint_pos", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
        np.testing.assert_array_equal(getattr(a, key), getattr(c, key))


def _drop(key: str) -> Callable[[dict], None]:
    return lambda arrays: arrays.pop(key)


def _set(key: str, value: Callable[[dict], np.ndarray]) -> Callable[[dict], None]:
    def apply(arrays: dict) -> None:
        arrays[key] = value(arrays)

    return apply


def _nan_at(key: str) -> Callable[[dict], None]:
    def apply(arrays: dict) -> None:
        arrays[key] = arrays[key].copy()
        arrays[key].reshape(-1)[5] = np.nan

    return apply


def _bodies(count: int) -> Callable[[dict], None]:
    def apply(arrays: dict) -> None:
        arrays.pop("body_names")
        for key in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
            arrays[key] = arrays[key][:, :count]

    return apply


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        pytest.param(_drop("body_quat_w"), "missing key 'body_quat_w'", id="missing-key"),
        pytest.param(_drop("fps"), "missing key 'fps'", id="missing-fps"),
        pytest.param(
            _set("joint_vel", lambda a: a["joint_vel"][:, :, None]),
            "'joint_vel'",
            id="joint-vel-3d",
        ),
        pytest.param(
            _set("body_lin_vel_w", lambda a: a["body_lin_vel_w"][:-1]),
            "'body_lin_vel_w'",
            id="frames-differ",
        ),
        pytest.param(
            _set("body_pos_w", lambda a: a["body_pos_w"][..., :2]), "'body_pos_w'", id="pos-width"
        ),
        pytest.param(_nan_at("body_ang_vel_w"), "'body_ang_vel_w'.*non-finite", id="nan"),
        pytest.param(
            _set("joint_pos", lambda a: np.where(np.ones_like(a["joint_pos"], bool), np.inf, 0)),
            "'joint_pos'.*non-finite",
            id="inf",
        ),
        pytest.param(
            _set("fps", lambda a: np.asarray(30)), "'fps'=30 must equal 1/ctrl_dt=50", id="fps-30"
        ),
        pytest.param(_set("fps", lambda a: np.asarray([50, 50])), "'fps'", id="fps-shape"),
        pytest.param(_set("fps", lambda a: np.asarray(49.5)), "'fps'", id="fps-fraction"),
        pytest.param(
            lambda a: (
                a.pop("joint_names"),
                a.update(joint_pos=a["joint_pos"][:, :28], joint_vel=a["joint_vel"][:, :28]),
            ),
            "'joint_pos' has 28 joint columns",
            id="joint-count",
        ),
        pytest.param(
            _set("body_quat_w", lambda a: a["body_quat_w"] * 1.01),
            "'body_quat_w' has norm",
            id="quat-norm",
        ),
        pytest.param(_bodies(29), "B=29 bodies; accepted counts are 31", id="body-count"),
        pytest.param(
            _set("joint_pos", lambda a: a["joint_pos"][:1]), "T >= 2|'joint_pos'", id="one-frame"
        ),
        pytest.param(
            _set("joint_names", lambda a: a["joint_names"][::-1]),
            "'joint_names' does not match",
            id="joint-names",
        ),
        pytest.param(
            _set("body_names", lambda a: np.asarray(["nope"] * 31)), "'body_names'", id="body-names"
        ),
    ],
)
def test_malformed_npz_is_rejected_naming_the_key(
    model: mujoco.MjModel,
    synthetic: dict[str, np.ndarray],
    write_npz: Callable[..., Path],
    mutate: Callable[[dict], None],
    match: str,
) -> None:
    arrays = _short(synthetic)
    mutate(arrays)
    with pytest.raises(MotionError, match=match):
        load_motion(write_npz(arrays), model)


def test_non_npz_file_is_rejected(model: mujoco.MjModel, tmp_path: Path) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    with pytest.raises(MotionError, match="is not an .npz archive; re-export it with numpy.savez"):
        load_motion(bad, model)


def test_resolved_clip_loads_from_its_path_and_a_swapped_file_is_rejected(
    model: mujoco.MjModel, synthetic: dict[str, np.ndarray], write_npz: Callable[..., Path]
) -> None:
    path = write_npz(_short(synthetic, 10))
    resolved = resolve_motion(str(path), hub="skip")
    clip = load_resolved_motion(resolved, model)
    assert (clip.source, clip.sha256) == (str(path), resolved.sha256)
    swapped = _short(synthetic, 10)
    swapped["joint_pos"] = swapped["joint_pos"] + np.float32(1e-3)  # a valid, different clip
    write_npz(swapped)  # same path, after "preflight"
    now = arrays_sha256(swapped)
    with pytest.raises(MotionError) as info:
        load_resolved_motion(resolved, model)
    message = str(info.value)
    assert f"'{path}' changed after preflight" in message
    assert f"sha256 {now}" in message and f"preflight resolved sha256 {resolved.sha256}" in message
    # The digest is checked first: even a file that breaks the contract reports the swap.
    write_npz({"fps": np.asarray(50)})
    with pytest.raises(MotionError, match="changed after preflight"):
        load_resolved_motion(resolved, model)


def test_concatenated_clips_record_clip_ends_and_reject_mixed_layouts(
    model: mujoco.MjModel, synthetic: dict[str, np.ndarray], write_npz: Callable[..., Path]
) -> None:
    first = write_npz(_short(synthetic, 10), "a.npz")
    second = write_npz(_short(synthetic, 6), "b.npz")
    clip = load_motions([first, second], model)
    assert clip.num_frames == 16 and clip.clip_ends.tolist() == [10, 16]
    assert clip.num_clips == 2 and clip.source == f"{first},{second}"
    excl = _short(synthetic, 6)
    excl.pop("body_names")
    for key in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        excl[key] = excl[key][:, 1:]
    with pytest.raises(MotionError, match="share fps, joint width and body layout"):
        load_motions([first, write_npz(excl, "c.npz")], model)


# ---------------------------------------------------------------------------------------------
# Resolution
# ---------------------------------------------------------------------------------------------


def test_resolve_prefers_existing_path_then_package_then_cache(
    tmp_path: Path, synthetic: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    package, cache = tmp_path / "pkg", tmp_path / "cache"
    rel = "motions/g1/mine.npz"
    for root in (package, cache):
        (root / rel).parent.mkdir(parents=True)
        np.savez(root / rel, **_short(synthetic))
    monkeypatch.chdir(tmp_path)
    direct = tmp_path / "direct.npz"
    np.savez(direct, **_short(synthetic))
    assert resolve_motion(str(direct), asset_roots=(package, cache), hub="skip").source == "path"
    assert resolve_motion("direct.npz", asset_roots=(package, cache), hub="skip").source == "path"
    got = resolve_motion(rel, asset_roots=(package, cache), hub="skip")
    assert (got.path, got.source) == (package / rel, "package")
    (package / rel).unlink()
    got = resolve_motion(rel, asset_roots=(package, cache), hub="skip")
    assert (got.path, got.source, got.sha256) == (
        cache / rel,
        "cache",
        arrays_sha256(_short(synthetic)),
    )


def test_resolution_hands_every_id_to_the_registered_importer_and_none_takes_one_file(
    tmp_path: Path, synthetic: dict[str, np.ndarray]
) -> None:
    roots = (tmp_path / "pkg", tmp_path / "cache")
    direct = tmp_path / "direct.npz"
    np.savez(direct, **_short(synthetic))
    seen = []

    def importer(motion_id, find, *, roots, cache):
        seen.append((motion_id, tuple(roots), cache))
        return find(motion_id)

    before = register_importer(importer)
    try:
        got = resolve_motion(str(direct), asset_roots=roots, hub="skip")
        assert seen == [(str(direct), roots, roots[1])] and got.source == "path"
        assert register_importer(None) is importer
        assert resolve_motion(str(direct), asset_roots=roots, hub="skip") == got
        assert len(seen) == 1
    finally:
        register_importer(before)


def test_missing_absolute_path_fails_at_once(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.npz"
    with pytest.raises(MotionError, match=f"motion file '{missing}' not found") as info:
        resolve_motion(str(missing), asset_roots=(tmp_path,), hub="auto")
    assert "hub download" not in str(info.value)
    assert (
        "offline alternative: env.commands.motion.motion_file=motions/g1/synthetic_dance.npz"
        in str(info.value)
    )


def test_synthetic_id_is_generated_into_the_cache_root(tmp_path: Path) -> None:
    got = resolve_motion(
        SYNTHETIC_MOTION_ID, asset_roots=(tmp_path / "pkg", tmp_path / "cache"), hub="skip"
    )
    assert (got.path, got.source, got.sha256) == (
        tmp_path / "cache" / SYNTHETIC_MOTION_ID,
        "generated",
        SYNTHETIC_SHA256,
    )


def test_offline_gives_the_contract_error_and_never_substitutes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    roots = (tmp_path / "pkg", tmp_path / "cache")
    ensure_synthetic_clip(roots[1])  # a synthetic clip in the cache must not be used instead
    with pytest.raises(MotionError) as info:
        resolve_motion(DANCE_MOTION_ID, asset_roots=roots, hub="auto")
    expected = (
        f"motion file '{DANCE_MOTION_ID}' not found (searched: {DANCE_MOTION_ID}, "
        f"{roots[0] / DANCE_MOTION_ID}, {roots[1] / DANCE_MOTION_ID}); "
        "hub download disabled by HF_HUB_OFFLINE; offline alternative: "
        "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz "
        "(generate with: g1-pull-assets --robot g1)"
    )
    assert str(info.value) == expected


class _HubHandler(http.server.BaseHTTPRequestHandler):
    """The slice of the hub's resolve endpoint that hf_hub_download uses."""

    files: ClassVar[dict[str, bytes]] = {}
    requests: ClassVar[list[str]] = []

    def _serve(self, with_body: bool) -> None:
        self.requests.append(f"{self.command} {self.path}")
        body = self.files.get(self.path.split("?")[0])
        if body is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("ETag", f'"{hashlib.sha256(body).hexdigest()}"')
        self.send_header("X-Repo-Commit", "0" * 40)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self._serve(with_body=False)

    def do_GET(self) -> None:
        self._serve(with_body=True)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def local_hub(tmp_path: Path, synthetic: dict[str, np.ndarray]) -> Iterator[tuple[str, bytes]]:
    clip_path = tmp_path / "served.npz"
    np.savez(clip_path, **_short(synthetic, 12))
    body = clip_path.read_bytes()
    handler = type("Handler", (_HubHandler,), {"files": {}, "requests": []})
    handler.files[f"/datasets/unilabsim/unilab-motions/resolve/main/{DANCE_MOTION_ID}"] = body
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", body
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_hub_download_through_a_local_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_hub: tuple[str, bytes]
) -> None:
    endpoint, body = local_hub
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    roots = (tmp_path / "pkg", tmp_path / "cache")
    got = resolve_motion(DANCE_MOTION_ID, asset_roots=roots, hub="auto")
    assert got.source == "downloaded"
    assert got.path == roots[1] / DANCE_MOTION_ID
    assert got.path.read_bytes() == body
    again = resolve_motion(DANCE_MOTION_ID, asset_roots=roots, hub="auto")
    assert (again.source, again.sha256) == ("cache", got.sha256)


def test_hub_failure_names_the_cause_and_retries_the_public_hub_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_hub: tuple[str, bytes]
) -> None:
    endpoint, _ = local_hub
    public = endpoint.replace("127.0.0.1", "localhost")  # the same local hub, another name
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setattr(hub, "PUBLIC_HF_ENDPOINT", public)
    seen: list[str | None] = []

    def fake_download(**kwargs: object) -> str:
        seen.append(kwargs["endpoint"])  # type: ignore[arg-type]
        raise ConnectionError("no route to host")

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    with pytest.raises(
        MotionError,
        match="; hub download failed: ConnectionError: no route to host; offline alternative",
    ):
        resolve_motion(DANCE_MOTION_ID, asset_roots=(tmp_path / "p", tmp_path / "c"), hub="auto")
    assert seen == [endpoint, public]
