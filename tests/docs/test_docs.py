"""Doc checks: generated blocks are fresh, every documented command is real, links resolve.

- The schema reference in docs/schemas.md equals what ``harness.docs_gen`` renders now.
- Every fenced shell line in docs/*.md and README.md that runs one of our commands is
  exercised: each ``--flag`` it uses must appear in that command's own ``--help`` (a dry parse
  by the command itself), and cheap read-only commands are actually run.
- troubleshooting.md covers every failure classification (docs/contracts.md §classifications), and
  every error text it quotes exists in the code (so the table cannot describe invented errors).
- Every relative link between doc files (the journal's included) resolves, anchors included,
  and every code fence opens and closes cleanly.
- README's test command is exactly what .ci/run runs.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from contracts.jsonio import load_strict
from harness import docs_gen
from tests.docs.doc_anchors import anchors
from tests.docs.fences import fence_problems, strip_fenced
from tests.test_install import OUR_SCRIPTS

REPO = Path(__file__).resolve().parents[2]
DOC_FILES = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
# The journal's dated records keep their historical commands, so only links and fences are checked.
LINKED_FILES = DOC_FILES + sorted((REPO / "docs" / "journal").glob("*.md"))
# Our console scripts, as pyproject.toml declares them (tests/test_install.py checks they are ours).
SCRIPTS = tuple(sorted(OUR_SCRIPTS))
MODULES = {"trainer": "train", "harness.docs_gen": "docs_gen", "harness.smoke": "smoke"}
# Repository scripts that are documented like commands, with the module they run.
REPO_SCRIPTS = {"scripts/gpu_smoke.sh": "smoke"}
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
# Read-only, fast and machine-independent: documented invocations of these are run for real.
RUNNABLE = {
    ("support-matrix",): {"--json", "--check"},
    ("cumps", "status"): {"--json"},
    ("docs_gen",): {"--check"},
}
# The failure and shutdown classifications of docs/contracts.md §classifications, as written there;
# the schemas' enums are added at test time so a new value cannot slip through either.
CONTRACT_CLASSIFICATIONS = {
    "normal_completion",
    "learner_failure",
    "collector_failure",
    "backend_worker_failure",
    "timeout/stale_tick",
    "external_cancellation",
    "unknown_failure",
    "timeout/startup",
    "monitor_failure",
    "resource_leak",
    "missing_run_summary",
    "invalid_run_summary",
    "schema_violation",
    "shutdown_contract_violation",
    "acceleration_fallback",
}


@dataclass(frozen=True)
class DocCommand:
    """One documented invocation of our command: where, what, and the flags it uses."""

    where: str
    line: str
    command: tuple[str, ...]  # ("g1-soak",), ("cumps", "start"), ("train",), ("docs_gen",)
    args: tuple[str, ...]
    flags: tuple[str, ...]


def _split_top_level(line: str) -> list[str]:
    """Split a shell line at ``&&``, ``||``, ``;`` and ``|`` outside quotes, brackets, $()."""
    parts, current, quote, depth, i = [], [], "", 0, 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "[(":
            depth += 1
        elif ch in "])":
            depth = max(0, depth - 1)
        elif depth == 0 and line.startswith(("&&", "||"), i):
            parts.append("".join(current))
            current, i = [], i + 2
            continue
        elif depth == 0 and ch in ";|":
            parts.append("".join(current))
            current, i = [], i + 1
            continue
        current.append(ch)
        i += 1
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _shell_lines(text: str) -> list[str]:
    """Logical lines of every shell-like fenced block (continuations joined, prompts dropped)."""
    lines: list[str] = []
    for match in re.finditer(r"^```([\w-]*)[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        if match.group(1).lower() not in SHELL_LANGS:
            continue
        pending = ""
        for raw in match.group(2).splitlines():
            raw = raw.rstrip()
            raw = raw.removeprefix("$ ")
            if raw.endswith("\\"):
                pending += raw[:-1] + " "
                continue
            lines.append((pending + raw).strip())
            pending = ""
        if pending:
            lines.append(pending.strip())
    return [line for line in lines if line and not line.startswith("#")]


def _tokens(segment: str) -> list[str]:
    try:
        return shlex.split(segment, comments=True)
    except ValueError:
        return segment.split()


SUBCOMMAND_SCRIPTS = {
    "cumps",
    "g1-motion",
    "soak-campaign",
}  # their flags live in each subcommand's --help


def _parse_segment(where: str, line: str, segment: str) -> DocCommand | None:
    tokens = _tokens(segment)
    while tokens and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]):
        tokens = tokens[1:]  # VAR=value prefixes
    if tokens[:2] == ["uv", "run"]:
        tokens = tokens[2:]
        while tokens and tokens[0].startswith("-"):
            takes_value = tokens[0] in {"--extra", "--with", "--python", "--group", "--project"}
            tokens = tokens[2:] if takes_value else tokens[1:]
    if not tokens:
        return None
    if tokens[0] in ("python", "python3") and len(tokens) > 2 and tokens[1] == "-m":
        name = MODULES.get(tokens[2])
        if name is None:
            return None
        rest = tokens[3:]
        if name == "train":
            if not rest or rest[0] != "train":
                return None
            rest = rest[1:]
        command, args = (name,), rest
    elif tokens[0] in REPO_SCRIPTS:
        command, args = (REPO_SCRIPTS[tokens[0]],), tokens[1:]
    elif tokens[0] in SCRIPTS:
        command, args = (tokens[0],), tokens[1:]
        if tokens[0] in SUBCOMMAND_SCRIPTS and args and not args[0].startswith("-"):
            command, args = (tokens[0], args[0]), args[1:]
    else:
        return None
    flags = []
    for tok in args:
        if tok == "--":  # soak-run: what follows is the trainer's command line
            break
        match = re.match(r"^\[?(--[A-Za-z][\w-]*)", tok)
        if match:
            flags.append(match.group(1))
    return DocCommand(where, line, command, tuple(args), tuple(flags))


def documented_commands() -> list[DocCommand]:
    found = []
    for path in DOC_FILES:
        for line in _shell_lines(path.read_text(encoding="utf-8")):
            for segment in _split_top_level(line):
                cmd = _parse_segment(path.name, line, segment)
                if cmd is not None:
                    found.append(cmd)
    return found


def _argv(command: tuple[str, ...]) -> list[str]:
    if command[0] == "docs_gen":
        return [sys.executable, "-m", "harness.docs_gen", *command[1:]]
    if command[0] == "smoke":
        return [sys.executable, "-m", "harness.smoke", *command[1:]]
    script = Path(sys.executable).parent / command[0]
    return [str(script), *command[1:]]


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run one of our commands from the repository root with a wide, colourless terminal."""
    env = dict(os.environ, COLUMNS="300", NO_COLOR="1", TERM="dumb")
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        argv, check=False, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO
    )


@functools.cache
def help_flags(command: tuple[str, ...]) -> frozenset[str]:
    proc = _run([*_argv(command), "--help"], timeout=60)
    assert proc.returncode == 0, (
        f"{' '.join(command)} --help exited {proc.returncode}: {proc.stderr}"
    )
    return frozenset(re.findall(r"--[A-Za-z][\w-]*", proc.stdout))


COMMANDS = documented_commands()


def test_docs_show_commands_of_every_entry_point() -> None:
    shown = {c.command[0] for c in COMMANDS}
    assert {"train", "g1-soak", "soak-run", "soak-report", "extract-metrics", "cumps"} <= shown
    assert {"g1-backend-probe", "support-matrix", "g1-pull-assets", "docs_gen", "smoke"} <= shown
    missing = sorted(set(SCRIPTS) - shown)  # a newly added console script needs docs too
    assert not missing, f"no doc shows a command line of {missing}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "cmd",
    [pytest.param(c, id=f"{c.where}:{' '.join(c.command)}:{i}") for i, c in enumerate(COMMANDS)],
)
def test_documented_command_uses_only_flags_its_help_lists(cmd: DocCommand) -> None:
    known = help_flags(cmd.command)
    unknown = [flag for flag in cmd.flags if flag not in known]
    assert not unknown, (
        f"{cmd.where}: {cmd.line!r} uses {unknown}, not in `{' '.join(cmd.command)} --help`"
    )


def _runnable(cmd: DocCommand) -> bool:
    allowed = RUNNABLE.get(cmd.command)
    return allowed is not None and all(arg in allowed for arg in cmd.args)


@pytest.mark.slow
@pytest.mark.parametrize(
    "cmd",
    [
        pytest.param(c, id=f"{c.where}:{' '.join(c.command + c.args)}")
        for c in COMMANDS
        if _runnable(c)
    ],
)
def test_cheap_documented_command_runs(cmd: DocCommand) -> None:
    proc = _run([*_argv(cmd.command), *cmd.args], timeout=120)
    assert proc.returncode == 0, f"{cmd.line!r} exited {proc.returncode}: {proc.stderr[-2000:]}"
    assert "error:" not in proc.stderr


def test_some_documented_commands_are_run_for_real() -> None:
    assert {c.command for c in COMMANDS if _runnable(c)} >= {("support-matrix",), ("docs_gen",)}


def test_command_extraction_handles_uv_run_chains_and_soak_run_separator() -> None:
    line = 'X=1 uv run --extra mjwarp g1-soak --num-envs 4 --log-dir "$d/r" && uv run cumps start --gpus 0'
    cmds = [_parse_segment("t", line, s) for s in _split_top_level(line)]
    assert [(c.command, c.flags) for c in cmds if c] == [
        (("g1-soak",), ("--num-envs", "--log-dir")),
        (("cumps", "start"), ("--gpus",)),
    ]
    run = _parse_segment(
        "t", "", "soak-run --log-dir /a --output /b -- python t.py --out {log_dir}"
    )
    assert run is not None and run.flags == ("--log-dir", "--output")
    usage = _parse_segment("t", "", "cumps stop [--name N | --all]")
    assert usage is not None and usage.flags == ("--name", "--all")


def test_schema_reference_block_is_fresh() -> None:
    page = (REPO / docs_gen.DOC_PAGE).read_text(encoding="utf-8")
    assert docs_gen.committed_block(page) == docs_gen.render_block(), (
        "docs/schemas.md is stale; run `uv run python -m harness.docs_gen --write`"
    )


def test_schema_reference_lists_every_schema_file() -> None:
    page = (REPO / docs_gen.DOC_PAGE).read_text(encoding="utf-8")
    for path in sorted((REPO / "schemas").glob("*.json")):
        assert f"### `{path.name}`" in page


def test_docs_gen_check_fails_on_a_stale_page(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    page = tmp_path / docs_gen.DOC_PAGE
    page.write_text(
        f"intro\n{docs_gen.BEGIN_MARKER}\nold\n{docs_gen.END_MARKER}\n", encoding="utf-8"
    )
    with pytest.raises(docs_gen.HarnessError, match="stale"):
        docs_gen.run(write=False, check=True, root=tmp_path)
    docs_gen.run(write=True, check=False, root=tmp_path)
    docs_gen.run(write=False, check=True, root=tmp_path)
    assert page.read_text(encoding="utf-8").startswith("intro\n")


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    nxt = text.find("\n## ", start + 1)
    return text[start : nxt if nxt >= 0 else len(text)]


def _first_column_codes(section: str) -> list[str]:
    codes = []
    for row in section.splitlines():
        if row.startswith("| ") and not row.startswith("|---"):
            first = row.split(" | ", 1)[0]
            codes += re.findall(r"`([^`]+)`", first)
    return codes


def all_classifications() -> set[str]:
    artifact = load_strict(REPO / "schemas" / "soak_artifact.0.3.0.json")
    manifest = load_strict(REPO / "schemas" / "runtime_manifest.v1.json")
    found = set(artifact["$defs"]["classification"]["enum"])
    found |= set(manifest["$defs"]["shutdown"]["properties"]["classification"]["enum"])
    return found | CONTRACT_CLASSIFICATIONS


def test_troubleshooting_covers_every_failure_classification() -> None:
    text = (REPO / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    covered = set(_first_column_codes(_section(text, "Failure classifications")))
    missing = sorted(all_classifications() - covered)
    assert not missing, f"docs/troubleshooting.md lacks rows for {missing}"


@functools.cache
def _source_text() -> str:
    parts = []
    for root in ("contracts", "harness", "trainer"):
        for path in sorted((REPO / root).rglob("*.py")):
            parts.append(path.read_text(encoding="utf-8"))
    return "\n".join(parts).replace("{{", "{").replace("}}", "}")


def _message_pieces(fragment: str) -> list[str]:
    pieces = re.split(r"<[^>]*>|\.\.\.|\*", fragment)
    return [p.strip() for p in pieces if len(p.strip()) >= 4]


def test_every_error_text_quoted_in_troubleshooting_exists_in_the_code() -> None:
    text = (REPO / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    fragments = _first_column_codes(_section(text, "Soak failure reasons"))
    fragments += _first_column_codes(_section(text, "Error messages"))
    assert len(fragments) > 100
    source = _source_text()
    missing = [f for f in fragments if any(p not in source for p in _message_pieces(f))]
    assert not missing, f"troubleshooting.md quotes texts the code never prints: {missing}"


def broken_links(paths: list[Path]) -> list[str]:
    """``page: target`` for every relative link whose file or ``#anchor`` does not exist."""
    broken = []
    for path in paths:
        text = strip_fenced(path.read_text(encoding="utf-8"))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                broken.append(f"{path.name}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{path.name}: {target} (no such heading)")
    return broken


def test_every_relative_doc_link_resolves() -> None:
    broken = broken_links(LINKED_FILES)
    assert not broken, f"broken doc links: {broken}"


def test_a_dead_link_or_anchor_is_reported(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\n\n## Real heading\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#real-heading) [gone](missing.md) [bad](a.md#no-heading) [self](#nope)\n"
        "```bash\n[in code](ignored.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links([page]) == [
        "b.md: missing.md",
        "b.md: a.md#no-heading (no such heading)",
        "b.md: #nope (no such heading)",
    ]


def test_every_code_fence_opens_and_closes_cleanly() -> None:
    problems = [
        f"{path.relative_to(REPO)} {p}"
        for path in LINKED_FILES
        for p in fence_problems(path.read_text(encoding="utf-8"))
    ]
    assert not problems, f"broken code fences: {problems}"


def test_a_fence_closed_with_text_after_it_or_never_closed_is_reported() -> None:
    swallowed = "```bash\nuv run train\n``` `env.x` was removed.\n\n## 3. Next\n"
    assert fence_problems(swallowed) == [
        "line 3: text after the closing fence of line 1 keeps the block open",
        "line 1: the fence opened here is never closed",
    ]
    assert fence_problems("```\na\n```\n\n~~~~\nb\n~~~~\n") == []


def test_index_links_every_doc_page() -> None:
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    pages = {p.name for p in (REPO / "docs").glob("*.md")} - {"index.md"}
    missing = sorted(p for p in pages if f"]({p})" not in index)
    assert not missing, f"docs/index.md does not link {missing}"


def _ci_test_commands() -> list[str]:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    return [line.strip() for line in ci.splitlines() if re.match(r"^\s*uv run pytest\b", line)]


def test_readme_test_command_is_what_ci_runs() -> None:
    ci_commands = _ci_test_commands()
    assert len(ci_commands) == 1, f".ci/run should run one test command, found {ci_commands}"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    readme_commands = [line.strip() for line in _shell_lines(readme) if "pytest" in line]
    assert readme_commands == ci_commands, (
        f"README.md states {readme_commands}, .ci/run runs {ci_commands}; keep them identical"
    )


def test_readme_quickstart_needs_no_gpu_and_no_hub() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    soaks = [
        c for c in documented_commands() if c.where == "README.md" and c.command == ("g1-soak",)
    ]
    assert soaks, "README.md must show a g1-soak quickstart"
    args = soaks[0].args
    assert args[args.index("--sim") + 1] == "mujoco"
    assert args[args.index("--motion") + 1] == "synthetic"
    assert "uv sync" in readme
