"""Single-node parity with the Dynamo operator's own output (issue 13): each test asserts one
behaviour ported from the operator at upstream commit ``2a6da14c8`` (the code that made
``../shared/conformance/operator-output``) and names its source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import render_objects

Obj = dict[str, Any]

IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0"
SETTINGS = {"discovery_backend": "kubernetes", "planner_rbac": True, "namespace": "default"}


def dgd(services: dict[str, Obj], name: str = "g", **spec: Any) -> Obj:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name},
        "spec": {"services": services, **spec},
    }


def frontend(**extra: Any) -> Obj:
    return {
        "componentType": "frontend",
        "replicas": 1,
        "extraPodSpec": {"mainContainer": {"image": IMAGE}},
        **extra,
    }


def worker(**extra: Any) -> Obj:
    return {
        "componentType": "worker",
        "replicas": 1,
        "extraPodSpec": {
            "mainContainer": {
                "image": IMAGE,
                "command": ["python3", "-m", "dynamo.vllm"],
                "args": ["--model", "Qwen/Qwen3-0.6B"],
            }
        },
        **extra,
    }


def render(tmp_path: Path, doc: Obj, **settings: Any) -> list[Obj]:
    path = tmp_path / "dgd.yaml"
    path.write_text(yaml.safe_dump(doc))
    return render_objects(path, **{**SETTINGS, **settings})


def find(objs: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [(o["kind"], o["metadata"]["name"]) for o in objs])
    return found[0]


def by_kind(objs: list[Obj], kind: str, contains: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and contains in o["metadata"]["name"]]
    assert len(found) == 1, (kind, contains)
    return found[0]


def main_container(deployment: Obj) -> Obj:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "main")


def env_of(container: Obj) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


# --- RBAC ---------------------------------------------------------------------------------


def test_discovery_rbac_labelled_with_service_account_name(tmp_path: Path) -> None:
    """``internal/discovery/resource.go`` @ 2a6da14c8 and ERRATA 5: the discovery
    ServiceAccount, Role and RoleBinding share ``app.kubernetes.io/name`` = the SA's name
    and carry no graph label."""
    objs = render(tmp_path, dgd({"Frontend": frontend()}))
    sa = "g-k8s-service-discovery"
    for kind, name in (("ServiceAccount", sa), ("Role", f"{sa}-role"), ("RoleBinding", f"{sa}-binding")):
        assert find(objs, kind, name)["metadata"]["labels"] == {
            "app.kubernetes.io/component": "rbac",
            "app.kubernetes.io/managed-by": "dynamo-operator",
            "app.kubernetes.io/name": sa,
        }


def test_discovery_rbac_label_capped_at_63_characters(tmp_path: Path) -> None:
    """#11709 (``getK8sDiscoveryLabelValue``, ``internal/discovery/resource.go`` @
    2a6da14c8): a ServiceAccount name over 63 characters is cut to 54, ``-`` and the first
    8 hex characters of its SHA-256."""
    import hashlib

    name = "a" * 50
    objs = render(tmp_path, dgd({"Frontend": frontend()}, name=name))
    sa = f"{name}-k8s-service-discovery"
    expected = f"{sa[:54]}-{hashlib.sha256(sa.encode()).hexdigest()[:8]}"
    assert len(expected) == 63
    for kind, obj in (("ServiceAccount", sa), ("Role", f"{sa}-role")):
        assert find(objs, kind, obj)["metadata"]["labels"]["app.kubernetes.io/name"] == expected


def test_planner_role_binding_labelled_with_service_account_name(tmp_path: Path) -> None:
    """``internal/rbac/manager.go`` @ 2a6da14c8 (``EnsureServiceAccountWithRBAC``) and
    ERRATA 5: the planner RoleBinding's ``app.kubernetes.io/name`` is the SA's name."""
    objs = render(tmp_path, dgd({"Frontend": frontend()}))
    rb = find(objs, "RoleBinding", "planner-serviceaccount-binding")
    assert rb["metadata"]["labels"]["app.kubernetes.io/name"] == "planner-serviceaccount"
