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
    from dyn_gitops import settings as settings_mod
    from dyn_gitops.pipeline import render as render_pipeline
    from dyn_gitops.source import read_path

    flags = {k.replace("_", "-"): v for k, v in {"namespace": namespace, **settings}.items()}
    with tempfile.TemporaryDirectory() as tmp:
        if isinstance(dgd_docs, list):
            (Path(tmp) / "graph.yaml").write_text(yaml.safe_dump_all(dgd_docs))
            path = tmp
        else:
            path = str(dgd_docs)
        pre = settings_mod.resolve(flags=flags)
        src = read_path(path, max_file_bytes=pre.settings.max_file_bytes)
        resolved = settings_mod.resolve(file_values=src.settings_file, flags=flags)
        objs = render_pipeline(src, resolved.settings).objects
    return [{**obj, "metadata": {**obj["metadata"], "namespace": namespace}} for obj in objs]
