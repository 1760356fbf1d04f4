"""``EnvSpec``: the row layout tiles the row exactly, and bad dims are rejected."""

from __future__ import annotations

import pytest

from contracts.env_spec import EnvSpec


def _columns(spec: EnvSpec) -> list[int]:
    row = spec.row
    cols: list[int] = []
    for part in (row.obs, row.next_obs, row.action):
        cols.extend(range(part.start, part.stop))
    cols.extend((row.reward, row.done, row.trunc))
    for part in (row.critic_obs, row.next_critic_obs):
        cols.extend(range(part.start, part.stop))
    return cols


@pytest.mark.parametrize("dims", [(160, 289, 29), (3, 5, 2), (1, 1, 1)])
def test_row_layout_tiles_the_row_in_storage_order(dims: tuple[int, int, int]) -> None:
    spec = EnvSpec(*dims)
    assert _columns(spec) == list(range(spec.row_width))


def test_the_g1_row_is_930_columns() -> None:
    assert EnvSpec(obs_dim=160, critic_obs_dim=289, action_dim=29).row_width == 930


@pytest.mark.parametrize("bad", [0, -1, 1.0, True])
def test_non_positive_or_non_int_dims_are_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match="EnvSpec.action_dim=.* must be an int >= 1"):
        EnvSpec(obs_dim=4, critic_obs_dim=4, action_dim=bad)  # type: ignore[arg-type]
