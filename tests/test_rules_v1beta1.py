"""The validation rules, admission and coexistence read the DGD's v1beta1 form, as the Dynamo
1.5 webhooks do (they run on v1beta1, the hub and storage version:
``internal/webhook/validation/shared_v1beta1.go`` @ 2a6da14c8): a v1alpha1 DGD is converted
**up** once (``hubform.of_v1alpha1``, the form the expansion reads too), and each problem
names the field the user wrote: a v1beta1 DGD's path as is, a v1alpha1 DGD's v1alpha1 path
(``hubform.Graph.written_path``, through ``convert.loc_in_v1alpha1``)."""

from __future__ import annotations

import ast
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.hubforms import form_of, stored_v1beta1
from support.rendering import render

from dyn_gitops import admission, coexistence, keys, kvtransfer, rules
from dyn_gitops.errors import RenderError
from dyn_gitops.models import v1alpha1
from dyn_gitops.models.convert import loc_in_v1alpha1
from dyn_gitops.workerhash import hub

Obj = dict[str, Any]
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1"

BASE: Obj = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoGraphDeployment",
    "metadata": {"name": "g"},
    "spec": {
        "services": {
            "Worker": {
                "componentType": "worker",
                "subComponentType": "prefill",
                "replicas": 1,
                "resources": {"limits": {"gpu": "1"}},
                "extraPodSpec": {
                    "mainContainer": {"image": IMAGE, "command": ["python3", "-m", "dynamo.vllm"]}
                },
            },
            "Frontend": {
                "componentType": "frontend",
                "extraPodSpec": {"mainContainer": {"image": IMAGE}},
            },
        }
    },
}


def _problems(tmp_path: Path, doc: Obj, name: str, **settings: Any) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(RenderError) as exc:
        render(path, **settings)
    return str(exc.value)


def _twin(doc: Obj) -> Obj:
    """The v1beta1 DGD the operator stores for the v1alpha1 ``doc`` (without the conversion
    annotation that keeps its v1alpha1-only fields, which a v1beta1 DGD in Git may not
    carry)."""
    out = stored_v1beta1(doc)
    out["metadata"].get("annotations", {}).pop(keys.ANN_DGD_SPEC, None)
    return out


#: (what is written on the service Worker, the message, the v1alpha1 path, the v1beta1 path;
#: Worker is spec.components[1] in v1beta1: the conversion sorts the services by name)
CASES: list[tuple[str, Obj, str, str, str]] = [
    (
        "override",
        {"runtimeVersionOverride": "v1.5"},
        "must be the Dynamo runtime version as MAJOR.MINOR.PATCH",
        "spec.services.Worker.runtimeVersionOverride",
        "spec.components[1].runtimeVersionOverride",
    ),
    (
        "min-available",
        {"minAvailable": -1},
        "must be >= 0, found -1",
        "spec.services.Worker.minAvailable",
        "spec.components[1].minAvailable",
    ),
    (
        "gms-gpu",
        {"gpuMemoryService": {"enabled": True}, "resources": None},
        "the GPU memory service needs a GPU count >= 1",
        "spec.services.Worker.gpuMemoryService",
        "spec.components[1].experimental.gpuMemoryService",
    ),
    (
        "failover",
        {"failover": {"enabled": True}},
        "failover requires gpuMemoryService.enabled",
        "spec.services.Worker.failover",
        "spec.components[1].experimental.failover",
    ),
    (
        "checkpoint",
        {"checkpoint": {"enabled": True, "checkpointRef": "ck", "job": {}}},
        "cannot be set when checkpointRef is specified",
        "spec.services.Worker.checkpoint.job",
        "spec.components[1].experimental.checkpoint.job",
    ),
    (
        "topology",
        {"topologyConstraint": {"packDomain": "Rack"}},
        "must match",
        "spec.services.Worker.topologyConstraint.packDomain",
        "spec.components[1].topologyConstraint.packDomain",
    ),
    (
        "image",
        {"extraPodSpec": {"mainContainer": {"command": ["python3", "-m", "dynamo.vllm"]}}},
        "is required: Dynamo 1.5 admission needs a main-container image",
        "spec.services.Worker.extraPodSpec.mainContainer.image",
        "spec.components[1].podTemplate.spec.containers[0].image",
    ),
]


def _with(service: Obj) -> Obj:
    doc = copy.deepcopy(BASE)
    worker = doc["spec"]["services"]["Worker"]
    for key, value in service.items():
        if value is None:
            worker.pop(key, None)
        else:
            worker[key] = value
    if "topologyConstraint" in service:
        doc["spec"]["topologyConstraint"] = {"topologyProfile": "p"}
    return doc


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_a_rule_names_the_field_the_user_wrote_in_either_version(
    tmp_path: Path, case: tuple[str, Obj, str, str, str]
) -> None:
    """The same rule, read on the v1beta1 form, says the same thing for a v1alpha1 DGD and
    for its v1beta1 twin, each at the path written in that file."""
    _, service, message, alpha_path, beta_path = case
    alpha = _with(service)
    text = _problems(tmp_path, alpha, "alpha")
    assert f"{alpha_path}: {message}" in text, text
    text = _problems(tmp_path, _twin(alpha), "beta")
    assert f"{beta_path}: {message}" in text, text


def test_limits_and_coexistence_read_the_v1beta1_form(tmp_path: Path) -> None:
    """The runner's replica ceiling and the nvidia-objects omit refusal of a scaling adapter
    (a v1alpha1 ``scalingAdapter.enabled: false`` converts to no adapter)."""
    alpha = _with({"replicas": 7, "scalingAdapter": {"enabled": True}})
    for doc, where in ((alpha, "spec.services.Worker"), (_twin(alpha), "spec.components[1]")):
        text = _problems(tmp_path, doc, "limits", max_replicas=5)
        assert f"{where}.replicas: 7 is more than the 5 replicas" in text, text
        text = _problems(tmp_path, doc, "omit", nvidia_objects="omit")
        assert f"{where}.scalingAdapter: renders a nvidia.com" in text, text
    off = _with({"scalingAdapter": {"enabled": False}})
    (tmp_path / "off.yaml").write_text(yaml.safe_dump(off))
    assert render(tmp_path / "off.yaml", nvidia_objects="omit")


def test_v1alpha1_only_fields_are_checked_as_written(tmp_path: Path) -> None:
    """What v1beta1 has no field for (a service's ingress, sharedMemory's disabled + size,
    volumeMounts, annotations, autoscaling; the graph's pvcs) is checked on the v1alpha1
    document as written."""
    doc = _with(
        {
            "ingress": {"enabled": True},
            "sharedMemory": {"disabled": True, "size": "1Gi"},
            "volumeMounts": [{"name": "v"}],
            "annotations": {
                keys.ANN_KUBE_DISCOVERY_MODE: "x",
                keys.ANN_VLLM_EXECUTOR_BACKEND: "k8s",
            },
            "autoscaling": {"maxReplicas": 9},
        }
    )
    doc["spec"]["pvcs"] = [{"create": True, "name": "p"}]
    text = _problems(tmp_path, doc, "alpha-only", max_replicas=5)
    for expected in (
        "spec.services.Worker.ingress.host: ingress.host is required when ingress is enabled",
        "spec.services.Worker.sharedMemory: size cannot be set when disabled is true",
        "spec.services.Worker.volumeMounts[0].mountPoint: mountPoint is required",
        f"spec.services.Worker.annotations.{keys.ANN_VLLM_EXECUTOR_BACKEND}: must be 'mp' or",
        "spec.services.Worker.autoscaling.maxReplicas: 9 is more than the 5 replicas",
        "spec.pvcs[0].storageClass: required when create is true",
    ):
        assert expected in text, text
    # service-level: the discovery mode is a DGD annotation only
    assert f"annotations.{keys.ANN_KUBE_DISCOVERY_MODE}" not in text


def test_v1beta1_roles_rules(tmp_path: Path) -> None:
    """A rule only v1beta1 can trip: explicit roles (``validateComponentRoles``, #14419). (A
    container named sidecar-frontend besides the one ``frontendSidecar`` names is admitted:
    ``tests/test_pod_template.py``.)"""
    beta = _twin(BASE)
    worker = beta["spec"]["components"][1]
    worker["roles"] = [{"name": "leader"}]
    text = _problems(tmp_path, beta, "beta-only")
    assert "spec.components[1].roles: roles are supported only for component shapes" in text


def test_loc_in_v1alpha1_reverses_the_conversion() -> None:
    """Each v1beta1 field the rules name -> the v1alpha1 field the conversion made it from."""
    doc = copy.deepcopy(BASE)
    doc["spec"]["services"]["Frontend"]["extraPodSpec"]["containers"] = [
        {"name": "main", "image": IMAGE},  # dropped by the conversion: main is mainContainer
        {"name": "helper", "image": IMAGE},
    ]
    doc["spec"]["services"]["Frontend"]["frontendSidecar"] = {"image": IMAGE}
    dgd = v1alpha1.DynamoGraphDeployment.model_validate(doc)
    to = loc_in_v1alpha1(dgd)
    beta = [c.spec for c in hub.converted(doc["spec"].get("services") or {})]
    assert [
        c["podTemplate"]["spec"]["containers"][k]["name"] for c, k in [(beta[0], 1), (beta[0], 2)]
    ] == [
        "helper",
        "sidecar-frontend",
    ]
    fe: tuple[Any, ...] = ("spec", "components", 0)
    wk: tuple[Any, ...] = ("spec", "components", 1)
    table = {
        ("spec", "components"): ("spec", "services"),
        fe: ("spec", "services", "Frontend"),
        (*wk, "type"): ("spec", "services", "Worker", "componentType"),
        (*wk, "replicas"): ("spec", "services", "Worker", "replicas"),
        (*wk, "sharedMemorySize"): ("spec", "services", "Worker", "sharedMemory"),
        (*wk, "experimental", "failover", "mode"): (
            "spec",
            "services",
            "Worker",
            "failover",
            "mode",
        ),
        (*wk, "podTemplate", "metadata", "annotations", "a"): (
            "spec",
            "services",
            "Worker",
            "extraPodMetadata",
            "annotations",
            "a",
        ),
        (*wk, "podTemplate", "spec", "containers", 0, "image"): (
            "spec",
            "services",
            "Worker",
            "extraPodSpec",
            "mainContainer",
            "image",
        ),
        (*fe, "podTemplate", "spec", "containers", 1, "name"): (
            "spec",
            "services",
            "Frontend",
            "extraPodSpec",
            "containers",
            1,
            "name",
        ),
        (*fe, "podTemplate", "spec", "containers", 2, "image"): (
            "spec",
            "services",
            "Frontend",
            "frontendSidecar",
            "image",
        ),
        (*fe, "podTemplate", "spec", "nodeSelector"): (
            "spec",
            "services",
            "Frontend",
            "extraPodSpec",
            "nodeSelector",
        ),
        ("spec", "env", 0): ("spec", "envs", 0),
        ("spec", "topologyConstraint", "clusterTopologyName"): (
            "spec",
            "topologyConstraint",
            "topologyProfile",
        ),
        ("metadata", "annotations", "x"): ("metadata", "annotations", "x"),
    }
    assert {k: to(k) for k in table} == table


# ------------------------------------------------------------ which model the checks read
DYN = Path(rules.__file__).parent
#: the functions of rules.py that read the v1alpha1 document as written (fields v1beta1 has
#: no home for); every other rule reads the v1beta1 form
#: preserved_problems: the fields a v1alpha1 spec keeps beside its v1beta1 form (a v1alpha1
#: DGD as written, or the nvidia.com/dgd-spec payload of a v1beta1 one)
ALPHA_AS_WRITTEN = {"alpha_checks", "alpha_limit_checks", "alpha_warnings", "preserved_problems"}


def test_rules_read_the_v1beta1_form() -> None:
    """In rules.py only the named v1alpha1-as-written checks read a v1alpha1 service;
    admission, coexistence and kvtransfer import no v1alpha1 model at all."""
    tree = ast.parse((DYN / "rules.py").read_text())
    readers = {
        fn.name
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef)
        for node in ast.walk(fn)
        if isinstance(node, ast.Attribute) and node.attr in ("services", "alpha")
    }
    assert readers <= ALPHA_AS_WRITTEN, readers - ALPHA_AS_WRITTEN
    for module in (admission, coexistence, kvtransfer):
        imported = [
            node.module or ""
            for node in ast.walk(ast.parse(Path(str(module.__file__)).read_text()))
            if isinstance(node, ast.ImportFrom)
        ]
        assert not [m for m in imported if "v1alpha1" in m], (module, imported)


def _gms_problems(doc: Obj) -> list[tuple[Any, ...]]:
    graph = form_of(doc)
    return [
        (graph.written_path(p.path), p.message)
        for p in rules.validate_graph(graph)
        if "GPU count" in p.message
    ]


def test_gms_gpu_count_is_read_from_container_main() -> None:
    """The webhook validates the v1beta1 object, so the GMS GPU count is container
    ``main``'s ``nvidia.com/gpu`` limit, else its request (``validateGPUMemoryServiceSpec``
    in ``internal/webhook/validation/shared_v1beta1.go`` reads
    ``dynamo.GetMainContainerResources`` through ``dra.ExtractGPUCountFromResourceRequirements``,
    limits then requests, @ 2a6da14c8). A v1alpha1 service's ``resources.limits.gpu``
    converts into it, and a GPU only ``mainContainer.resources`` gives counts too."""
    doc = _with({"gpuMemoryService": {"enabled": True}, "resources": None})
    assert _gms_problems(doc) == [
        (
            ("spec", "services", "Worker", "gpuMemoryService"),
            "the GPU memory service needs a GPU count >= 1 "
            "(resources.limits.gpu, else resources.requests.gpu)",
        )
    ]
    main = doc["spec"]["services"]["Worker"]["extraPodSpec"]["mainContainer"]
    main["resources"] = {"requests": {"nvidia.com/gpu": "2"}}
    assert _gms_problems(doc) == []
    doc["spec"]["services"]["Worker"]["resources"] = {"requests": {"gpu": "1"}}
    main.pop("resources")
    assert _gms_problems(doc) == []


def _warnings(tmp_path: Path, doc: Obj, name: str) -> str:
    from dyn_gitops import context

    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    ctx = context.open_path(str(path), runner=context.Runner(flags={}))
    return "\n".join(str(p) for p in context.render(ctx).warnings)


def test_warnings_name_the_field_written_in_either_version(tmp_path: Path) -> None:
    """``warn_graph`` on the v1beta1 form: a deployment strategy other than ``Recreate`` on
    the pod template (``extraPodMetadata`` in v1alpha1) and on a v1alpha1 service's own
    annotations (no v1beta1 field)."""
    key = keys.ANN_DEPLOYMENT_STRATEGY
    alpha = _with(
        {
            "extraPodMetadata": {"annotations": {key: "recreate"}},
            "annotations": {key: "rolling"},
        }
    )
    text = _warnings(tmp_path, alpha, "alpha")
    assert f"spec.services.Worker.extraPodMetadata.annotations.{key}: 'recreate' is not" in text
    assert f"spec.services.Worker.annotations.{key}: 'rolling' is not" in text
    text = _warnings(tmp_path, _twin(alpha), "beta")
    assert f"spec.components[1].podTemplate.metadata.annotations.{key}: 'recreate'" in text
    assert "'rolling'" not in text  # v1beta1 has no service annotations


def test_a_negative_replicas_does_not_hide_the_other_rules(tmp_path: Path) -> None:
    """v1beta1's schema refuses a negative ``replicas``: it is reported on the v1alpha1
    service as written and left out of the v1beta1 form, whose rules still run."""
    text = _problems(tmp_path, _with({"replicas": -1, "runtimeVersionOverride": "v1"}), "neg")
    assert "spec.services.Worker.replicas: must be >= 0, found -1" in text
    assert "spec.services.Worker.runtimeVersionOverride: must be the Dynamo runtime" in text


def test_min_available_only_on_the_grove_pathway(tmp_path: Path) -> None:
    """Ported from the 1.5 webhook, which validates the v1beta1 object
    (``validateDynamoComponentDeploymentSharedSpec``,
    ``internal/webhook/validation/shared_v1beta1.go`` @ 2a6da14c8, #10532 5d3bb78df): a
    component's ``minAvailable`` is refused unless the DGD renders on the Grove pathway."""
    alpha = _with({"minAvailable": 1})
    message = "is currently supported only for Grove-backed DynamoGraphDeployment components"
    for doc, where in ((alpha, "spec.services.Worker"), (_twin(alpha), "spec.components[1]")):
        text = _problems(tmp_path, doc, "off-grove", grove="false")
        assert f"{where}.minAvailable: {message}" in text, text
        opted_out = copy.deepcopy(doc)
        opted_out["metadata"]["annotations"] = {keys.ANN_ENABLE_GROVE: "false"}
        text = _problems(tmp_path, opted_out, "opted-out", grove="true")
        assert f"{where}.minAvailable: {message}" in text, text
        (tmp_path / "grove.yaml").write_text(yaml.safe_dump(doc))
        assert render(tmp_path / "grove.yaml", grove="true")


def test_v1beta1_only_values_the_webhook_refuses(tmp_path: Path) -> None:
    """Ported from ``shared_v1beta1.go`` @ 2a6da14c8: a negative ``sharedMemorySize`` (a
    v1alpha1 ``sharedMemory.size`` converts into it) and an empty ``frontendSidecar``."""
    alpha = _with({"sharedMemory": {"size": "-1Gi"}})
    text = _problems(tmp_path, alpha, "shm-alpha")
    assert "spec.services.Worker.sharedMemory: must be non-negative, found '-1Gi'" in text
    text = _problems(tmp_path, _twin(alpha), "shm-beta")
    assert "spec.components[1].sharedMemorySize: must be non-negative, found '-1Gi'" in text
    beta = _twin(BASE)
    beta["spec"]["components"][0]["frontendSidecar"] = ""
    text = _problems(tmp_path, beta, "sidecar")
    assert "spec.components[0].frontendSidecar: must not be empty" in text, text


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
def test_a_standalone_dcd_rule_names_its_own_field(tmp_path: Path, version: str) -> None:
    """A standalone DynamoComponentDeployment is read as its one-component DGD; a rule's
    problem is at the DCD's own field (and it is never on the Grove pathway: the 1.5
    webhook validates a DCD with ``grovePathway = false``, ``dynamocomponentdeployment.go``
    @ 2a6da14c8)."""
    service = copy.deepcopy(BASE["spec"]["services"]["Worker"])
    if version == "v1alpha1":
        spec: Obj = {**service, "minAvailable": 1, "runtimeVersionOverride": "v1"}
    else:
        [component] = [c for c in _twin(BASE)["spec"]["components"] if c["name"] == "Worker"]
        spec = {**component, "minAvailable": 1, "runtimeVersionOverride": "v1"}
        spec.pop("name")
    dcd = {
        "apiVersion": f"nvidia.com/{version}",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": "w"},
        "spec": spec,
    }
    text = _problems(tmp_path, dcd, f"dcd-{version}", grove="true")
    assert "DynamoComponentDeployment/w: spec.minAvailable: is currently supported only" in text
    assert "DynamoComponentDeployment/w: spec.runtimeVersionOverride: must be the Dynamo" in text
