"""What part of a policy's joint error on the g1-moves library could the references cause?

CPU only, about 4 minutes on 2 cores. Run from the repository root on a clip set written by
``g1-motion import`` (docs/evaluation.md, "What the joint error measures"):

    uv run g1-motion import ../shared/motions/g1-moves --repair despike,blend-steps \
        --out /tmp/g1moves.npz
    uv run python docs/journal/data/joint-error-2026-12-07/joint_error_check.py \
        ../shared/motions/g1-moves /tmp/g1moves.npz /tmp/joint_error_check.json

1. mapping: the clip set's joints and root pose against the CSV columns they came from (the
   50 fps frame 5k is the 60 fps frame 6k, no interpolation), root quaternion read as xyzw;
2. limits: CSV frames beyond the G1 XML joint ranges, and frames sitting exactly on a limit
   (the retargeter's clamps: they name the joint each column was retargeted to);
3. action bound: reference joints beyond the reachable targets q_default +- action_scale;
4. self-penetration of the reference poses (robot geom pairs deeper than 1 cm);
5. a root-pinned PD replay: the pelvis welded to a mocap body that follows the reference, the
   29 joints driven by the trainer's actuators (kp, kv, effort) at 50 Hz, 3 substeps, under
   three controllers: ``naive`` ctrl = q*; ``bias`` adds the Coriolis and gravity torque and
   the damping lead; ``ff`` adds the full inverse dynamics of the reference (an ideal
   anticipating controller); ``ff_bound`` clips ff to the action bound; ``ff_bound_noself``
   also turns robot-robot collisions off. Joint error after each step against q*(k+1);
6. sensitivity: one joint moved by 0.3 rad (pelvis held) at 2,000 reference frames, and what
   R-MPKPE, the body orientation error and the two relative body reward terms see of it.

Derived from G1 Moves, Mitch Chaiet, CC-BY-4.0, experientialtech/g1-moves.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import mujoco
import numpy as np

from trainer.config.defaults import default_scene_cfg, default_task_cfg
from trainer.sim.scene import (
    DEFAULT_JOINT_POS,
    EE_BODY_NAMES,
    JOINT_EFFORT,
    JOINT_KP,
    JOINT_KV,
    JOINT_NAMES,
    TRACKED_BODY_NAMES,
    body_ids,
    build_g1_model,
    build_g1_spec,
)

DT = 0.02
SUBSTEPS = 3
PENETRATION_M = 0.01
SENSITIVITY_RAD = 0.3
SENSITIVITY_FRAMES = 2000
VARIANTS = ("naive", "bias", "ff", "ff_bound", "ff_bound_noself")


def pinned_model(self_collision: bool = True) -> mujoco.MjModel:
    """The trainer's scene with the pelvis welded to a mocap body (set to the reference)."""
    spec = build_g1_spec(default_scene_cfg())
    spec.worldbody.add_body(name="pin", mocap=True, pos=[0.0, 0.0, 0.793])
    weld = spec.add_equality(
        name="pin_weld",
        type=mujoco.mjtEq.mjEQ_WELD,
        objtype=mujoco.mjtObj.mjOBJ_BODY,
        name1="pin",
        name2="pelvis",
    )
    weld.solref = [0.0134, 1.0]
    weld.solimp = [0.99, 0.999, 0.001, 0.5, 2.0]
    weld.data = np.array([0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0], dtype=np.float64)
    model = spec.compile()
    if not self_collision:  # robot geoms keep colliding with the floor only
        robot = model.geom_bodyid != 0
        model.geom_contype[:] = np.where(robot, 2, 0)
        model.geom_conaffinity[:] = np.where(robot, 0, 2)
    return model


class Reference:
    """The clip set's root and joint states as MuJoCo qpos/qvel/qacc."""

    def __init__(self, npz: Path) -> None:
        z = np.load(npz)
        self.names = [str(n) for n in z["clip_names"]]
        self.ends = z["clip_ends"].astype(int)
        self.starts = np.concatenate([[0], self.ends[:-1]])
        self.q = z["joint_pos"].astype(np.float64)
        self.v = z["joint_vel"].astype(np.float64)
        self.body_pos = z["body_pos_w"].astype(np.float64)
        self.body_quat = z["body_quat_w"].astype(np.float64)
        lin = z["body_lin_vel_w"][:, 0].astype(np.float64)
        ang = z["body_ang_vel_w"][:, 0].astype(np.float64)
        rot = np.zeros((len(self.q), 9))
        for f in range(len(self.q)):
            mujoco.mju_quat2Mat(rot[f], self.body_quat[f, 0])
        ang_b = np.einsum("fji,fj->fi", rot.reshape(-1, 3, 3), ang)  # R^T w: the body frame
        self.qpos = np.concatenate([self.body_pos[:, 0], self.body_quat[:, 0], self.q], axis=1)
        self.qvel = np.concatenate([lin, ang_b, self.v], axis=1)
        self.qacc = np.zeros_like(self.qvel)
        for s, e in zip(self.starts, self.ends, strict=True):
            self.qacc[s:e] = np.gradient(self.qvel[s:e], DT, axis=0)


def joint_ranges(model: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray]:
    ids = [model.joint(n).id for n in JOINT_NAMES]
    return model.jnt_range[ids, 0].copy(), model.jnt_range[ids, 1].copy()


def check_mapping(library: Path, ref: Reference) -> dict:
    """Clip-set joints/root against the CSV columns at the frames both rates share."""
    manifest = json.loads((library / "manifest.json").read_text(encoding="utf-8"))
    paths = {c["clip"]: c["path"] for c in manifest["clips"]}
    worst_exact, compared, changed, root_pos, root_quat = 0.0, 0, 0, 0.0, 0.0
    unrepaired = 0
    for name, s, e in zip(ref.names, ref.starts, ref.ends, strict=True):
        csv = np.loadtxt(library / paths[name], delimiter=",")
        k = np.arange(0, e - s, 5)
        k = k[6 * (k // 5) < len(csv)]
        src = csv[6 * (k // 5)]
        diff = np.abs(ref.q[s + k] - src[:, 7:])
        moved = diff.max(1) > 1e-4  # frames a --repair changed
        compared += len(k)
        changed += int(moved.sum())
        if not moved.any():
            unrepaired += 1
            worst_exact = max(worst_exact, float(diff.max()))
        root_pos = max(root_pos, float(np.abs(ref.body_pos[s + k, 0] - src[:, :3]).max()))
        wxyz = np.concatenate([src[:, 6:7], src[:, 3:6]], axis=1)  # columns 3-6 read as xyzw
        q = ref.body_quat[s + k, 0]
        root_quat = max(
            root_quat, float(np.minimum(np.abs(q - wxyz).max(1), np.abs(q + wxyz).max(1)).max())
        )
    return {
        "clips_without_repairs": unrepaired,
        "joint_max_abs_diff_unrepaired_clips_rad": worst_exact,
        "frames_compared": compared,
        "frames_changed_by_repairs": changed,
        "root_pos_max_abs_diff_m": root_pos,
        "root_quat_xyzw_max_abs_diff": root_quat,
    }


def check_limits(library: Path, lo: np.ndarray, hi: np.ndarray) -> dict:
    """CSV joints against the XML ranges: excess, and frames exactly on a limit (clamps)."""
    manifest = json.loads((library / "manifest.json").read_text(encoding="utf-8"))
    q = np.concatenate(
        [np.loadtxt(library / c["path"], delimiter=",")[:, 7:] for c in manifest["clips"]]
    )
    excess = np.maximum(lo - q, 0.0) + np.maximum(q - hi, 0.0)
    at_lo, at_hi = np.abs(q - lo) < 1e-4, np.abs(q - hi) < 1e-4
    clamps = {
        n: {"lower": int(at_lo[:, j].sum()), "upper": int(at_hi[:, j].sum())}
        for j, n in enumerate(JOINT_NAMES)
        if at_lo[:, j].any() or at_hi[:, j].any()
    }
    return {
        "csv_frames": len(q),
        "frames_beyond_range": int((excess > 0).any(1).sum()),
        "max_excess_rad": float(excess.max()),
        "frames_on_a_limit_by_joint": clamps,
    }


def check_action_bound(ref: Reference) -> dict:
    scale = default_task_cfg().action_scale
    over = np.maximum(np.abs(ref.q - np.asarray(DEFAULT_JOINT_POS)) - scale, 0.0)
    return {
        "action_scale": scale,
        "frames_beyond": int((over > 0).any(1).sum()),
        "frames_beyond_by_joint": {
            n: int((over[:, j] > 0).sum()) for j, n in enumerate(JOINT_NAMES) if over[:, j].any()
        },
        "max_beyond_rad": float(over.max()),
        "mean_29_joint_rad": float(over.mean()),
    }


def check_self_penetration(ref: Reference) -> dict:
    model = build_g1_model(default_scene_cfg())
    data = mujoco.MjData(model)
    frames, depths, pairs = 0, [], {}
    for f in range(len(ref.q)):
        data.qpos[:] = ref.qpos[f]
        mujoco.mj_kinematics(model, data)
        mujoco.mj_collision(model, data)
        deepest = 0.0
        for i in range(data.ncon):
            con = data.contact[i]
            b1, b2 = model.geom_bodyid[con.geom1], model.geom_bodyid[con.geom2]
            if b1 == 0 or b2 == 0 or con.dist > -PENETRATION_M:
                continue
            key = " / ".join(sorted((model.body(b1).name, model.body(b2).name)))
            pairs[key] = pairs.get(key, 0) + 1
            deepest = min(deepest, con.dist)
        if deepest < 0:
            frames += 1
            depths.append(-deepest)
    return {
        "frames": len(ref.q),
        "frames_deeper_than_1cm": frames,
        "depth_median_p90_max_m": [float(np.percentile(depths, p)) for p in (50, 90, 100)],
        "top_pairs": dict(sorted(pairs.items(), key=lambda kv: -kv[1])[:6]),
    }


def replay(ref: Reference, variant: str) -> dict:
    """Root-pinned PD replay of every clip; joint error after each step against q*(k+1)."""
    model = pinned_model(self_collision=not variant.endswith("noself"))
    data, inv = mujoco.MjData(model), mujoco.MjData(model)
    kp, kv = np.asarray(JOINT_KP), np.asarray(JOINT_KV)
    default, scale = np.asarray(DEFAULT_JOINT_POS), default_task_cfg().action_scale
    armature = 0.01
    err_sum, steps, per_clip, clipped = np.zeros(29), 0, {}, 0
    tau = np.zeros(model.nv)
    for name, s, e in zip(ref.names, ref.starts, ref.ends, strict=True):
        mujoco.mj_resetData(model, data)
        data.qpos[:], data.qvel[:] = ref.qpos[s], ref.qvel[s]
        data.mocap_pos[0], data.mocap_quat[0] = ref.qpos[s, :3], ref.qpos[s, 3:7]
        mujoco.mj_forward(model, data)
        clip_err = np.zeros(29)
        for f in range(s, e - 1):
            g = f + 1
            ctrl = ref.q[g].copy()
            if variant != "naive":
                inv.qpos[:], inv.qvel[:] = ref.qpos[g], ref.qvel[g]
                mujoco.mj_forward(model, inv)
                if variant == "bias":
                    torque = inv.qfrc_bias[6:]
                else:
                    inv.qacc[:] = ref.qacc[g]
                    mujoco.mj_rne(model, inv, 1, tau)
                    torque = tau[6:] + armature * ref.qacc[g, 6:]
                ctrl += (torque + kv * ref.v[g]) / kp
            if "bound" in variant:
                clipped += int((np.abs(ctrl - default) > scale).any())
                ctrl = np.clip(ctrl, default - scale, default + scale)
            data.ctrl[:] = ctrl
            qa, qb = ref.qpos[f, 3:7], ref.qpos[g, 3:7]
            qb = qb if float(qa @ qb) >= 0 else -qb
            for sub in range(SUBSTEPS):
                a = sub / SUBSTEPS
                quat = (1 - a) * qa + a * qb
                data.mocap_pos[0] = (1 - a) * ref.qpos[f, :3] + a * ref.qpos[g, :3]
                data.mocap_quat[0] = quat / np.linalg.norm(quat)
                mujoco.mj_step(model, data)
            clip_err += np.abs(data.qpos[7:] - ref.q[g])
        err_sum += clip_err
        steps += e - 1 - s
        per_clip[name] = float(clip_err.mean() / max(e - 1 - s, 1))
    per_joint = err_sum / steps
    worst = max(per_clip, key=per_clip.get)
    return {
        "mean_29_joint_rad": float(per_joint.mean()),
        "per_joint_rad": dict(zip(JOINT_NAMES, per_joint.round(4).tolist(), strict=True)),
        "worst_clip": [worst, per_clip[worst]],
        "per_clip_rad": per_clip,
        "steps": steps,
        "steps_with_a_clipped_target": clipped,
    }


def _yaw(q: np.ndarray) -> float:
    w, x, y, z = q
    return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


def _angle(p: np.ndarray, q: np.ndarray) -> float:
    return 2.0 * float(np.arccos(min(1.0, abs(float(p @ q)))))


def sensitivity(ref: Reference) -> dict:
    """Per joint: what the body-level metrics and reward terms see of a 0.3 rad error."""
    model = build_g1_model(default_scene_cfg())
    data = mujoco.MjData(model)
    ids = body_ids(model, TRACKED_BODY_NAMES)
    anchor = TRACKED_BODY_NAMES.index("torso_link")
    ee = [TRACKED_BODY_NAMES.index(b) for b in EE_BODY_NAMES]
    lo, hi = joint_ranges(model)
    rewards = default_task_cfg().rewards
    w_pos, s_pos = rewards["motion_body_pos"].weight, rewards["motion_body_pos"].sigma
    w_ori, s_ori = rewards["motion_body_ori"].weight, rewards["motion_body_ori"].sigma
    frames = np.random.default_rng(0).choice(len(ref.q), SENSITIVITY_FRAMES, replace=False)

    def fk(qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        data.qpos[:] = qpos
        mujoco.mj_kinematics(model, data)
        return data.xpos[ids].copy(), data.xquat[ids].copy()

    sums = np.zeros((29, 3))
    for f in frames:
        p_ref, q_ref = fk(ref.qpos[f])
        for j in range(29):
            qpos = ref.qpos[f].copy()
            toward_middle = 1.0 if qpos[7 + j] < 0.5 * (lo[j] + hi[j]) else -1.0
            qpos[7 + j] = np.clip(qpos[7 + j] + toward_middle * SENSITIVITY_RAD, lo[j], hi[j])
            p, q = fk(qpos)
            dyaw = _yaw(q[anchor]) - _yaw(q_ref[anchor])
            c, s = np.cos(dyaw), np.sin(dyaw)
            rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
            rel = (p_ref - p_ref[anchor]) @ rot.T
            rel[:, :2] += p[anchor, :2]
            rel[:, 2] = p_ref[:, 2]
            turn = np.array([np.cos(dyaw / 2), 0.0, 0.0, np.sin(dyaw / 2)])
            rel_q = np.zeros((14, 4))
            for b in range(14):
                mujoco.mju_mulQuat(rel_q[b], turn, q_ref[b])
            ori = np.array([_angle(rel_q[b], q[b]) for b in range(14)])
            sums[j] += [np.linalg.norm(rel - p, axis=1).mean(), (ori**2).mean(), ori[ee].mean()]
    sums /= len(frames)
    out = {}
    for j, n in enumerate(JOINT_NAMES):
        r_mpkpe, ori2, ee_ori = sums[j]
        loss = w_pos * (1 - np.exp(-(r_mpkpe**2) / s_pos**2)) + w_ori * (
            1 - np.exp(-ori2 / s_ori**2)
        )
        out[n] = {
            "r_mpkpe_mm": round(1000 * float(r_mpkpe), 2),
            "body_ori_sq_mean": round(float(ori2), 4),
            "relative_body_reward_lost": round(float(loss), 4),
            "ee_ori_rad": round(float(ee_ori), 3),
        }
    return out


def _plain(value: np.generic) -> int | float:
    """NumPy scalars as JSON numbers."""
    return value.item()


def main(library: Path, npz: Path, out: Path) -> None:
    ref = Reference(npz)
    lo, hi = joint_ranges(build_g1_model(default_scene_cfg()))
    attribution = str(np.load(npz)["library_attribution"])
    result: dict = {
        "attribution": attribution,
        "library": str(library),
        "clip_set": str(npz),
        "frames": len(ref.q),
    }
    steps = [
        ("mapping", lambda: check_mapping(library, ref)),
        ("limits", lambda: check_limits(library, lo, hi)),
        ("action_bound", lambda: check_action_bound(ref)),
        ("self_penetration", lambda: check_self_penetration(ref)),
        *((f"replay_{v}", lambda v=v: replay(ref, v)) for v in VARIANTS),
        ("sensitivity_0.3rad", lambda: sensitivity(ref)),
    ]
    result["joint_effort_nm"] = dict(zip(JOINT_NAMES, JOINT_EFFORT, strict=True))
    for key, run in steps:
        began = time.perf_counter()
        result[key] = run()
        brief = {k: v for k, v in result[key].items() if not k.startswith("per_")}
        print(
            f"{key} ({time.perf_counter() - began:.0f} s): {json.dumps(brief, default=_plain)[:600]}",
            flush=True,
        )
    out.write_text(json.dumps(result, indent=1, default=_plain) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
