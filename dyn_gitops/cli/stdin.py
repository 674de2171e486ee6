"""``krm`` and ``post-render``: the commands that take all their input on stdin (a KRM
ResourceList, or Helm's rendered manifests) and answer on stdout."""

from __future__ import annotations

import sys
from typing import Any

import click

from .. import context
from ..display import printable
from ..errors import ExitCode
from ..stdio import write_stdout
from .help import Command
from .options import runner, setting_options
from .outcome import fail, problem_lines, reported, warn


def _read_stdin(limit: int) -> str:
    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        fail(
            [
                f"dyn-gitops: stdin is more than {limit} bytes (setting max-file-bytes sets "
                "the limit); nothing done"
            ],
            ExitCode.INVALID_INPUT,
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        fail(
            [f"dyn-gitops: stdin is not UTF-8 ({exc.reason} at byte {exc.start})"],
            ExitCode.INVALID_INPUT,
        )


@click.command(cls=Command)
@setting_options
def krm(**values: Any) -> None:
    """Run as a KRM function (kustomize exec plugin, kpt): ResourceList in, ResourceList out.

    Settings come from the functionConfig (ConfigMap data, or spec of any other kind),
    over the environment; flags win. Problems are returned as results, with exit code 1.
    """
    from ..workflows import krm as fn

    run_by = runner(values)
    limits = fn.settings_for_reading(run_by)
    text = _read_stdin(limits.max_file_bytes * fn.STDIN_FACTOR)
    try:
        rl = fn.parse(text, limits)
    except fn.InputError as exc:
        fail([f"dyn-gitops krm: {exc}"], ExitCode.INVALID_INPUT)
    outcome = fn.run(rl, runner=run_by)
    # stderr first: the problems are still told when stdout then turns out to be closed
    if not outcome.ok:
        lines = problem_lines(outcome.problems, "items returned unchanged")
    else:  # on success: warnings (also in results)
        lines = [f"{warning} (warning)" for warning in outcome.problems]
    for line in lines:
        click.echo(printable(line), err=True)
    with reported():
        write_stdout(outcome.text)  # size-checked in fn.run
    if not outcome.ok:
        sys.exit(int(ExitCode.INVALID_INPUT))


@click.command("post-render", cls=Command)
@setting_options
def post_render(**values: Any) -> None:
    """Helm post-renderer: all manifests on stdin, the expanded manifests on stdout.

    Helm 4: `helm install --post-renderer dyn-gitops` with the plugin in charts/helm-plugin;
    Helm 3: `--post-renderer dyn-gitops --post-renderer-args post-render`.
    """
    from ..emit import render_text
    from ..read import Source
    from ..workflows import postrender

    run_by = runner(values)
    with reported():
        limits = run_by.settings().settings
    text = _read_stdin(limits.max_file_bytes)
    files = postrender.split(text)
    with reported():
        ctx = context.open_source(Source(files=files, root=postrender.STDIN), runner=run_by)
        result = context.render(ctx)
        if postrender.HELM_FILENAME in text:  # Helm 4: it files objects by this annotation
            postrender.stamp(result.objects, {f.path for f in files} - {postrender.STDIN})
        out = render_text(
            result.objects, ctx.settings.output_format, max_bytes=ctx.settings.max_output_bytes
        )
        # after every problem of the input and the output: then the namespace it would need
        postrender.require_namespace(
            ctx.source, ctx.settings, ctx.resolved.origins.get("namespace", "default")
        )
        warn(result.warnings)
        write_stdout(out)
