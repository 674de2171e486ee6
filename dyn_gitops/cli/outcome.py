"""How a command ends: every problem on stderr, one line each, and the exit code.

Exit codes: 0 ok, 1 invalid input, 2 usage, 3 internal error. On any error nothing is
written to stdout.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import click

from ..display import printable
from ..errors import DynGitopsError, ExitCode, RenderError


def fail(lines: list[str], code: int) -> NoReturn:
    for line in lines:
        click.echo(printable(line), err=True)
    sys.exit(int(code))


def problem_lines(problems: list[Any], what: str) -> list[str]:
    """Each problem, then ``N problems found; <what>``."""
    n = len(problems)
    return [str(p) for p in problems] + [
        f"dyn-gitops: {n} problem{'s' if n != 1 else ''} found; {what}"
    ]


def fail_with(
    exc: DynGitopsError, what: str = "nothing rendered", code: int | None = None
) -> NoReturn:
    """End the command with ``exc``'s lines and exit code (or ``code``)."""
    lines = exc.lines(what) if isinstance(exc, RenderError) else exc.lines()
    fail(lines, exc.exit_code if code is None else code)


@contextmanager
def reported(what: str = "nothing rendered") -> Iterator[None]:
    """Turn an error of the render side into its lines on stderr and its exit code;
    ``what`` closes a list of input problems (``N problems found; <what>``)."""
    try:
        yield
    except DynGitopsError as exc:
        fail_with(exc, what)


def warn(warnings: list[Any]) -> None:
    for warning in warnings:  # rendered anyway, as the operator would
        click.echo(f"{warning} (warning)", err=True)


__all__ = ["ExitCode", "fail", "fail_with", "problem_lines", "reported", "warn"]
