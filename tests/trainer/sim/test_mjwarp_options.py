"""``MjWarpOptions``: parsing ``KEY=VALUE`` texts, fail-closed values, what lands on ``opt``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trainer.config.defaults import default_scene_cfg
from trainer.sim.factory import make_backend
from trainer.sim.mjwarp_options import DEFAULT_MJWARP_OPTIONS, MjWarpOptions
from trainer.sim.scene import build_g1_model


def test_the_defaults_are_mjwarps_own() -> None:
    assert DEFAULT_MJWARP_OPTIONS.to_json() == {"broadphase": "nxn", "qacc_smooth": True}
    assert MjWarpOptions.parse([]) == DEFAULT_MJWARP_OPTIONS


def test_parse_reads_each_key_and_the_last_value_of_a_repeated_one() -> None:
    opts = MjWarpOptions.parse(
        ["broadphase=sap_tile", "qacc_smooth=False", "broadphase=sap_segmented"]
    )
    assert opts == MjWarpOptions(broadphase="sap_segmented", qacc_smooth=False)


@pytest.mark.parametrize(
    ("items", "needle"),
    [
        (["broadphase"], "'broadphase' is not KEY=VALUE"),
        (
            ["solver=cg"],
            "'solver=cg' is not KEY=VALUE with KEY one of ['broadphase', 'qacc_smooth']",
        ),
        (
            ["broadphase=sap"],
            "broadphase='sap' must be one of ['nxn', 'sap_tile', 'sap_segmented']",
        ),
        (["qacc_smooth=0"], "qacc_smooth='0' must be true or false"),
    ],
)
def test_a_bad_option_names_itself_and_the_fix(items: list[str], needle: str) -> None:
    with pytest.raises(ValueError) as err:
        MjWarpOptions.parse(items)
    assert needle in str(err.value)


def test_a_non_bool_qacc_smooth_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="qacc_smooth=1 must be true or false"):
        MjWarpOptions(qacc_smooth=1)  # type: ignore[arg-type]


@pytest.mark.slow  # imports mujoco_warp (warp initialises)
def test_apply_sets_mjwarps_broadphase_enum_and_qacc_smooth_flag() -> None:
    mjw = pytest.importorskip("mujoco_warp")
    opt = SimpleNamespace(broadphase=None, run_qacc_smooth=None)
    MjWarpOptions(broadphase="sap_tile", qacc_smooth=False).apply(opt)
    assert opt.broadphase is mjw.BroadphaseType.SAP_TILE
    assert opt.run_qacc_smooth is False
    DEFAULT_MJWARP_OPTIONS.apply(opt)
    assert opt.broadphase is mjw.BroadphaseType.NXN and opt.run_qacc_smooth is True


def test_the_cpu_physics_refuses_mjwarp_options() -> None:
    model = build_g1_model(default_scene_cfg())
    with pytest.raises(ValueError, match="mjwarp_options apply to mjwarp only"):
        make_backend("mujoco", model, 1, "cpu", default_scene_cfg(), mjwarp_options=MjWarpOptions())
