"""``explain``: where each env var, port, probe and volume of a service's pod comes from."""

from __future__ import annotations

from typing import Any

import click

from .. import context
from ..display import printable
from ..stdio import write_stdout
from .options import runner, setting_options
from .outcome import reported


@click.command("explain")
@click.argument("graph", metavar="DGD")
@click.argument("service", metavar="SERVICE")
@click.argument("path", default=".", required=False)
@click.option(
    "--rev", default=None, metavar="REV", help="Read PATH from this Git revision (no checkout)."
)
@setting_options
def explain_cmd(graph: str, service: str, path: str, rev: str | None, **values: Any) -> None:
    """Show where each env var, port, probe, volume and mount of SERVICE's rendered pod
    comes from: a field of the DGD (file:line and path), a setting, or the operator's
    default for its component type. DGD is the graph's metadata.name; PATH as for render.
    """
    from ..workflows.explain import explain, table

    with reported("nothing explained"):
        ctx = context.open_path(path, rev, runner=runner(values))
        text = table(explain(ctx, graph, service))
    with reported():
        write_stdout("\n".join(printable(line) for line in text.splitlines()) + "\n")
