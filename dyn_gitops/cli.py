"""The ``dyn-gitops`` command line.

Exit codes: 0 ok, 1 invalid input, 2 usage, 3 internal error. On any error nothing is
written to stdout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

# pydantic scans every installed distribution for plugins on first use (tens of ms on
# every Argo CD refresh); the CLI process uses none.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import click

from . import __version__
from .display import printable
from .errors import ExitCode
from .settings import REGISTRY, SettingsError

F = Callable[..., Any]


def _setting_options(func: F) -> F:
    """One CLI option per registry entry (so flags cannot drift from the registry)."""
    for spec in reversed(REGISTRY):
        help_text = f"{spec.help} [env {spec.env_var}; default {spec.default!r}]"
        if spec.kind is bool:
            opt = click.option(f"{spec.cli_flag}/--no-{spec.name}", spec.attr, default=None,
                               help=help_text)
        elif spec.choices:
            opt = click.option(spec.cli_flag, spec.attr, type=click.Choice(spec.choices),
                               default=None, help=help_text)
        else:
            opt = click.option(spec.cli_flag, spec.attr, type=spec.kind, default=None,
                               help=help_text)
        func = opt(func)
    return func


def _source_options(func: F) -> F:
    func = click.option("--rev", default=None, metavar="REV",
                        help="Read PATH from this Git revision (no checkout).")(func)
    return click.argument("path", default=".", required=False)(func)


def _fail(lines: list[str], code: ExitCode) -> NoReturn:
    for line in lines:
        click.echo(printable(line), err=True)
    sys.exit(int(code))


def write_stdout(text: str) -> None:
    """Write the whole output and flush it; a closed pipe or a full disk exits 2 with a short
    message instead of a traceback (or a silent exit 1 from click) at the next flush."""
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.flush()
    except OSError as exc:
        _discard_stdout()
        _fail([f"dyn-gitops: cannot write to stdout: {exc.strerror or exc}; "
               "the output is incomplete"], ExitCode.USAGE)


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit cannot fail again (and
    print 'Exception ignored ... BrokenPipeError')."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # no real file descriptor (tests' captured stdout): nothing to flush at exit


def _flags(values: dict[str, Any]) -> dict[str, Any]:
    return {s.name: values.get(s.attr) for s in REGISTRY if values.get(s.attr) is not None}


def load(path: str, rev: str | None, flag_values: dict[str, Any], *,
         env: dict[str, str] | None = None, env_prefixes: tuple[str, ...] | None = None,
         parameters: dict[str, str] | None = None) -> tuple[Any, Any]:
    """Resolve settings and read the source; errors leave through :func:`_fail`."""
    from . import read as source_mod
    from . import settings as settings_mod

    env = dict(os.environ) if env is None else env
    prefixes = env_prefixes or (settings_mod.ENV_PREFIX,)
    flags = _flags(flag_values)
    try:
        pre = settings_mod.resolve(env=env, env_prefixes=prefixes, parameters=parameters,
                                   flags=flags)
        limit = pre.settings.max_file_bytes
        if rev is not None:
            src = source_mod.read_git(".", rev, path if path != "." else "",
                                      max_file_bytes=limit)
        else:
            src = source_mod.read_path(path, max_file_bytes=limit)
        broken = [p for p in src.problems if p.file == settings_mod.SETTINGS_FILE]
        if broken:
            _fail([str(p) for p in broken]
                  + [f"dyn-gitops: {settings_mod.SETTINGS_FILE} is unusable; nothing done"],
                  ExitCode.INVALID_INPUT)
        resolved = settings_mod.resolve(
            file_values=src.settings_file, env=env, env_prefixes=prefixes,
            parameters=parameters, flags=flags)
    except SettingsError as exc:
        _fail([f"dyn-gitops: {p}" for p in exc.problems], ExitCode.USAGE)
    except (FileNotFoundError, LookupError, NotADirectoryError, PermissionError) as exc:
        _fail([f"dyn-gitops: {exc}"], ExitCode.USAGE)
    return src, resolved


def fail_render(exc: Any) -> NoReturn:
    """Exit 1 with every problem of a :class:`RenderError`."""
    n = len(exc.problems)
    _fail([str(p) for p in exc.problems]
          + [f"dyn-gitops: {n} problem{'s' if n != 1 else ''} found; nothing rendered"],
          ExitCode.INVALID_INPUT)


def run_render(src: Any, resolved: Any) -> Any:
    from .errors import RenderError
    from .pipeline import render

    try:
        result = render(src, resolved.settings)
    except RenderError as exc:
        fail_render(exc)
    for warning in result.warnings:  # rendered anyway, as the operator would
        click.echo(f"{warning} (warning)", err=True)
    return result


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dyn-gitops")
def main() -> None:
    """Render NVIDIA Dynamo graphs into the Kubernetes workloads they become."""


@main.command()
@_source_options
@click.option("--out-dir", default=None, metavar="DIR",
              help="Write one file per object under DIR instead of printing a stream.")
@_setting_options
def render(path: str, rev: str | None, out_dir: str | None, **values: Any) -> None:
    """Render PATH (a directory, a file, or - for stdin) to stdout."""
    from .emit import OutputTooLarge, render_text, write_out_dir
    from .objpath import PathError

    src, resolved = load(path, rev, values)
    result = run_render(src, resolved)
    limit = resolved.settings.max_output_bytes
    if out_dir:
        try:
            written = write_out_dir(result.objects, out_dir, max_bytes=limit)
        except OutputTooLarge as exc:
            fail_render(exc)
        except PathError as exc:  # an object without a file name (only generateName)
            _fail([f"dyn-gitops: {exc}; nothing written"], ExitCode.INVALID_INPUT)
        except (FileExistsError, OSError) as exc:
            _fail([f"dyn-gitops: {exc}"], ExitCode.USAGE)
        click.echo(f"dyn-gitops: wrote {len(written)} objects to {out_dir}", err=True)
        return
    try:
        text = render_text(result.objects, resolved.settings.output_format, max_bytes=limit)
    except OutputTooLarge as exc:
        fail_render(exc)
    write_stdout(text)


@main.command()
@_source_options
@_setting_options
def validate(path: str, rev: str | None, **values: Any) -> None:
    """Check PATH and report every problem; print nothing else."""
    src, resolved = load(path, rev, values)
    result = run_render(src, resolved)
    click.echo(f"dyn-gitops: {len(src.files)} files, {result.graphs} DynamoGraphDeployments, "
               f"{len(result.objects)} objects: valid", err=True)


@main.command("settings")
@_source_options
@_setting_options
def settings_cmd(path: str, rev: str | None, **values: Any) -> None:
    """Print every render setting, its value, and where the value came from."""
    _, resolved = load(path, rev, values)
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
    write_stdout("\n".join(lines) + "\n")


from . import cli_workflows  # noqa: E402, F401  (registers hydrate, diff, krm, post-render)


def entry() -> None:
    """Console-script entry: turn unexpected exceptions into exit code 3, no traceback."""
    try:
        main(standalone_mode=True)
    except SystemExit:
        raise
    except BaseException as exc:
        if os.environ.get("DYN_GITOPS_DEBUG"):
            raise
        click.echo(printable(f"dyn-gitops: internal error: {type(exc).__name__}: {exc} "
                             "(set DYN_GITOPS_DEBUG=1 for a traceback; please report it)"),
                   err=True)
        sys.exit(int(ExitCode.INTERNAL))


@main.command()
@click.option("--json-schema-dir", default=None, metavar="DIR",
              help="Write their schemas as JSON schemas for kubeconform instead, as "
                   "DIR/<group>/<kind>_<version>.json (-schema-location "
                   "'DIR/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json').")
def crds(json_schema_dir: str | None) -> None:
    """Print the CustomResourceDefinitions of the Dynamo kinds (from our own models)."""
    from .crds import crds as make
    from .crds import json_schemas
    from .emit import to_yaml

    if json_schema_dir is None:
        write_stdout(to_yaml(make()))
        return
    import json
    from pathlib import Path

    written = 0
    for rel, schema in sorted(json_schemas().items()):
        target = Path(json_schema_dir) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
        written += 1
    click.echo(f"dyn-gitops: wrote {written} JSON schemas to {json_schema_dir}", err=True)
main.add_command(__import__("dyn_gitops.cmp", fromlist=["cmp"]).cmp)
