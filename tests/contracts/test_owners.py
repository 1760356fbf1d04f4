"""contracts.owners: the owner chain the trainer's loader and the support matrix share."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.errors import ConfigError
from contracts.owners import default_conf_root, inherits_chain, list_owners, owner_chain
from trainer.config import errors as trainer_errors
from trainer.config import loader


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_default_conf_root_is_the_trainers_without_importing_it() -> None:
    assert default_conf_root() == loader.DEFAULT_CONF_ROOT
    assert list_owners() == loader.list_owners(loader.DEFAULT_CONF_ROOT)
    assert trainer_errors.ConfigError is ConfigError  # one exception type on both sides


def test_chain_order_and_inherits(tmp_path: Path) -> None:
    task = tmp_path / "algo/task/t"
    _write(tmp_path / "algo/config.yaml", "a: 1\n")
    _write(task / "base.yaml", "b: 1\n")
    _write(task / "one.yaml", "c: 1\n")
    _write(task / "two.yaml", "inherits: one\n")
    assert inherits_chain(task / "two.yaml", tmp_path) == [task / "two.yaml", task / "one.yaml"]
    assert owner_chain("algo", "t", "two", tmp_path) == [
        tmp_path / "algo/config.yaml",
        task / "base.yaml",
        task / "one.yaml",
        task / "two.yaml",
    ]
    assert list_owners(tmp_path) == ["algo/t/one", "algo/t/two"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("inherits: two\n", "inheritance cycle"),
        ("inherits: base\n", "is not an owner file"),
        ("inherits: a/b\n", "must name a sibling owner"),
        ("inherits: [\n", "cannot parse config file"),
    ],
)
def test_a_broken_chain_is_a_config_error(tmp_path: Path, text: str, match: str) -> None:
    task = tmp_path / "algo/task/t"
    _write(task / "base.yaml", "b: 1\n")
    _write(task / "one.yaml", text)
    _write(task / "two.yaml", "inherits: one\n")
    with pytest.raises(ConfigError, match=match):
        inherits_chain(task / "two.yaml", tmp_path)
