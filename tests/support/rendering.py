"""The one way tests render: :func:`render` in-process (objects), :func:`render_stdout` through
the CLI (in-process or the real entry point in a subprocess; the printed text). Also used by
the benchmark; the controller package never imports the render pipeline
(``dyn_gitops_operator.testing`` takes objects already rendered)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from support.cli import invoke_cli, run_cli

Obj = dict[str, Any]
Source = Path | str | Obj | Sequence[Obj]

#: render a DGD as applied, without the Dynamo 1.5 webhooks: no runtime-version admission
#: (placeholder images such as ``test-image``, ``${VERSION}`` or ``my-tag`` are accepted) and
#: no origin-version stamp. The upstream examples were rendered so by the oracle
#: (conformance/operator-output/README.md), and the operator's Go tests, which many tests
#: port, call its reconcilers without the webhooks. The 1.5 defaults: tests/test_gates.py.
AS_APPLIED: dict[str, str] = {"runtime_version_admission": "lenient", "origin_version": "none"}
#: the same as CLI flags
AS_APPLIED_FLAGS = ("--runtime-version-admission", "lenient", "--origin-version", "none")


def render(
    source: Source,
    applied_to: str | None = None,
    /,
    *,
    tmp: Path | None = None,
    file: str = "dgd.yaml",
    sort_keys: bool | None = None,
    **settings: Any,
) -> list[Obj]:
    """Render in-process; the objects (raises RenderError on bad input).

    ``source``: a path (file or directory) rendered as it is, or documents (one or a list)
    written as YAML to ``tmp/file`` first (a temporary directory without ``tmp``), their keys
    in the given order (``sort_keys``: sorted; the default with ``applied_to``).
    ``settings``: render settings by their Python names (``emit_source=False``,
    ``grove=True``). ``applied_to`` (the controller's tests): the objects as applied to that
    namespace: the ``namespace`` setting, every object's ``metadata.namespace``, and
    runtime-version admission lenient unless given (they roll placeholder images such as
    ``img:1``)."""
    if applied_to is not None:
        settings = {"namespace": applied_to, "runtime_version_admission": "lenient", **settings}
    if isinstance(source, (str, Path)):
        objs = _render_path(source, settings)
    else:
        docs = [source] if isinstance(source, dict) else list(source)
        with tempfile.TemporaryDirectory() as scratch:
            path = (tmp or Path(scratch)) / file
            sort = applied_to is not None if sort_keys is None else sort_keys
            path.write_text(yaml.safe_dump_all(docs, sort_keys=sort))
            objs = _render_path(path, settings)
    if applied_to is None:
        return objs
    return [{**o, "metadata": {**o["metadata"], "namespace": applied_to}} for o in objs]


def _render_path(path: str | Path, settings: dict[str, Any]) -> list[Obj]:
    from dyn_gitops import context

    flags = {k.replace("_", "-"): v for k, v in settings.items()}
    ctx = context.open_path(str(path), runner=context.Runner(flags=flags))
    return context.render(ctx).objects


def renderer(
    *, file: str = "dgd.yaml", sort_keys: bool = False, **defaults: Any
) -> Callable[..., list[Obj]]:
    """A test module's ``render(tmp_path, *docs, **settings)``: :func:`render` of the documents
    written to ``tmp_path/file``, with the module's ``defaults`` updated by ``settings``."""

    def bound(tmp_path: Path, *docs: Obj, **settings: Any) -> list[Obj]:
        merged = {**defaults, **settings}
        return render(list(docs), tmp=tmp_path, file=file, sort_keys=sort_keys, **merged)

    return bound


def render_stdout(*args: str, subprocess: bool = False, quiet: bool = False) -> str:
    """``dyn-gitops render *args`` through the CLI (in-process, or with ``subprocess`` the real
    entry point); its stdout, which must be non-empty after exit 0 (with ``quiet``: and
    nothing on stderr, no warning)."""
    run = run_cli if subprocess else invoke_cli
    res = run("render", *args)
    what = "dyn-gitops render " + " ".join(args)
    assert res.code == 0, f"{what} exited {res.code}:\n{res.stderr}"
    assert res.stdout, f"{what}: empty output"
    if quiet:
        assert res.stderr == "", f"{what}: warnings:\n{res.stderr}"
    return res.stdout
