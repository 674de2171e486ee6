"""``dyn-gitops cmp generate``: render the application directory Argo CD unpacked.

One implementation for both paths, in-process and the warm server's forked child: it reads
the environment it is given, writes the YAML stream to stdout in one piece and only on
success, and returns the exit code. Errors go to stderr, which Argo CD shows in the UI
(``file:line: Kind/name: field: message``; never secrets, never a traceback for bad input).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import context, keys
from ..display import count, printable
from ..emit import render_text, size_problem
from ..errors import DynGitopsError, ExitCode, RenderError
from ..settings import RenderSettings, Resolved, SettingsError, resolve
from ..stdio import write_stdout
from . import apicheck, cmpenv

if TYPE_CHECKING:
    from ..pipeline import RenderResult

_WHAT = "nothing rendered"


def _err(line: str) -> None:
    sys.stderr.write(printable(line) + "\n")


def with_destination_namespace(ctx: context.RenderContext, namespace: str) -> context.RenderContext:
    """The destination namespace replaces the registry default, nothing set explicitly."""
    resolved = ctx.resolved
    if not namespace or resolved.origins.get("namespace") != "default":
        return ctx
    return dataclasses.replace(
        ctx,
        resolved=Resolved(
            dataclasses.replace(resolved.settings, namespace=namespace),
            {**resolved.origins, "namespace": "ARGOCD_APP_NAMESPACE"},
        ),
    )


def stamp_source_root(objects: list[dict[str, Any]], source_path: str) -> None:
    """Add the application's repository path to every object we rendered."""
    for obj in objects:
        meta = obj.get("metadata") or {}
        ann = meta.get("annotations")
        if isinstance(ann, dict) and keys.ANN_RENDERER_VERSION in ann:
            ann[keys.ANN_SOURCE_ROOT] = source_path
            meta["annotations"] = dict(sorted(ann.items()))


def _settings_problems(environ: Mapping[str, str]) -> list[str]:
    """The settings problems of the environment alone, to report them in the same run."""
    env = {k: v for k, v in environ.items() if k.startswith(cmpenv.ENV_PREFIXES)}
    try:
        resolve(env=env, env_prefixes=cmpenv.ENV_PREFIXES)
    except SettingsError as exc:
        return exc.problems
    return []


class _Exit(Exception):
    """A step ended the run: what it found is on stderr; ``code`` is the exit code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def run(environ: Mapping[str, str], *, how: str = "in-process") -> int:
    """Render ``.`` with the CMP environment ``environ``; return the exit code."""
    started = time.perf_counter()
    try:
        inputs = _inputs(environ)
        ctx, result = _render(inputs)
        objects = _for_destination(result, inputs)
        _write(_text(objects, ctx.settings))
    except _Exit as exc:
        return exc.code
    ms = (time.perf_counter() - started) * 1000
    graphs = count(result.graphs, "DynamoGraphDeployment")
    _err(
        f"dyn-gitops: {count(len(objects), 'object')} from {graphs} in {ms:.0f} ms ({how}); "
        f"render_ms={ms:.1f}"
    )
    return int(ExitCode.OK)


def _inputs(environ: Mapping[str, str]) -> cmpenv.CmpInputs:
    """The plugin environment read; its problems and the settings' all reported at once."""
    try:
        return cmpenv.read(environ)
    except cmpenv.CmpEnvError as exc:
        for problem in exc.problems + _settings_problems(environ):
            _err(f"dyn-gitops: {problem}")
        raise _Exit(int(ExitCode.USAGE)) from None


def _render(inputs: cmpenv.CmpInputs) -> tuple[context.RenderContext, RenderResult]:
    runner = context.Runner(
        env=inputs.settings_env, env_prefixes=cmpenv.ENV_PREFIXES, parameters=inputs.parameters
    )
    try:
        ctx = with_destination_namespace(context.open_path(".", runner=runner), inputs.namespace)
        if inputs.revision and ctx.source.commit is None:
            ctx.source.commit = inputs.revision  # provenance: dyn-gitops.io/source-commit
        return ctx, context.render(ctx)
    except DynGitopsError as exc:
        for line in exc.lines(_WHAT) if isinstance(exc, RenderError) else exc.lines():
            _err(line)
        raise _Exit(int(exc.exit_code)) from None


def _for_destination(result: RenderResult, inputs: cmpenv.CmpInputs) -> list[dict[str, Any]]:
    """The objects with the application's source root, checked against the destination
    cluster's version and APIs (KUBE_VERSION, KUBE_API_VERSIONS)."""
    for warning in result.warnings:  # rendered anyway, as the operator would
        _err(f"{warning} (warning)")
    objects: list[dict[str, Any]] = result.objects
    if inputs.source_path:
        stamp_source_root(objects, inputs.source_path)
    found = apicheck.problems(
        objects, kube_version=inputs.kube_version, api_versions=inputs.kube_api_versions
    )
    if found:
        for finding in found:
            _err(str(finding))
        n = len(found)
        _err(
            f"dyn-gitops: {n} problem{'s' if n != 1 else ''} with the destination cluster; "
            "nothing rendered"
        )
        raise _Exit(int(ExitCode.INVALID_INPUT))
    return objects


def _text(objects: list[dict[str, Any]], settings: RenderSettings) -> str:
    """The output stream, refused when empty (unless allowed) or over max-output-bytes."""
    text = render_text(objects, settings.output_format)
    if not text.strip() and not settings.allow_empty:  # the pipeline refuses it too
        _err("dyn-gitops: the output is empty; refusing (set allow-empty to permit it)")
        raise _Exit(int(ExitCode.INVALID_INPUT))
    too_big = size_problem(len(text.encode("utf-8")), settings, "<stdout>")  # stamps add
    if too_big is not None:
        _err(str(too_big))
        _err("dyn-gitops: 1 problem found; nothing rendered")
        raise _Exit(int(ExitCode.INVALID_INPUT))
    return text


def _write(text: str) -> None:
    try:
        write_stdout(text)
    except DynGitopsError as exc:  # stdout refused the output
        for line in exc.lines():
            _err(line)
        raise _Exit(int(exc.exit_code)) from None
