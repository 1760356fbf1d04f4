"""Every command's ``--help`` at 80 columns: option names whole, flags shown as flags, an
example, and only documents that are in the repository (docs/*.md)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer

REPO = Path(__file__).resolve().parents[1]
# The design notes that are not in the repository: help text must not cite them.
_ABSENT = "CONTRACTS TASK.md FLASHSAC.md DESIGN.md STYLE.md"  # section-refs: ignore
ABSENT_DOCS = tuple(_ABSENT.split())


@dataclass(frozen=True)
class Command:
    prog: str
    main: Callable[[list[str]], int]
    app: typer.Typer
    args: tuple[str, ...] = ()


def _commands() -> list[Command]:
    from harness.campaign import cli as campaign
    from harness.metrics import cli as metrics
    from harness.mps import cli as mps
    from harness.probe import cli as probe
    from harness.report import cli as report
    from harness.report import diagnostics
    from harness.scaling import cli as scaling
    from harness.soak import cli as soak
    from harness.support import cli as support
    from trainer import assets_cli, check_config
    from trainer import cli as train

    found = [
        Command("train", train.main, train.app),
        Command("check-config", check_config.main, check_config.app),
        Command("g1-soak", soak.g1_soak_main, soak.g1_soak_app),
        Command("soak-run", soak.soak_run_main, soak.soak_run_app),
        Command("soak-report", report.main, report.app),
        Command("extract-metrics", metrics.main, metrics.app),
        Command("g1-backend-probe", probe.main, probe.app),
        Command("support-matrix", support.main, support.app),
        Command("g1-pull-assets", assets_cli.main, assets_cli.app),
        Command("cumps", mps.main, mps.app),
    ]
    group = typer.main.get_command(mps.app)
    found += [Command(f"cumps {name}", mps.main, mps.app, (name,)) for name in group.commands]
    found += [
        Command(f"soak-campaign {name}", campaign.main, campaign.app, (name,))
        for name in typer.main.get_command(campaign.app).commands
    ]
    found.append(Command("python -m harness.scaling", scaling.main, scaling.app))
    found.append(Command("python -m harness.report.diagnostics", diagnostics.cli, diagnostics.app))
    found += [
        Command(f"python -m harness.scaling {name}", scaling.main, scaling.app, (name,))
        for name in ("run", "table")
    ]
    return found


COMMANDS = _commands()


def _click_command(cmd: Command) -> Any:
    """The command typer built (typer vendors click, so its classes are not click's)."""
    command = typer.main.get_command(cmd.app)
    for name in cmd.args:
        command = command.commands[name]
    return command


def _options(command: Any) -> Iterator[Any]:
    for param in command.params:
        if param.param_type_name == "option" and not param.hidden:
            yield param


def _option_names(command: Any) -> Iterator[str]:
    for param in _options(command):
        yield from (opt for opt in (*param.opts, *param.secondary_opts) if opt.startswith("-"))


@pytest.fixture(params=COMMANDS, ids=[c.prog for c in COMMANDS])
def rendered(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[Command, str]:
    cmd: Command = request.param
    monkeypatch.setenv("COLUMNS", "80")
    assert cmd.main([*cmd.args, "--help"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return cmd, out


def test_every_option_name_appears_whole_at_80_columns(rendered: tuple[Command, str]) -> None:
    cmd, text = rendered
    names = [*_option_names(_click_command(cmd)), "--help"]
    for name in names:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), f"{cmd.prog}: {name}"
    assert "…" not in text


def test_flags_are_shown_as_flags(rendered: tuple[Command, str]) -> None:
    cmd, text = rendered
    assert "<bool>" not in text
    for param in _options(_click_command(cmd)):
        if param.is_flag:
            for opt in param.opts:
                assert re.search(rf"^\s+{re.escape(opt)}\s{{2,}}\S", text, re.MULTILINE), opt


def test_help_cites_only_documents_in_the_repository(rendered: tuple[Command, str]) -> None:
    cmd, text = rendered
    assert not [name for name in ABSENT_DOCS if name in text], cmd.prog
    for page in re.findall(r"docs/[\w./-]+\.md", text):
        assert (REPO / page).is_file(), f"{cmd.prog} cites {page}"


def test_help_gives_an_example(rendered: tuple[Command, str]) -> None:
    cmd, text = rendered
    examples = text.split("Examples:", 1)
    assert len(examples) == 2, f"{cmd.prog} --help has no Examples"
    name = cmd.prog.split()[0]
    assert name in examples[1] or "python -m trainer" in examples[1]


def test_help_lines_fit_80_columns(rendered: tuple[Command, str]) -> None:
    cmd, text = rendered
    long = [line for line in text.splitlines() if len(line) > 80]
    assert not long, f"{cmd.prog}: {long}"


def test_train_help_names_the_owners_and_the_configuration_page(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from trainer.cli import main
    from trainer.config.loader import list_owners

    monkeypatch.setenv("COLUMNS", "80")
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    owners = text.split("Owners (--algo/--task/--sim):", 1)[1].split("Examples:", 1)[0]
    assert owners.split() == list_owners()
    assert "docs/configuration.md" in text
    assert "--print-config" in text.split("Examples:", 1)[1]
