"""Offscreen frames of a rollout: the robot, its reference as a translucent ghost, an overlay.

MuJoCo's offscreen renderer draws each frame; the OpenGL platform is MuJoCo's ``MUJOCO_GL``,
read once when ``mujoco`` is imported: ``egl`` on an NVIDIA GPU machine, ``osmesa`` (software)
on a CPU machine. ``play`` sets it before that import when it is unset
(:func:`choose_gl_backend`); a context that cannot be opened is a :class:`RenderError` whose
message names the setting to try.

The scene is the training scene (same bodies and joints, so every ``qpos`` fits) with a
chequered floor, a sky and the robot's geoms in one colour. The reference is the same robot
posed at the reference ``qpos`` and added to the scene with ``mjv_addGeoms``, its geoms
recoloured translucent: a visual-only copy that touches nothing. The camera follows the
pelvis over the floor.
Software GL skips multisampling, shadows and reflections (about 4x faster); hardware GL draws
them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import mujoco

    from trainer.sim.scene import SceneCfg

__all__ = [
    "GL_ENV",
    "FrameText",
    "GlChoice",
    "PlayRenderer",
    "RenderError",
    "choose_gl_backend",
    "draw_overlay",
    "filmstrip",
]

GL_ENV = "MUJOCO_GL"
NVIDIA_DRIVER_FILE = Path("/proc/driver/nvidia/version")
"""Present when an NVIDIA kernel driver is loaded: then ``egl`` is the default."""
SOFTWARE_GL = ("osmesa",)
MUJOCO_GL_VALUES = frozenset(
    ("egl", "osmesa", "glfw", "glx", "enable", "enabled", "on", "true", "1")
    + ("disable", "disabled", "off", "false", "0")
)
"""What MuJoCo accepts on Linux (any other value makes ``import mujoco`` raise)."""
ROBOT_RGBA = (0.85, 0.55, 0.25, 1.0)
GHOST_RGBA = (0.35, 0.75, 1.0, 0.35)
CAMERA_DISTANCE_M = 3.0
CAMERA_HEIGHT_M = 0.7
"""The camera looks at the point this high above the pelvis's floor position."""
CAMERA_ELEVATION_DEG = -10.0
CAMERA_AZIMUTH_DEG = 145.0
"""Front-left three-quarter view of a robot facing +x."""
FILMSTRIP_FRAMES = 8
FILMSTRIP_THUMB_WIDTH = 160


class RenderError(RuntimeError):
    """No frame can be drawn (no OpenGL context); the message names the ``MUJOCO_GL`` to try."""


@dataclass(frozen=True)
class GlChoice:
    """The OpenGL platform MuJoCo renders with."""

    backend: str
    """``egl``, ``osmesa``, ``glfw``, ... (MuJoCo's ``MUJOCO_GL`` spelling)."""
    source: str
    """``MUJOCO_GL`` (set by the caller), ``default`` (set by play) or ``mujoco-default``
    (unset when mujoco was imported: MuJoCo's own GLFW window)."""


def choose_gl_backend(environ: MutableMapping[str, str] | None = None) -> GlChoice:
    """Use ``MUJOCO_GL`` when set; else set it to ``egl`` with an NVIDIA driver, else ``osmesa``.

    Must run before ``mujoco`` is first imported to take effect: MuJoCo reads the variable
    once, at import. An in-process caller that imported mujoco first keeps MuJoCo's choice.

    Raises:
        ValueError: ``MUJOCO_GL`` has a value MuJoCo rejects at import.
    """
    env = os.environ if environ is None else environ
    given = env.get(GL_ENV, "").strip().lower()
    if given and given not in MUJOCO_GL_VALUES:
        msg = (
            f"MUJOCO_GL={given} is not an OpenGL platform MuJoCo knows; use MUJOCO_GL=egl "
            "(NVIDIA GPU) or MUJOCO_GL=osmesa (CPU), or unset it"
        )
        raise ValueError(msg)
    if given:
        return GlChoice(given, GL_ENV)
    if "mujoco" in sys.modules:
        return GlChoice("glfw", "mujoco-default")
    backend = "egl" if NVIDIA_DRIVER_FILE.exists() else "osmesa"
    env[GL_ENV] = backend
    return GlChoice(backend, "default")


def _advice(backend: str) -> str:
    if backend == "egl":
        return (
            "try MUJOCO_GL=osmesa (software rendering; apt-get install libosmesa6), or check "
            "that the NVIDIA EGL library (libEGL_nvidia) is installed"
        )
    if backend == "osmesa":
        return (
            "install OSMesa (apt-get install libosmesa6 libgl1-mesa-dri), or try MUJOCO_GL=egl "
            "on an NVIDIA GPU machine"
        )
    return (
        "try MUJOCO_GL=osmesa (CPU machine; apt-get install libosmesa6) or MUJOCO_GL=egl "
        "(NVIDIA GPU machine); MuJoCo's default opens a GLFW window, which needs a display"
    )


def render_failure(gl: GlChoice, err: BaseException) -> RenderError:
    """The :class:`RenderError` for a context that failed to open or draw."""
    detail = " ".join(f"{type(err).__name__}: {err}".split())[:300]
    return RenderError(
        f"cannot render with MUJOCO_GL={gl.backend} ({detail}); {_advice(gl.backend)}"
    )


def render_model(scene: SceneCfg, width: int, height: int) -> mujoco.MjModel:
    """The training scene dressed for the camera (floor texture, sky, one robot colour)."""
    import mujoco

    from trainer.sim.scene import build_g1_spec

    spec = build_g1_spec(scene)
    spec.add_texture(
        name="play_floor",
        type=mujoco.mjtTexture.mjTEXTURE_2D,
        builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
        rgb1=[0.22, 0.26, 0.30],
        rgb2=[0.15, 0.18, 0.21],
        mark=mujoco.mjtMark.mjMARK_EDGE,
        markrgb=[0.5, 0.55, 0.6],
        width=512,
        height=512,
    )
    spec.add_texture(
        name="play_sky",
        type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
        builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
        rgb1=[0.55, 0.65, 0.75],
        rgb2=[0.1, 0.12, 0.15],
        width=256,
        height=256,
    )
    floor = spec.add_material(
        name="play_floor", texrepeat=[2, 2], texuniform=True, reflectance=0.15
    )
    floor.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "play_floor"
    spec.geom("floor").material = "play_floor"
    for geom in spec.geoms:
        if geom.name != "floor":
            geom.rgba = list(ROBOT_RGBA)
    spec.visual.global_.offwidth = max(width, 640)
    spec.visual.global_.offheight = max(height, 480)
    spec.visual.headlight.ambient = [0.35, 0.35, 0.35]
    return spec.compile()


@dataclass(frozen=True)
class FrameText:
    """The overlay of one frame."""

    frame: int
    frames: int
    time_s: float
    body_pos_error_m: float
    title: str

    def lines(self) -> list[str]:
        return [
            self.title,
            f"frame {self.frame}/{self.frames - 1}   t {self.time_s:6.2f} s",
            f"body position error {self.body_pos_error_m:.3f} m",
            "solid: policy   translucent: reference",
        ]


def draw_overlay(image: np.ndarray, text: FrameText) -> np.ndarray:
    """``image`` [H, W, 3] uint8 with the text in a dark box at the top left."""
    from PIL import Image, ImageDraw, ImageFont

    canvas = Image.fromarray(image).convert("RGBA")
    layer = Image.new("RGBA", canvas.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    size = max(11, canvas.height // 26)
    font = ImageFont.load_default(size=size)
    lines = text.lines()
    pad, step = size // 2, int(size * 1.3)
    width = max(int(draw.textlength(line, font=font)) for line in lines) + 2 * pad
    draw.rectangle((0, 0, width, pad * 2 + step * len(lines)), fill=(0, 0, 0, 150))
    for i, line in enumerate(lines):
        draw.text((pad, pad + i * step), line, font=font, fill=(255, 255, 255, 255))
    return np.asarray(Image.alpha_composite(canvas, layer).convert("RGB"))


class PlayRenderer:
    """Draws frames of the robot and its ghost into ``[height, width, 3]`` uint8 arrays.

    Raises:
        RenderError: the OpenGL context cannot be opened (on construction) or drawn into.
    """

    def __init__(self, model: mujoco.MjModel, width: int, height: int, gl: GlChoice) -> None:
        import mujoco

        self._mj = mujoco
        self.model, self.gl = model, gl
        self.software = gl.backend in SOFTWARE_GL
        if self.software:
            model.vis.quality.offsamples = 0
        try:
            self._renderer = mujoco.Renderer(model, height, width)
        except Exception as err:  # every GL platform fails differently; all are a RenderError
            raise render_failure(gl, err) from err
        self._robot = mujoco.MjData(model)
        self._ghost = mujoco.MjData(model)
        self._option = mujoco.MjvOption()
        self._option.geomgroup[:] = 1  # the scene's geoms are in the collision group 3
        self._perturb = mujoco.MjvPerturb()
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        self._camera.distance = CAMERA_DISTANCE_M
        self._camera.elevation = CAMERA_ELEVATION_DEG
        self._camera.azimuth = CAMERA_AZIMUTH_DEG

    def frame(self, robot_qpos: np.ndarray, ref_qpos: np.ndarray) -> np.ndarray:
        """One frame: the robot at ``robot_qpos`` and the ghost at ``ref_qpos`` ([nq] each)."""
        mj, model, renderer = self._mj, self.model, self._renderer
        self._robot.qpos[:] = robot_qpos
        self._ghost.qpos[:] = ref_qpos
        mj.mj_kinematics(model, self._robot)
        mj.mj_kinematics(model, self._ghost)
        # Follow the pelvis over the floor at a fixed height: a fallen robot stays in view
        # without the camera diving to the ground with it.
        self._camera.lookat[:] = (robot_qpos[0], robot_qpos[1], CAMERA_HEIGHT_M)
        try:
            renderer.update_scene(self._robot, camera=self._camera, scene_option=self._option)
            scene = renderer.scene
            first = scene.ngeom
            mj.mjv_addGeoms(
                model, self._ghost, self._option, self._perturb, mj.mjtCatBit.mjCAT_DYNAMIC, scene
            )
            for i in range(first, scene.ngeom):
                scene.geoms[i].rgba[:] = GHOST_RGBA
            flags = scene.flags
            flags[mj.mjtRndFlag.mjRND_SHADOW] = not self.software
            flags[mj.mjtRndFlag.mjRND_REFLECTION] = not self.software
            return renderer.render()
        except Exception as err:
            raise render_failure(self.gl, err) from err

    def close(self) -> None:
        self._renderer.close()


def filmstrip(frames: list[np.ndarray], path: Path) -> Path:
    """Write the thumbnails of ``frames`` side by side as one PNG (atomically)."""
    from PIL import Image

    thumbs = []
    for image in frames:
        picture = Image.fromarray(image)
        scale = FILMSTRIP_THUMB_WIDTH / picture.width
        thumbs.append(picture.resize((FILMSTRIP_THUMB_WIDTH, round(picture.height * scale))))
    strip = Image.new("RGB", (sum(t.width for t in thumbs), max(t.height for t in thumbs)))
    x = 0
    for thumb in thumbs:
        strip.paste(thumb, (x, 0))
        x += thumb.width
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        strip.save(tmp, format="PNG", optimize=True)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def filmstrip_indices(num_frames: int, count: int = FILMSTRIP_FRAMES) -> list[int]:
    """``count`` evenly spaced frame indices from the first to the last frame."""
    if num_frames <= count:
        return list(range(num_frames))
    return [round(i * (num_frames - 1) / (count - 1)) for i in range(count)]
