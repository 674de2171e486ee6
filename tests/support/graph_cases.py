"""The DGD builder and accessors of the operator's Go graph tests as ported
(tests/test_graph_cases.py, tests/test_upstream_15_features.py): a ``nvidia.com/v1alpha1``
DGD rendered as applied, its Deployments by service, their pod spec, main container, env."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dyn_gitops.errors import RenderError
from support.rendering import AS_APPLIED, renderer

Obj = dict[str, Any]

L_COMPONENT = "nvidia.com/dynamo-component"


def dgd(
    name: str,
    services: dict[str, Obj],
    *,
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace}
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": meta,
        "spec": {**spec, "services": services},
    }


#: ``render(tmp_path, doc, **settings)``: as applied (the Go tests call no webhooks)
render = renderer(**AS_APPLIED)


def render_error(tmp_path: Path, doc: Obj, **settings: Any) -> RenderError:
    with pytest.raises(RenderError) as info:
        render(tmp_path, doc, **settings)
    return info.value


def deployments(objs: list[Obj]) -> dict[str, Obj]:
    """Deployments keyed by service name (label ``nvidia.com/dynamo-component``)."""
    return {o["metadata"]["labels"][L_COMPONENT]: o for o in objs if o["kind"] == "Deployment"}


def pod(dep: Obj) -> Obj:
    spec: Obj = dep["spec"]["template"]["spec"]
    return spec


def main(dep: Obj) -> Obj:
    containers = pod(dep)["containers"]
    assert containers[0]["name"] == "main"
    c: Obj = containers[0]
    return c


def env(container: Obj) -> dict[str, Any]:
    """name -> value (or the valueFrom object); names must be unique."""
    entries = container.get("env") or []
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names)), f"duplicate env names: {names}"
    # an empty value is left out, as Go's omitempty does (operator-output @ 2a6da14c8)
    return {
        e["name"]: {"valueFrom": e["valueFrom"]} if "valueFrom" in e else e.get("value", "")
        for e in entries
    }
