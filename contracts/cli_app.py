"""One runner for every typer console command: failures become one ``error:`` line + exit code.

docs/contracts.md §conventions: a command prints ``error: <msg>`` on stderr and exits ``0`` pass, ``1``
run/check failed, ``2`` usage/config error. Each ``main()`` calls :func:`run_app` instead of
repeating the mapping of typer's (vendored) click exceptions and the harness errors.

Pure Python (typer/click only): the trainer's console commands use it too.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Mapping, Sequence

import click
import typer

from contracts.errors import HarnessError, UsageError

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "error", "run_app"]

EXIT_OK = 0
"""Passed / completed."""
EXIT_FAILED = 1
"""A run, check or validation failed (or was cancelled)."""
EXIT_USAGE = 2
"""Usage or configuration error found before anything was launched or written."""

Printer = Callable[[str], None]


def _print_line(message: str) -> None:
    line = " ".join(str(message).split()) or "unknown error"
    sys.stderr.write(f"error: {line}\n")


def error(message: str, code: int = EXIT_FAILED) -> int:
    """Print ``error: <message>`` (white space folded onto one line) on stderr; return ``code``."""
    _print_line(message)
    return code


def run_app(
    app: typer.Typer,
    argv: Sequence[str] | None,
    *,
    prog: str,
    failures: Mapping[type[BaseException], Callable[[BaseException], str]] | None = None,
    usage_suffix: str = "",
    printer: Printer = _print_line,
) -> int:
    """Run ``app`` without typer's standalone handling and map every outcome to 0/1/2.

    Args:
        app: the typer app of the command.
        argv: arguments after the command name; ``None`` reads ``sys.argv[1:]`` and then
            leaves through ``sys.exit`` with the code (console-script behaviour).
        prog: the program name shown in usage and help.
        failures: further exception types that mean "failed" (exit 1), each with the function
            that turns the exception into the message (checked in order, after the harness
            errors).
        usage_suffix: appended to click/typer usage messages, e.g. ``" (see train --help)"``.
        printer: prints one failure message (default: one folded ``error:`` line).

    Returns:
        The exit code: the command's ``typer.Exit`` code or return value when it is 0, 1, 2
        or a signal's conventional code (130 after Ctrl-C, 143 after SIGTERM; any other
        integer is a failed run: 1); 2 for usage errors
        (click/typer usage errors, :class:`UsageError`); 1 for :class:`HarnessError`, the
        ``failures`` types, other click exceptions and aborts.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    # click's plain help layout: option names stay whole at any width (rich's panels cut
    # them at 80 columns) and flags show as flags, not `--json <bool>`.
    app.rich_markup_mode = None
    try:
        result = app(args=args, prog_name=prog, standalone_mode=False)
        code = _exit_code(result)
    except (click.exceptions.Exit, typer.Exit) as exc:
        code = _exit_code(getattr(exc, "exit_code", EXIT_FAILED))
    except (click.ClickException, typer.TyperException) as err:
        # typer vendors its own click: its usage errors are TyperExceptions with exit_code 2.
        message = err.format_message() if hasattr(err, "format_message") else str(err)
        usage = int(getattr(err, "exit_code", EXIT_USAGE)) == EXIT_USAGE
        message = message.strip() or f"missing command; see `{prog} --help`"
        printer(message + usage_suffix if usage else message)
        code = EXIT_USAGE if usage else EXIT_FAILED
    except (click.exceptions.Abort, typer.Abort, KeyboardInterrupt):
        printer("aborted")
        code = EXIT_FAILED
    except UsageError as err:
        printer(str(err))
        code = EXIT_USAGE
    except HarnessError as err:
        printer(str(err))
        code = EXIT_FAILED
    except Exception as err:
        describe = next(
            (fn for kind, fn in (failures or {}).items() if isinstance(err, kind)), None
        )
        if describe is None:
            raise
        printer(describe(err))
        code = EXIT_FAILED
    if argv is None:
        sys.exit(code)
    return code


SIGNAL_EXIT_CODES = (128 + signal.SIGINT, 128 + signal.SIGTERM)
"""A command a signal cancelled exits with the shell's code for it (130, 143)."""


def _exit_code(result: object) -> int:
    """A command's return value or Exit code → 0/1/2 or a signal's code (``None``/non-int
    → 0, others → 1)."""
    if isinstance(result, bool) or not isinstance(result, int):
        return EXIT_OK
    if result in (EXIT_OK, EXIT_FAILED, EXIT_USAGE, *SIGNAL_EXIT_CODES):
        return result
    return EXIT_FAILED
