"""Options shared by the commands: one flag per setting of the registry, PATH and --rev,
what a directory's read leaves out (``--exclude``, ``-v``), and ``-o`` for a report."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import click

from ..context import Runner
from ..settings import REGISTRY
from .help import Option

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
    # prints a report about the apply
    "adopt": frozenset({"output-format", "max-output-bytes"}),
    # answers with a ResourceList (YAML)
    "krm": frozenset({"output-format"}),
}


#: short flags of settings, the same in every command
SHORT: dict[str, tuple[str, ...]] = {"namespace": ("-n",), "output-format": ("-o", "--output")}
#: the formats of a command's report; its commands take ``-o`` for it (:func:`report_option`)
REPORT_FORMATS = ("text", "json", "yaml")
REPORTING = frozenset({"validate", "settings", "explain", "adopt"})


def setting_options(func: F) -> F:
    """One CLI option per registry entry (so flags cannot drift from the registry), but
    those the command has no use for (:data:`NOT_USED`, keyed by the function's name)."""
    command = func.__name__.removesuffix("_cmd").replace("_", "-")
    unused = NOT_USED.get(command, frozenset())
    for spec in reversed(REGISTRY):
        if spec.name in unused:
            continue
        help_text = f"{spec.help} [env {spec.env_var}; default {spec.default!r}]"
        common: dict[str, Any] = {"default": None, "help": help_text, "cls": Option}
        common["section"] = spec.group
        short = SHORT.get(spec.name, ())
        if command in REPORTING:  # -o is the report's
            short = tuple(s for s in short if s not in ("-o", "--output"))
        names = (*short, spec.cli_flag)
        if spec.kind is bool:
            opt = click.option(f"{spec.cli_flag}/--no-{spec.name}", spec.attr, **common)
        elif spec.choices:
            opt = click.option(*names, spec.attr, type=click.Choice(spec.choices), **common)
        else:
            opt = click.option(*names, spec.attr, type=spec.kind, **common)
        func = opt(func)
    return func


def input_options(func: F) -> F:
    """What a directory's read leaves out: ``--exclude`` (after the ignore file), and
    ``-v`` to list every file left out."""
    func = click.option(
        "-v",
        "--verbose",
        is_flag=True,
        cls=Option,
        section="input",
        help="List every file a directory's read left out, and why, on stderr.",
    )(func)
    return exclude_option(func)


def exclude_option(func: F) -> F:
    return click.option(
        "--exclude",
        "exclude",
        multiple=True,
        metavar="GLOB",
        cls=Option,
        section="input",
        help="Leave out what this pattern matches, relative to PATH (gitignore syntax, as in "
        "PATH/.dyn-gitops-ignore, after its patterns; repeatable).",
    )(func)


def report_option(func: F) -> F:
    """``-o``: the command's report as text (for a person), JSON or YAML (data)."""
    return click.option(
        "-o",
        "--output",
        "report_format",
        type=click.Choice(REPORT_FORMATS),
        default="text",
        cls=Option,
        section="output",
        help="text (the default) for a person; json or yaml: the report as data on stdout, "
        "in the schema docs/cli.md describes.",
    )(func)


def report_skipped(source: Any, verbose: bool) -> None:
    """With ``-v``: each file the read left out, and why."""
    if verbose:
        from ..display import printable

        for rel, why in source.skipped:
            click.echo(printable(f"dyn-gitops: skipped {source.shown(rel)}: {why}"), err=True)


def source_options(func: F) -> F:
    func = click.option(
        "--rev",
        default=None,
        metavar="REV",
        cls=Option,
        section="input",
        help="Read PATH from this Git revision (no checkout).",
    )(func)
    func = input_options(func)
    return click.argument("path", default=".", required=False)(func)


def flags(values: dict[str, Any]) -> dict[str, Any]:
    """The settings given as flags, by setting name (those not given are left out)."""
    return {s.name: values.get(s.attr) for s in REGISTRY if values.get(s.attr) is not None}


def runner(values: dict[str, Any]) -> Runner:
    """The CLI's setting sources: the process environment and the flags."""
    return Runner(
        env=dict(os.environ), flags=flags(values), exclude=tuple(values.get("exclude") or ())
    )
