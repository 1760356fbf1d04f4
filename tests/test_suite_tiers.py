"""The suite's two tiers and its time limits, as pyproject.toml and README.md state them.

``uv run pytest -n 2 --dist loadfile`` (the CI command) runs everything but the long soak; the
fast tier README.md names leaves out the tests marked ``slow`` and still the long soak, since a
``-m`` given on the command line replaces the one in ``addopts``. Every test runs under
pytest-timeout's default limit unless it carries a ``timeout`` mark of its own.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

from tests.integration import test_longsoak_cpu

REPO = Path(__file__).resolve().parents[1]
FAST_TIER = re.compile(r'`uv run pytest -m "(?P<expr>[^"]+)"`')


def _ini() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]


def _selects(expr: str, marks: set[str]) -> bool:
    return Expression.compile(expr).evaluate(lambda name, **_: name in marks)


def _fast_tier_expression() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Run the tests", 1)[1].split("\n## ", 1)[0]
    (match,) = FAST_TIER.finditer(section)
    return match.group("expr")


def test_a_default_timeout_is_configured(pytestconfig: pytest.Config) -> None:
    assert "timeout" in _ini(), "pyproject.toml sets no pytest-timeout default"
    assert float(pytestconfig.getini("timeout")) > 0


def test_the_markers_are_registered_and_strict() -> None:
    ini = _ini()
    registered = {line.split(":", 1)[0] for line in ini["markers"]}
    assert {"slow", "longsoak", "gpu"} <= registered
    assert "--strict-markers" in ini["addopts"]


def test_the_ci_command_leaves_out_only_the_long_soak() -> None:
    expr = re.search(r"-m '([^']+)'", _ini()["addopts"]).group(1)
    assert not _selects(expr, {"slow", "longsoak"})
    assert _selects(expr, {"slow"}) and _selects(expr, {"gpu"}) and _selects(expr, set())


def test_the_fast_tier_leaves_out_slow_tests_and_the_long_soak() -> None:
    expr = _fast_tier_expression()
    assert not _selects(expr, {"slow"}) and not _selects(expr, {"longsoak"})
    assert _selects(expr, set()) and _selects(expr, {"gpu"})


def _timeout_s(marks: list[pytest.MarkDecorator]) -> float:
    (timeout,) = [m.mark for m in marks if m.mark.name == "timeout"]
    return float(timeout.args[0])


def test_the_long_soak_has_a_limit_beyond_its_budget() -> None:
    assert _timeout_s(test_longsoak_cpu.pytestmark) > test_longsoak_cpu.MINUTES * 60
