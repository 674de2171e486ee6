"""The ``dyn-gitops`` command line: one module per command group.

Exit codes: 0 ok, 1 invalid input, 2 usage, 3 internal error (``diff`` and ``hydrate``
add their own). On any error nothing is written to stdout. Everything heavier than click
is imported inside the commands, so start-up stays small for the Argo CD plugin. Nothing
outside this package imports it: the commands are thin over :mod:`dyn_gitops.context`.
"""

from __future__ import annotations

import os
import sys

# pydantic scans every installed distribution for plugins on first use (tens of ms on
# every Argo CD refresh); the CLI process uses none.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import click

from .. import __version__
from ..display import internal_error
from ..errors import ExitCode
from . import cmp, diff, explain, hydrate, render, stdin


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dyn-gitops")
def main() -> None:
    """Render NVIDIA Dynamo graphs into the Kubernetes workloads they become."""


for command in (
    render.render,
    render.validate,
    render.settings_cmd,
    hydrate.hydrate,
    diff.diff_cmd,
    explain.explain_cmd,
    stdin.krm,
    stdin.post_render,
    render.crds,
    cmp.cmp,
):
    main.add_command(command)


def entry() -> None:
    """Console-script entry: turn unexpected exceptions into exit code 3, no traceback."""
    try:
        main(standalone_mode=True)
    except SystemExit:
        raise
    except BaseException as exc:
        if os.environ.get("DYN_GITOPS_DEBUG"):
            raise
        click.echo(internal_error(exc), err=True)
        sys.exit(int(ExitCode.INTERNAL))


__all__ = ["entry", "main"]
