"""Options shared by the commands: one flag per setting of the registry, PATH and --rev."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import click

from ..context import Runner
from ..settings import REGISTRY

F = Callable[..., Any]


#: settings a command has no use for, so its --help does not offer them (the command name
#: as click names it -> setting names). A setting left out still works in the environment
#: and dyn-gitops.yaml, where it is simply not used by that command.
NOT_USED: dict[str, frozenset[str]] = {
    # prints nothing but the problems
    "validate": frozenset({"output-format", "max-output-bytes"}),
    # compares objects: prints a report, an empty side is a state like any other
    "diff": frozenset({"output-format", "allow-empty", "max-output-bytes"}),
    # writes one YAML file per object
    "hydrate": frozenset({"output-format"}),
    # prints a table about one pod
    "explain": frozenset({"output-format", "max-output-bytes"}),
    # answers with a ResourceList (YAML)
    "krm": frozenset({"output-format"}),
}


def setting_options(func: F) -> F:
    """One CLI option per registry entry (so flags cannot drift from the registry), but
    those the command has no use for (:data:`NOT_USED`, keyed by the function's name)."""
    command = func.__name__.removesuffix("_cmd").replace("_", "-")
    unused = NOT_USED.get(command, frozenset())
    for spec in reversed(REGISTRY):
        if spec.name in unused:
            continue
        help_text = f"{spec.help} [env {spec.env_var}; default {spec.default!r}]"
        if spec.kind is bool:
            opt = click.option(
                f"{spec.cli_flag}/--no-{spec.name}", spec.attr, default=None, help=help_text
            )
        elif spec.choices:
            opt = click.option(
                spec.cli_flag,
                spec.attr,
                type=click.Choice(spec.choices),
                default=None,
                help=help_text,
            )
        else:
            opt = click.option(
                spec.cli_flag, spec.attr, type=spec.kind, default=None, help=help_text
            )
        func = opt(func)
    return func


def source_options(func: F) -> F:
    func = click.option(
        "--rev", default=None, metavar="REV", help="Read PATH from this Git revision (no checkout)."
    )(func)
    return click.argument("path", default=".", required=False)(func)


def flags(values: dict[str, Any]) -> dict[str, Any]:
    """The settings given as flags, by setting name (those not given are left out)."""
    return {s.name: values.get(s.attr) for s in REGISTRY if values.get(s.attr) is not None}


def runner(values: dict[str, Any]) -> Runner:
    """The CLI's setting sources: the process environment and the flags."""
    return Runner(env=dict(os.environ), flags=flags(values))
