"""``adopt --check``: before GitOps takes over what the Dynamo operator created, list what
applying the render would restart, recreate or delete (docs/migration.md).

Exit codes: 0 nothing restarts, is recreated or deleted (handover steps and metadata
changes may remain, listed); 1 invalid input (the render's or the live file's problems);
2 usage; 5 (:attr:`~dyn_gitops.errors.ExitCode.WOULD_DISRUPT`) something would restart, be
recreated or be deleted.
"""

from __future__ import annotations

from typing import Any

import click

from ..display import printable
from ..errors import ExitCode
from ..stdio import write_stdout
from . import report
from .help import Command, Option
from .options import report_option, runner, setting_options, source_options
from .outcome import reported


@click.command("adopt", cls=Command)
@source_options
@click.option(
    "--check",
    is_flag=True,
    required=True,
    cls=Option,
    help="Compare only (adopt applies nothing; required).",
)
@click.option(
    "--live",
    required=True,
    metavar="FILE",
    cls=Option,
    section="input",
    help="The live objects: kubectl get -o yaml output (a List, or one document per object; "
    "- for stdin), with managedFields and ownerReferences (docs/migration.md).",
)
@click.option(
    "--field-manager",
    "applier",
    default="argocd-controller",
    show_default=True,
    metavar="NAME",
    cls=Option,
    help="The field manager the GitOps tool applies with (Flux: kustomize-controller).",
)
@report_option
@setting_options
def adopt(
    path: str,
    rev: str | None,
    verbose: bool,
    check: bool,
    live: str,
    applier: str,
    report_format: str,
    **values: Any,
) -> None:
    """Compare the live objects the Dynamo operator created with the render of PATH (the
    same DGDs), and list what a server-side apply of the render with --force-conflicts
    would do to each: restart (a pod template changes), recreate (an immutable field
    changes), delete (an object of the graph the render does not produce), handover
    (owner references and field managers to move), change (metadata, replicas), create.

    Exit code 0: nothing restarts, is recreated or deleted; 1: invalid input; 2: usage;
    5: something would restart, be recreated or be deleted (docs/migration.md).
    """
    from ..workflows.adoption import run

    with reported("nothing checked"):
        result = run(path, rev, live, runner=runner(values), applier=applier)
    code = ExitCode.WOULD_DISRUPT if result.disruptive else ExitCode.OK
    if report_format != "text":
        report.emit("AdoptionCheck", _data(result), report_format, code)
    lines = [printable(str(f)) for f in result.findings]
    lines.append(_summary(result))
    with reported():
        write_stdout("\n".join(lines) + "\n")
    raise SystemExit(int(code))


def _summary(result: Any) -> str:
    from ..workflows.adoption import EFFECTS

    counts = ", ".join(f"{result.count(e)} {e}" for e in EFFECTS)
    verdict = "would disrupt the graph" if result.disruptive else "no restart, no deletion"
    return f"adopt check: {verdict} ({counts}; {result.unchanged} unchanged)"


def _data(result: Any) -> dict[str, Any]:
    """``adopt --check -o json|yaml``: every finding, the counts, the verdict."""
    from ..workflows.adoption import EFFECTS

    return {
        "disruptive": result.disruptive,
        "counts": {e: result.count(e) for e in EFFECTS},
        "unchanged": result.unchanged,
        "findings": [
            {
                "effect": f.effect,
                "kind": f.kind,
                "namespace": f.namespace or None,
                "name": f.name,
                "message": f.message,
                "fields": list(f.paths),
            }
            for f in result.findings
        ],
    }
