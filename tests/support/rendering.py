"""Render DGDs with the real renderer for the operator tests and the benchmark (the
controller package never imports the render pipeline: ``dyn_gitops_operator.testing``
takes objects already rendered)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]


def render(dgd_docs: list[Obj] | str | Path, namespace: str, **settings: Any) -> list[Obj]:
    """Render DGDs (dicts, or a sample directory) into ``namespace``; ``settings`` are
    render settings by their Python names (``emit_source=False``, ``grove=True``)."""
    from dyn_gitops import context

    # the controller's tests roll placeholder images (img:1, img:broken): no 1.5 admission
    settings = {
        "namespace": namespace,
        "runtime_version_admission": "lenient",
        **settings,
    }
    flags = {k.replace("_", "-"): v for k, v in settings.items()}
    with tempfile.TemporaryDirectory() as tmp:
        if isinstance(dgd_docs, list):
            (Path(tmp) / "graph.yaml").write_text(yaml.safe_dump_all(dgd_docs))
            path = tmp
        else:
            path = str(dgd_docs)
        ctx = context.open_path(path, runner=context.Runner(flags=flags))
        objs = context.render(ctx).objects
    return [{**obj, "metadata": {**obj["metadata"], "namespace": namespace}} for obj in objs]
