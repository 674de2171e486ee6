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
from . import adopt, cmp, diff, explain, hydrate, render, stdin
from .help import PROJECT_URL, Command, Group

PROG = "dyn-gitops"
#: the environment variable the completion scripts set when they ask for completions
COMPLETE_VAR = "_DYN_GITOPS_COMPLETE"


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name=PROG)
def main() -> None:
    """Render NVIDIA Dynamo graphs into the Kubernetes workloads they become."""


main.help = f"{main.help}\n\nDocumentation: {PROJECT_URL}"


@click.command(cls=Command)
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL (commands, options, their choices).

    \b
    bash: dyn-gitops completion bash > ~/.local/share/bash-completion/completions/dyn-gitops
    zsh:  dyn-gitops completion zsh > "${fpath[1]}/_dyn-gitops"
    fish: dyn-gitops completion fish > ~/.config/fish/completions/dyn-gitops.fish
    """
    from click.shell_completion import get_completion_class

    from ..stdio import write_stdout
    from .outcome import reported

    cls = get_completion_class(shell)
    assert cls is not None  # click knows the three shells the choice allows
    with reported():
        write_stdout(cls(main, {}, PROG, COMPLETE_VAR).source())


for command in (
    render.render,
    render.validate,
    render.settings_cmd,
    hydrate.hydrate,
    diff.diff_cmd,
    explain.explain_cmd,
    adopt.adopt,
    stdin.krm,
    stdin.post_render,
    render.crds,
    cmp.cmp,
    completion,
):
    main.add_command(command)


def entry() -> None:
    """Console-script entry: turn unexpected exceptions into exit code 3, no traceback."""
    try:
        main(prog_name=PROG, complete_var=COMPLETE_VAR, standalone_mode=True)
    except SystemExit:
        raise
    except BaseException as exc:
        if os.environ.get("DYN_GITOPS_DEBUG"):
            raise
        click.echo(internal_error(exc), err=True)
        sys.exit(int(ExitCode.INTERNAL))


__all__ = ["entry", "main"]
