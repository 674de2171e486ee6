"""A DGD emitted in ``nvidia.com/v1alpha1`` (setting ``source-api-version: v1alpha1``) has the
sparse wire shape the 1.5 operator returns through its v1alpha1 API (#14338, cherry-picked
into 1.5.0 as #14346; issue #14337).

At 2a6da14c8 the hub-to-spoke conversion rebuilt native container structs and Go's encoder
wrote their zero values: a ``mainContainer`` gained ``name: ""`` and ``resources: {}``, and
regular, init and ephemeral containers ``resources: {}``. #14338 adds
``api/v1alpha1/marshal.go``, a ``MarshalJSON`` normalizer on the v1alpha1 root objects that
omits those conversion-generated fields, keeps non-empty resource requirements, keeps
int64 values exact (no float round trip) and, like ``api/v1beta1/marshal.go`` since #12432,
keeps the top-level ``metadata`` envelope. The normalizer runs on the object's JSON, not on
the ``nvidia.com/dgd-spec`` annotation string, so that payload keeps the 2a6da14c8 bytes
(``tests/test_emit_v1beta1.py``).

dyn-gitops builds the v1alpha1 document from data, not from Go structs, so it never wrote
those fields: these tests pin the 1.5 shape (they pass on 2a6da14c8-era main as well).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.rendering import AS_APPLIED, renderer

Obj = dict[str, Any]
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1"
#: above 2**53: a float64 round trip would change it
BIG = 2**53 + 1

render = renderer(file="in.yaml", **AS_APPLIED)


def beta_dgd() -> Obj:
    frontend = {
        "name": "Frontend",
        "type": "frontend",
        "podTemplate": {
            "spec": {
                "initContainers": [{"name": "init", "image": "busybox"}],
                "containers": [
                    {"name": "main", "image": IMAGE},
                    {"name": "side", "image": "busybox"},
                ],
            }
        },
    }
    main = {
        "name": "main",
        "image": IMAGE,
        "command": ["python3"],
        "args": ["-m", "dynamo.vllm"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    worker = {
        "name": "VllmWorker",
        "type": "worker",
        "podTemplate": {"spec": {"terminationGracePeriodSeconds": BIG, "containers": [main]}},
    }
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g", "namespace": "ns"},
        "spec": {"components": [frontend, worker]},
    }


def emitted_alpha(tmp_path: Path) -> Obj:
    objs = render(tmp_path, beta_dgd(), source_api_version="v1alpha1")
    [dgd] = [o for o in objs if o["kind"] == "DynamoGraphDeployment"]
    assert dgd["apiVersion"] == "nvidia.com/v1alpha1"
    return dgd


def test_no_conversion_generated_container_fields(tmp_path: Path) -> None:
    """#14338 (``api/v1alpha1/marshal.go``): no ``mainContainer.name: ""`` and no empty
    ``resources`` on the main, regular or init containers; the metadata envelope kept."""
    dgd = emitted_alpha(tmp_path)
    assert dgd["metadata"]["name"] == "g"
    eps = dgd["spec"]["services"]["Frontend"]["extraPodSpec"]
    assert eps["mainContainer"] == {"image": IMAGE}
    for container in [*eps["containers"], *eps["initContainers"]]:
        assert "resources" not in container, container


def test_non_empty_resources_and_large_integers_are_kept(tmp_path: Path) -> None:
    """#14338 keeps non-empty resource requirements (the GPU limit becomes the v1alpha1
    ``resources.limits.gpu``) and int64 values beyond 2**53 exactly."""
    svc = emitted_alpha(tmp_path)["spec"]["services"]["VllmWorker"]
    assert svc["resources"] == {"limits": {"gpu": "1"}}
    assert "resources" not in svc["extraPodSpec"]["mainContainer"]
    assert svc["extraPodSpec"]["terminationGracePeriodSeconds"] == BIG
