"""``diff``: render a path at two revisions and show what changes in the workloads.

Exit codes are diff's own: 0 equal, 1 different, 2 an error (nothing on stdout).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from ..errors import DynGitopsError
from ..stdio import write_stdout
from .help import Command, Option
from .options import exclude_option, runner, setting_options
from .outcome import fail

#: diff's exit code for any error (1 means "different")
EXIT_ERROR = 2


@click.command("diff", cls=Command)
@click.argument("path", default=".", required=False)
@click.option(
    "--base",
    required=True,
    metavar="REV",
    cls=Option,
    section="input",
    help="The revision to compare from.",
)
@click.option(
    "--head",
    default="HEAD",
    show_default=True,
    metavar="REV",
    cls=Option,
    section="input",
    help="The revision to compare to.",
)
@exclude_option
@click.option(
    "-o",
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown"]),
    default="text",
    show_default=True,
    cls=Option,
    section="output",
    help="text for a terminal, markdown for a PR comment.",
)
@setting_options
def diff_cmd(path: str, base: str, head: str, fmt: str, **values: Any) -> None:
    """Render PATH at two revisions and show what changes in the workloads, field by field.

    Exit code 0: no differences; 1: differences; 2: an error (nothing on stdout), such as
    a PATH that exists in neither revision (in one of them: all added or all removed).
    """
    from ..workflows import report
    from ..workflows.diff import diff

    try:
        result = diff(".", base, head, "" if path == "." else path, runner=runner(values))
        write_stdout(report.markdown(result) if fmt == "markdown" else report.text(result))
    except DynGitopsError as exc:  # a revision that does not render too (RevisionError)
        fail(exc.lines(), EXIT_ERROR)
    except (FileNotFoundError, LookupError, NotADirectoryError, PermissionError) as exc:
        fail([f"dyn-gitops: {exc}"], EXIT_ERROR)
    sys.exit(0 if result.equal else 1)
