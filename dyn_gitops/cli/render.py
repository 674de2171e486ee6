"""``render``, ``validate``, ``settings`` and ``crds``: the commands on a path."""

from __future__ import annotations

from typing import Any

import click

from .. import context, lifetime
from ..display import count, printable
from ..errors import DynGitopsError, ExitCode
from ..settings import REGISTRY
from ..stdio import write_stdout
from . import report
from .help import Command, Option
from .options import (
    report_option,
    report_skipped,
    runner,
    setting_options,
    source_options,
)
from .outcome import fail, reported, warn


@click.command(cls=Command)
@source_options
@click.option(
    "--out-dir",
    default=None,
    metavar="DIR",
    cls=Option,
    section="output",
    help="Write one file per object under DIR instead of printing a stream.",
)
@setting_options
def render(path: str, rev: str | None, out_dir: str | None, verbose: bool, **values: Any) -> None:
    """Render PATH (a directory, a file, or - for stdin) to stdout.

    A directory's kustomization files and Helm charts are left out unless they hold a
    Kubernetes object, and so is what PATH/.dyn-gitops-ignore or --exclude excludes
    (docs/cli.md).
    """
    from ..emit import render_text, write_out_dir
    from ..objpath import PathError

    with reported():
        ctx = context.open_path(path, rev, runner=runner(values))
        report_skipped(ctx.source, verbose)
        result = context.render(ctx)
        lifetime.keep(ctx, result)  # freed with a one-shot process, not object by object
        warn(result.warnings)
        limit = ctx.settings.max_output_bytes
        if out_dir:
            try:
                written = write_out_dir(result.objects, out_dir, max_bytes=limit)
            except PathError as exc:  # an object without a file name (only generateName)
                fail([f"dyn-gitops: {exc}; nothing written"], ExitCode.INVALID_INPUT)
            except (FileExistsError, OSError) as exc:
                fail([f"dyn-gitops: {exc}"], ExitCode.USAGE)
            click.echo(f"dyn-gitops: wrote {count(len(written), 'object')} to {out_dir}", err=True)
            return
        text = render_text(result.objects, ctx.settings.output_format, max_bytes=limit)
        lifetime.keep(text)
        write_stdout(text)


@click.command(cls=Command)
@source_options
@report_option
@setting_options
def validate(path: str, rev: str | None, verbose: bool, report_format: str, **values: Any) -> None:
    """Check PATH and report every problem; print nothing else (with -o json or yaml: the
    problems as data on stdout, whatever the outcome; docs/cli.md)."""
    if report_format != "text":
        _validate_data(path, rev, report_format, values)
    with reported():
        ctx = context.open_path(path, rev, runner=runner(values))
        report_skipped(ctx.source, verbose)
        result = context.render(ctx)
    warn(result.warnings)
    click.echo(
        f"dyn-gitops: {count(len(ctx.source.files), 'file')}, "
        f"{count(result.graphs, 'DynamoGraphDeployment')}, "
        f"{count(len(result.objects), 'object')}: valid",
        err=True,
    )


def _validate_data(path: str, rev: str | None, fmt: str, values: dict[str, Any]) -> None:
    """``validate -o json|yaml``: the report on stdout, the exit code as in text."""
    body: dict[str, Any] = {"valid": False, "files": None, "graphs": None, "objects": None}
    try:
        ctx = context.open_path(path, rev, runner=runner(values))
        src = ctx.source
        body["skipped"] = [{"path": src.shown(p), "reason": why} for p, why in src.skipped]
        result = context.render(ctx)
    except DynGitopsError as exc:
        body.setdefault("skipped", [])
        body["problems"] = report.error_problems(exc)
        report.emit("ValidationReport", body, fmt, exc.exit_code)
    body.update(
        valid=True,
        files=len(ctx.source.files),
        graphs=result.graphs,
        objects=len(result.objects),
        problems=[report.problem(w) for w in result.warnings],
    )
    report.emit("ValidationReport", body, fmt)


@click.command("settings", cls=Command)
@source_options
@report_option
@setting_options
def settings_cmd(
    path: str, rev: str | None, verbose: bool, report_format: str, **values: Any
) -> None:
    """Print every render setting, its value, and where the value came from."""
    with reported():
        ctx = context.open_path(path, rev, runner=runner(values))
        report_skipped(ctx.source, verbose)
    resolved = ctx.resolved
    if report_format != "text":
        rows_data = [
            {
                "name": spec.name,
                "value": getattr(resolved.settings, spec.attr),
                "from": resolved.origins[spec.name],
            }
            for spec in REGISTRY
        ]
        report.emit("Settings", {"settings": rows_data}, report_format)
    rows = []
    for spec in REGISTRY:
        value = getattr(resolved.settings, spec.attr)
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        rows.append((spec.name, shown or '""', resolved.origins[spec.name]))
    rows = [(name, printable(value), printable(origin)) for name, value, origin in rows]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines = [f"{'SETTING':<{w0}}  {'VALUE':<{w1}}  FROM"]
    lines += [f"{name:<{w0}}  {value:<{w1}}  {origin}" for name, value, origin in rows]
    with reported():
        write_stdout("\n".join(lines) + "\n")


@click.command(cls=Command)
@click.option(
    "--json-schema-dir",
    default=None,
    metavar="DIR",
    help="Write their schemas as JSON schemas for kubeconform instead, as "
    "DIR/<group>/<kind>_<version>.json (-schema-location "
    "'DIR/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json').",
)
@click.option(
    "--dgd-version",
    type=click.Choice(["v1beta1", "v1alpha1"]),
    default="v1beta1",
    show_default=True,
    help="The one version DynamoGraphDeployment and DynamoComponentDeployment are served and "
    "stored in (there is no conversion webhook, so never both): v1beta1, or v1alpha1 to go "
    "with the setting source-api-version v1alpha1.",
)
def crds(json_schema_dir: str | None, dgd_version: str) -> None:
    """Print the CustomResourceDefinitions of the Dynamo kinds (from our own models)."""
    from ..crds import crds as make
    from ..crds import json_schemas
    from ..emit import to_yaml

    if json_schema_dir is None:
        with reported():
            write_stdout(to_yaml(make(dgd_version)))
        return
    import json
    from pathlib import Path

    written = 0
    for rel, schema in sorted(json_schemas(dgd_version).items()):
        target = Path(json_schema_dir) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
        written += 1
    click.echo(f"dyn-gitops: wrote {count(written, 'JSON schema')} to {json_schema_dir}", err=True)
