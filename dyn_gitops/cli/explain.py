"""``explain``: where each env var, port, probe and volume of a service's pod comes from."""

from __future__ import annotations

from typing import Any

import click

from .. import context
from ..display import printable
from ..stdio import write_stdout
from . import report
from .help import Command
from .options import report_option, report_skipped, runner, setting_options, source_options
from .outcome import reported


@click.command("explain", cls=Command)
@click.argument("graph", metavar="DGD")
@click.argument("service", metavar="SERVICE")
@source_options
@report_option
@setting_options
def explain_cmd(
    graph: str,
    service: str,
    path: str,
    rev: str | None,
    verbose: bool,
    report_format: str,
    **values: Any,
) -> None:
    """Show where each env var, port, probe, volume and mount of SERVICE's rendered pod
    comes from: a field of the DGD (file:line and path), a setting, or the operator's
    default for its component type. DGD is the graph's metadata.name; PATH as for render.
    """
    from ..workflows.explain import explain, table

    with reported("nothing explained"):
        ctx = context.open_path(path, rev, runner=runner(values))
        report_skipped(ctx.source, verbose)
        found = explain(ctx, graph, service)
    if report_format != "text":
        report.emit("Explanation", _data(found), report_format)
    text = table(found)
    with reported():
        write_stdout("\n".join(printable(line) for line in text.splitlines()) + "\n")


def _data(e: Any) -> dict[str, Any]:
    """``explain -o json|yaml``: the rows of the table as data."""
    items = [
        {
            "workload": r.workload,
            "container": r.container or None,
            "item": r.what,
            "name": r.name,
            "from": r.origin,
        }
        for r in e.rows
    ]
    return {
        "graph": e.graph,
        "service": e.service,
        "componentType": e.component_type or None,
        "items": items,
    }
