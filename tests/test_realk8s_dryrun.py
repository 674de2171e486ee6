"""Every golden sample's output is accepted by a real kube-apiserver (server-side apply,
dry-run), with our CRDs installed (``dyn-gitops crds``: the DGD in v1beta1, as emitted); and
the check can fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_cli
from support.controlplane import ensure_namespace
from support.paths import SAMPLES

pytestmark = pytest.mark.realk8s


SAMPLE_INPUTS = sorted(p for p in SAMPLES.glob("*/input") if p.is_dir())


def _dry_run_apply(api_client: Any, obj: dict[str, Any], namespace: str | None) -> None:
    from kubernetes.dynamic import DynamicClient

    dyn = DynamicClient(api_client)
    res = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    ns = obj.get("metadata", {}).get("namespace", namespace) if res.namespaced else None
    dyn.server_side_apply(
        res,
        body=obj,
        name=obj["metadata"]["name"],
        namespace=ns,
        field_manager="dyn-gitops-test",
        force_conflicts=True,
        dry_run="All",
    )


@pytest.mark.parametrize("sample", SAMPLE_INPUTS, ids=lambda p: p.parent.name)
def test_sample_output_accepted_by_real_apiserver(kube: Any, sample: Path) -> None:
    from kubernetes.client.exceptions import ApiException

    result = run_cli("render", str(sample))
    assert result.code == 0, result.stderr
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    assert objects
    rejected = []
    for ns in {o["metadata"].get("namespace") for o in objects} - {None}:
        ensure_namespace(kube, ns)
    for obj in objects:
        try:
            _dry_run_apply(kube, obj, None)
        except ApiException as exc:
            rejected.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.status} {exc.body}")
    assert rejected == [], "\n".join(rejected)


def test_invalid_deployment_is_rejected(kube: Any, namespace: str) -> None:
    """The check can fail: a selector that does not match the pod labels is refused."""
    from kubernetes.client.exceptions import ApiException

    bad = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "bad", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {
                "metadata": {"labels": {"app": "b"}},
                "spec": {"containers": [{"name": "main", "image": "x"}]},
            },
        },
    }
    with pytest.raises(ApiException) as info:
        _dry_run_apply(kube, bad, namespace)
    assert info.value.status == 422
    assert "selector" in info.value.body


def test_invalid_dgd_is_rejected_by_our_crd(kube: Any, namespace: str) -> None:
    """Our generated CRD schema is enforced: a string where replicas wants an integer.

    (A create, not an apply: server-side apply answers a type mismatch with a 500 from its
    typed-patch conversion, whereas create reports the schema violation as a 422.)"""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic import DynamicClient

    bad = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "bad", "namespace": namespace},
        "spec": {"components": [{"name": "Frontend", "type": "frontend", "replicas": "many"}]},
    }
    res = DynamicClient(kube).resources.get(api_version=bad["apiVersion"], kind=bad["kind"])
    with pytest.raises(ApiException) as info:
        res.create(body=bad, namespace=namespace, dry_run="All")
    assert info.value.status == 422
    assert "spec.components[0].replicas" in info.value.body
