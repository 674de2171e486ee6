"""The expansion's internal model is the v1beta1 component list (``expand/components.py``):
a v1alpha1 DGD is converted **up** as the operator's conversion webhook does (``ConvertTo``
@ 2a6da14c8), a v1beta1 DGD read as written. Facts: ``tests/golden/operator-conversion.json``
(what the operator's own Go conversion stores for each upstream v1alpha1 example)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.hubforms import components_of, form_of
from support.paths import CONFORMANCE, SAMPLES
from support.rendering import render

from dyn_gitops import keys
from dyn_gitops.expand import components, replica_owners
from dyn_gitops.models import schemadefaults
from dyn_gitops.workerhash import hub

Obj = dict[str, Any]
ORACLE = json.loads((Path(__file__).parent / "golden" / "operator-conversion.json").read_text())
EXAMPLES: dict[str, Obj] = ORACLE["examples"]


def _source(entry: Obj) -> Obj:
    docs = yaml.safe_load_all((CONFORMANCE / entry["file"]).read_text())
    [dgd] = [
        d
        for d in docs
        if d and d.get("kind") == "DynamoGraphDeployment" and d["metadata"]["name"] == entry["name"]
    ]
    return dgd


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_v1alpha1_is_converted_up_as_the_operator_does(name: str) -> None:
    """Each upstream v1alpha1 example becomes the operator's component list (names, order,
    promoted ``prefill``/``decode`` types, scaling adapters), and the typed v1beta1 model
    holds the conversion (the same one the worker hash and the emitted DGD read, proven
    byte-identical by test_emit_v1beta1) without losing or adding a field but the CRD
    schema's defaults (``models.schemadefaults``: the stored v1beta1 DGD the operator
    reads, tests/test_pod_template.py)."""
    entry = EXAMPLES[name]
    source = _source(entry)
    graph = components_of(source)
    stored = entry["spec"]["components"]
    assert [(c.name, c.type, c.scalingAdapter is not None) for c in graph.components] == [
        (c["name"], c.get("type"), "scalingAdapter" in c) for c in stored
    ]
    dumped = [c.model_dump(mode="json", exclude_unset=True) for c in graph.components]
    converted = hub.converted(source["spec"].get("services") or {})
    assert dumped == [schemadefaults.component(c.spec) for c in converted]


def test_v1beta1_components_keep_their_written_order() -> None:
    beta = yaml.safe_load((SAMPLES / "v1beta1-pair/input/sglang-disagg.yaml").read_text())
    alpha = yaml.safe_load((SAMPLES / "v1beta1-pair/v1alpha1/sglang-disagg.yaml").read_text())
    written = [c["name"] for c in beta["spec"]["components"]]
    got = components_of(beta)
    assert got.names == written
    # the twin in v1alpha1: the same components, name-sorted, of the same types
    twin = components_of(alpha)
    assert twin.names == sorted(written)
    assert {c.name: c.type for c in twin.components} == {c.name: c.type for c in got.components}


PLANNED = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: planned
spec:
  services:
    Planner:
      componentType: planner
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
    Prefill:
      componentType: worker
      subComponentType: prefill
      scalingAdapter:
        enabled: false
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
          command: [python3, -m, dynamo.vllm]
    Decode:
      componentType: worker
      subComponentType: decode
      scalingAdapter:
        enabled: true
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
          command: [python3, -m, dynamo.vllm]
"""


def test_planner_scaled_workers_read_the_v1beta1_model(tmp_path: Path) -> None:
    """A worker a Planner scales (no scaling adapter: a disabled one converts to none) gets
    the seed annotation; one with an adapter does not; the Planner itself is no worker."""
    graph = components_of(yaml.safe_load(PLANNED))
    assert [c.type for c in graph.components] == ["decode", "planner", "prefill"]
    assert replica_owners.planner_scaled(graph, "Prefill")
    assert not replica_owners.planner_scaled(graph, "Decode")  # has an adapter
    assert not replica_owners.planner_scaled(graph, "Planner")
    assert not replica_owners.planner_scaled(None, "Prefill")  # a standalone DCD

    (tmp_path / "g.yaml").write_text(PLANNED)
    objs = render(tmp_path, namespace="ns", origin_version="none")
    seeded = {
        o["metadata"]["labels"][keys.LABEL_COMPONENT]
        for o in objs
        if o["kind"] == "Deployment"
        and keys.ANN_SEED_REPLICAS in (o["metadata"].get("annotations") or {})
    }
    assert seeded == {"Prefill"}


def test_runtime_version_reads_the_v1beta1_main_container() -> None:
    """The runtime version comes from the v1beta1 component: ``runtimeVersionOverride``,
    else the tag of container ``main``'s image (a v1alpha1 ``extraPodSpec.mainContainer``
    converts into it); a bad override is an error, a tag that does not parse is no version."""
    from dyn_gitops.expand.context import ComponentError, component_runtime

    graph = components_of(yaml.safe_load(PLANNED))
    runtime = component_runtime(graph.components[0])
    assert runtime is not None and str(runtime) == "1.1.0"
    beta = yaml.safe_load((SAMPLES / "v1beta1-pair/input/sglang-disagg.yaml").read_text())
    alpha = yaml.safe_load((SAMPLES / "v1beta1-pair/v1alpha1/sglang-disagg.yaml").read_text())
    got = {c.name: component_runtime(c) for c in components_of(beta).components}
    assert got == {c.name: component_runtime(c) for c in components_of(alpha).components}
    assert all(v is not None for v in got.values())

    doc = yaml.safe_load(PLANNED)
    doc["spec"]["services"]["Planner"]["runtimeVersionOverride"] = "1.5.1"
    doc["spec"]["services"]["Prefill"]["extraPodSpec"]["mainContainer"]["image"] = "x:latest"
    doc["spec"]["services"]["Decode"]["runtimeVersionOverride"] = "not-a-version"
    by_name = {c.name: c for c in components_of(doc).components}
    assert str(component_runtime(by_name["Planner"])) == "1.5.1"
    assert component_runtime(by_name["Prefill"]) is None
    with pytest.raises(ComponentError):
        component_runtime(by_name["Decode"])


# ----------------------------------------------------------- which modules read what
EXPAND = Path(components.__file__).parent

#: expansion modules that read only the v1beta1 model: no v1alpha1 type imported, and no
#: v1alpha1 service read through a component context (``ctx.spec``)
V1BETA1_ONLY = (
    "checkpoint.py",  # experimental.checkpoint (a v1alpha1 one converts into it as written)
    "components.py",
    "elastic_ep.py",  # container main's command and args; the graph framework is handed in
    "epp.py",
    "gms.py",  # experimental.gpuMemoryService/failover, container main's GPU resources
    "graph.py",  # the graph (components.Graph), its components, what is preserved beside
    "grove.py",
    "legacy.py",  # DYN_DEPLOYMENT_CONFIG from container main's env, written into container main
    "objects.py",  # pvcs and ingress: typed by models/preserved (nvidia.com/dgd-spec)
    "podspec.py",
    "provider_override.py",  # the graph-level override and typed topology are handed in
    "replica_owners.py",
    "stage.py",
)


def _service_reads(path: Path) -> list[str]:
    """Where the module at ``path`` reads a v1alpha1 service: the ``ServiceSpec`` type, a
    component context's ``.spec``, a DGD's ``.spec.services``."""
    import ast

    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and any(a.name == "ServiceSpec" for a in node.names):
            found.append(f"line {node.lineno}: imports ServiceSpec")
        elif isinstance(node, ast.Attribute) and node.attr == "spec":
            if isinstance(node.value, ast.Name) and node.value.id in ("ctx", "context"):
                found.append(f"line {node.lineno}: {node.value.id}.spec")
        elif isinstance(node, ast.Attribute) and node.attr == "services":
            found.append(f"line {node.lineno}: .services")
    return found


def _v1alpha1_reads(path: Path) -> list[str]:
    """Where the module at ``path`` reads the v1alpha1 model: imports of it, and reads of
    a v1alpha1 service (:func:`_service_reads`)."""
    import ast

    found = _service_reads(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            if "v1alpha1" in (node.module or "") or "v1alpha1" in names:
                found.append(f"line {node.lineno}: from {node.module} import {', '.join(names)}")
        elif isinstance(node, ast.Import):
            found.extend(
                f"line {node.lineno}: import {a.name}" for a in node.names if "v1alpha1" in a.name
            )
    return found


@pytest.mark.parametrize("module", V1BETA1_ONLY)
def test_migrated_modules_read_only_the_v1beta1_model(module: str) -> None:
    assert _v1alpha1_reads(EXPAND / module) == []


def test_no_expansion_module_reads_the_v1alpha1_model() -> None:
    """The expansion's internal model is v1beta1 throughout: each module of ``expand/`` is
    listed above (read the v1beta1 model) or reads neither model (defaults, object shapes,
    scripts); none imports the v1alpha1 model or reads a v1alpha1 service. A v1alpha1 DGD
    reaches it only converted up (``hubform.of_v1alpha1``)."""
    modules = {p.name for p in EXPAND.glob("*.py") if p.name != "__init__.py"}
    assert len(V1BETA1_ONLY) == len(set(V1BETA1_ONLY)) and set(V1BETA1_ONLY) <= modules
    assert {m: r for m in sorted(modules) if (r := _v1alpha1_reads(EXPAND / m))} == {}


def _context(component: Obj, **fields: Any) -> Any:
    """A component context made from the v1beta1 component alone."""
    from dyn_gitops.expand.context import ComponentContext
    from dyn_gitops.models import v1beta1
    from dyn_gitops.settings import RenderSettings

    comp = v1beta1.Component.model_validate(component)
    base: dict[str, Any] = dict(
        dgd_name="g",
        namespace="ns",
        service=comp.name,
        component_type=comp.type or "",
        dynamo_ns="ns-g",
        name=f"g-{comp.name.lower()}",
        worker_hash=None,
        backend="vllm",
        discovery_backend="kubernetes",
        container_discovery=False,
        annotations={},
        labels={},
        graph_envs=({"name": "GRAPH", "value": "g"}, {"name": "SHARED", "value": "graph"}),
        settings=RenderSettings(),
        component=comp,
    )
    base.update(fields)
    return ComponentContext(**base)


def test_pod_spec_reads_the_v1beta1_component() -> None:
    """The pod spec builder takes container ``main`` (image, command, env over the graph's,
    probes, resources, mounts), the pod fields, the other containers, the frontend sidecar,
    the compilation cache and the shared-memory size from the v1beta1 component alone."""
    from dyn_gitops.expand.podspec import build_pod_spec

    pod = build_pod_spec(
        _context(
            {
                "name": "Worker",
                "type": "worker",
                "sharedMemorySize": "16Gi",
                "compilationCache": {"pvcName": "cache"},
                "frontendSidecar": "fe",
                "podTemplate": {
                    "spec": {
                        "nodeSelector": {"pool": "gpu"},
                        "containers": [
                            {
                                "name": "main",
                                "image": "vllm:1.5.1",
                                "command": ["python3", "-m", "dynamo.vllm"],
                                "env": [{"name": "SHARED", "value": "main"}],
                                "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {}},
                                "readinessProbe": {"exec": {"command": ["true"]}},
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            },
                            {"name": "helper", "image": "busybox"},
                            {"name": "fe", "image": "frontend:1.5.1", "args": ["--x"]},
                        ],
                    }
                },
            }
        )
    )
    assert pod["nodeSelector"] == {"pool": "gpu"}
    main, helper, sidecar = pod["containers"]
    assert (main["name"], main["image"], main["command"]) == (
        "main",
        "vllm:1.5.1",
        ["python3", "-m", "dynamo.vllm"],
    )
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert (env["SHARED"], env["GRAPH"], env["VLLM_CACHE_ROOT"]) == (
        "main",
        "g",
        "/root/.cache/vllm",
    )
    assert main["readinessProbe"] == {"exec": {"command": ["true"]}}
    assert main["resources"] == {"requests": {}, "limits": {"nvidia.com/gpu": "1"}}
    assert list(main["resources"]) == ["requests", "limits"]
    assert main["volumeMounts"] == [
        {"name": "data", "mountPath": "/data"},
        {"name": "cache", "mountPath": "/root/.cache/vllm"},
        {"name": "shared-memory", "mountPath": "/dev/shm"},
    ]
    assert {"name": "shared-memory", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}} in pod[
        "volumes"
    ]
    assert helper == {"name": "helper", "image": "busybox"}
    assert (sidecar["name"], sidecar["image"], sidecar["args"]) == (
        "fe",  # its own name (mergeFrontendSidecarDefaults, graph.go @ 2a6da14c8)
        "frontend:1.5.1",
        ["--x"],
    )


def test_what_v1beta1_cannot_say_is_preserved_beside_it() -> None:
    """A v1alpha1 service's ``dynamoNamespace`` and an ``envFromSecret`` its conversion
    drops (``mainContainer.envFrom`` replaces it) stay beside the component and still
    render; a v1beta1 component preserves nothing."""
    from dyn_gitops.expand.podspec import build_pod_spec, selector_dynamo_namespace

    doc = yaml.safe_load(PLANNED)
    prefill = doc["spec"]["services"]["Prefill"]
    prefill["dynamoNamespace"] = "legacy-ns"
    prefill["envFromSecret"] = "hf-token"
    prefill["extraPodSpec"]["mainContainer"]["envFrom"] = [{"configMapRef": {"name": "tuning"}}]
    graph = components_of(doc)
    kept = graph.preserved_of("Prefill")
    assert (kept.dynamo_namespace, kept.env_from_secret) == ("legacy-ns", "hf-token")
    decode = graph.preserved_of("Decode")
    assert decode.alpha and decode.sub_component_type == "decode"
    assert (decode.dynamo_namespace, decode.env_from_secret) == (None, None)
    comp = graph.get("Prefill")
    assert comp is not None
    # the conversion (the operator's, what the worker hash reads) keeps only the list
    ctx = _context(comp.model_dump(exclude_unset=True), preserved=kept)
    main = build_pod_spec(ctx)["containers"][0]
    assert main["envFrom"] == [
        {"configMapRef": {"name": "tuning"}},
        {"secretRef": {"name": "hf-token"}},
    ]
    assert selector_dynamo_namespace(ctx) == "legacy-ns"
    beta = yaml.safe_load((SAMPLES / "v1beta1-pair/input/sglang-disagg.yaml").read_text())
    assert components_of(beta).preserved == ()


LEGACY = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: legacy
spec:
  envs:
    - name: DYN_DEPLOYMENT_CONFIG
      value: '{"Worker":{"ServiceArgs":{"Resources":{"CPU":"2","Memory":"2Gi"}}}}'
  services:
    Worker:
      componentType: worker
      resources:
        limits: {cpu: "1", gpu: "1"}
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
          command: [python3, -m, dynamo.vllm]
          resources:
            limits: {cpu: "4"}
"""

LEGACY_BETA = """\
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata:
  name: legacy
spec:
  env:
    - name: DYN_DEPLOYMENT_CONFIG
      value: '{"Worker":{"ServiceArgs":{"Resources":{"CPU":"2","Memory":"2Gi"}}}}'
  components:
    - name: Worker
      type: worker
      podTemplate:
        spec:
          containers:
            - name: main
              image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
              command: [python3, -m, dynamo.vllm]
              resources:
                limits: {cpu: "4", nvidia.com/gpu: "1"}
"""


@pytest.mark.parametrize(
    ("doc", "limits"),
    [
        # v1alpha1: container main holds resources with the mainContainer's (cpu 4) merged
        # over them; the config is set over that, key by key (parity fix, see below)
        (LEGACY, {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"}),
        # v1beta1: container main's resources, the config set over them
        (LEGACY_BETA, {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"}),
    ],
)
def test_legacy_config_resources_reach_container_main(
    tmp_path: Path, doc: str, limits: dict[str, str]
) -> None:
    """``DYN_DEPLOYMENT_CONFIG`` resources are written into the v1beta1 component's
    container ``main`` the pod spec reads (requests and limits), as the operator does
    since its DCDs are generated from v1beta1: ``generateSingleDCD`` runs
    ``applyDynDeploymentConfig`` on the converted component, whose
    ``applyDynDeploymentResources`` sets each quantity in container ``main``
    (``deploy/operator/internal/dynamo/graph.go``, upstream main ``014cc221``, read through
    the fork ``wxsms/dynamo``). Before, a v1alpha1 service's ``mainContainer.resources``
    still won over the config (the 1.1-line order): a parity fix."""
    (tmp_path / "g.yaml").write_text(doc)
    objs = render(tmp_path, namespace="ns", origin_version="none")
    [dep] = [o for o in objs if o["kind"] == "Deployment"]
    main = dep["spec"]["template"]["spec"]["containers"][0]
    assert main["resources"] == {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": limits}


def test_grove_cliques_read_the_v1beta1_component() -> None:
    """A Grove clique's replicas, minAvailable, labels and annotations (the pod template's
    metadata, the preserved v1alpha1 labels, the sub-component type) and its scaling group
    (``forceScalingGroup``) come from the v1beta1 component and what is preserved beside
    it."""
    from dyn_gitops import keys
    from dyn_gitops.expand import grove

    dgd = form_of(
        {
            "apiVersion": "nvidia.com/v1beta1",
            "kind": "DynamoGraphDeployment",
            "metadata": {"name": "g"},
            "spec": {},
        }
    )
    ctx = _context(
        {
            "name": "Prefill",
            "type": "prefill",
            "replicas": 3,
            "minAvailable": 2,
            "experimental": {"grove": {"forceScalingGroup": True}},
            "podTemplate": {
                "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                "spec": {"containers": [{"name": "main", "image": "vllm:1.5.1"}]},
            },
        },
        grove=True,
        preserved=components.Preserved(alpha=True, labels={"svc": "l"}),
    )
    parts = grove.service_cliques(ctx, dgd)
    [clique] = parts.cliques
    assert clique["labels"]["team"] == "a" and clique["labels"]["svc"] == "l"
    assert keys.LABEL_SUB_COMPONENT_TYPE not in clique["labels"]  # none written (v1alpha1)
    assert clique["annotations"]["note"] == "x"
    assert (clique["spec"]["replicas"], clique["spec"]["minAvailable"]) == (1, 1)
    assert parts.scaling_group is not None
    assert (parts.scaling_group["replicas"], parts.scaling_group["minAvailable"]) == (3, 2)
    # a v1beta1 component: its promoted type is the sub-component type
    beta = _context({"name": "Prefill", "type": "prefill", "replicas": 2}, grove=True)
    [beta_clique] = grove.service_cliques(beta, dgd).cliques
    assert beta_clique["labels"][keys.LABEL_SUB_COMPONENT_TYPE] == "prefill"
    assert beta_clique["spec"]["replicas"] == 2


def test_backend_detection_reads_container_main() -> None:
    """Each worker's backend is detected from its v1beta1 container ``main`` (command and
    args), the explicit one is the v1beta1 graph's ``backendFramework``: the same for a
    v1beta1 DGD and its v1alpha1 twin."""
    from dyn_gitops.errors import RenderError
    from dyn_gitops.expand.graph import resolve_backends

    beta = yaml.safe_load((SAMPLES / "v1beta1-pair/input/sglang-disagg.yaml").read_text())
    alpha = yaml.safe_load((SAMPLES / "v1beta1-pair/v1alpha1/sglang-disagg.yaml").read_text())
    got = resolve_backends(form_of(beta))
    assert got == resolve_backends(form_of(alpha))
    framework, per_service = got
    assert framework == "sglang" and "sglang" in per_service.values()
    beta["spec"]["backendFramework"] = "vllm"  # the graph's explicit one disagrees
    with pytest.raises(RenderError, match=r"spec\.backendFramework is 'vllm'"):
        resolve_backends(form_of(beta))


# ------------------------------------------------------------- the graph level (v1beta1)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_graph_spec_is_converted_up_as_the_operator_does(name: str) -> None:
    """The graph-level spec the expansion reads (``components.Graph``) is what the
    operator's conversion stores for each upstream v1alpha1 example (``env``,
    ``backendFramework``, ...), and the ``spec.pvcs`` it keeps beside it are those the
    operator keeps in ``nvidia.com/dgd-spec``."""
    from dyn_gitops.workerhash import gojson, golayout

    entry = EXAMPLES[name]
    graph = form_of(_source(entry))
    stored = {k: v for k, v in entry["spec"].items() if k != "components"}
    dumped = graph.spec.model_dump(mode="json", exclude_none=True, exclude={"components"})
    assert dumped == stored

    # what is kept beside it, as Go encodes it into the annotation
    def written(model: Any) -> Obj:
        return dict(model.model_dump(mode="json", exclude_unset=True))

    kept: Obj = {"pvcs": [written(p) for p in graph.pvcs]}
    ingresses = {n: p.ingress for n, p in graph.components.preserved if p.ingress is not None}
    kept["services"] = {n: {"ingress": written(i)} for n, i in ingresses.items()}
    got = json.loads(gojson.encode(golayout.ALPHA_GRAPH_SPEC, kept))
    saved = json.loads(entry["dgd-spec"])["spec"] if entry["dgd-spec"] else {}
    assert got.get("pvcs") == saved.get("pvcs")
    assert {n: s["ingress"] for n, s in (got.get("services") or {}).items()} == {
        n: s["ingress"] for n, s in (saved.get("services") or {}).items() if "ingress" in s
    }


BETA_GRAPH = """\
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata:
  name: g
  namespace: ns
  annotations:
    nvidia.com/enable-metrics: "false"
spec:
  env:
    - {name: GRAPH_ENV, value: from-graph}
  labels: {team: graph}
  annotations: {note: graph}
  backendFramework: vllm
  priorityClassName: high
  topologyConstraint: {clusterTopologyName: topo, packDomain: rack}
  experimental:
    kvTransferPolicy: {labelKey: topology.kubernetes.io/zone, domain: zone}
  components:
    - name: Frontend
      type: frontend
      podTemplate:
        spec:
          containers:
            - {name: main, image: "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1"}
    - name: Worker
      type: worker
      podTemplate:
        spec:
          containers:
            - name: main
              image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1
              command: [python3, -m, dynamo.vllm]
"""


def _expand(doc: Obj, **settings: Any) -> list[Obj]:
    """The expansion of ``doc`` from its v1beta1 graph (``hubform.Graph``) alone."""
    from dyn_gitops.expand.graph import expand_graph
    from dyn_gitops.settings import RenderSettings

    return expand_graph(form_of(doc), RenderSettings(**settings))


def test_graph_level_fields_are_read_from_the_v1beta1_graph() -> None:
    """A v1beta1 DGD's graph-level fields (``env``, ``labels``, ``annotations``, the
    metadata annotations, ``backendFramework``, ``experimental.kvTransferPolicy``) reach
    the workloads, expanded from the v1beta1 graph alone."""
    from dyn_gitops.expand.graph import resolve_backends

    doc = yaml.safe_load(BETA_GRAPH)
    del doc["spec"]["priorityClassName"]  # Grove only
    del doc["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]["command"]
    # no command: the worker's backend is the graph's backendFramework
    assert resolve_backends(form_of(doc)) == (
        "vllm",
        {"Frontend": "noop", "Worker": "vllm"},
    )
    objs = _expand(doc, namespace="ns")
    deps = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Deployment"}
    [worker] = [d for n, d in deps.items() if n.startswith("g-worker-")]
    main = worker["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert (env["GRAPH_ENV"], env["DYN_KV_TRANSFER_DOMAIN"]) == ("from-graph", "zone")
    assert worker["metadata"]["labels"]["team"] == "graph"
    annotations = worker["metadata"]["annotations"]
    assert (annotations["note"], annotations[keys.ANN_ENABLE_METRICS]) == ("graph", "false")
    assert annotations[keys.ANN_TOPOLOGY_LABEL_KEY] == "topology.kubernetes.io/zone"
    frontend = deps["g-frontend"]["spec"]["template"]["spec"]["containers"][0]
    assert {e["name"]: e.get("value") for e in frontend["env"]}["GRAPH_ENV"] == "from-graph"


def test_the_pod_clique_set_reads_the_v1beta1_graph() -> None:
    """Grove: the PodCliqueSet's ``priorityClassName``, ``topologyConstraint``, labels and
    annotations and each clique's labels come from the v1beta1 graph."""
    doc = yaml.safe_load(BETA_GRAPH)
    objs = _expand(doc, namespace="ns", grove=True)
    [pcs] = [o for o in objs if o["kind"] == "PodCliqueSet"]
    template = pcs["spec"]["template"]
    assert template["priorityClassName"] == "high"
    assert template["topologyConstraint"] == {"topologyName": "topo", "pack": {"required": "rack"}}
    assert pcs["metadata"]["labels"]["team"] == "graph"
    assert pcs["metadata"]["annotations"]["note"] == "graph"
    assert {c["labels"]["team"] for c in template["cliques"]} == {"graph"}
    assert all(keys.LABEL_METRICS_ENABLED not in c["labels"] for c in template["cliques"])


PVC_AND_INGRESS = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: g
  namespace: ns
spec:
  pvcs:
    - {create: true, name: models, size: 10Gi, storageClass: fast, volumeAccessMode: ReadWriteMany}
  services:
    Frontend:
      componentType: frontend
      ingress: {enabled: true, host: g, ingressControllerClassName: nginx}
      extraPodSpec:
        mainContainer: {image: "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1"}
"""


@pytest.mark.parametrize("grove", [False, True])
def test_pvcs_and_ingress_are_kept_beside_the_v1beta1_graph(grove: bool) -> None:
    """What v1beta1 cannot hold (a v1alpha1 DGD's ``spec.pvcs``, a service's ``ingress``;
    the operator keeps them in ``nvidia.com/dgd-spec``) is read from beside the v1beta1
    graph (``Graph.pvcs``, ``Preserved.ingress``) and renders."""
    doc = yaml.safe_load(PVC_AND_INGRESS)
    graph = form_of(doc)
    assert [p.name for p in graph.pvcs] == ["models"]
    kept = graph.components.preserved_of("Frontend").ingress
    assert kept is not None and kept.ingressControllerClassName == "nginx"
    objs = _expand(doc, namespace="ns", grove=grove)
    [pvc] = [o for o in objs if o["kind"] == "PersistentVolumeClaim"]
    assert (pvc["metadata"]["name"], pvc["spec"]["storageClassName"]) == ("models", "fast")
    [ingress] = [o for o in objs if o["kind"] == "Ingress"]
    assert ingress["spec"]["ingressClassName"] == "nginx"
    # a v1beta1 DGD has neither (its schema has no field for them)
    beta = form_of(yaml.safe_load(BETA_GRAPH))
    assert beta.pvcs == () and beta.components.preserved == ()


# --------------------------------------------- per-component modules on the v1beta1 model
def _alpha_doc(services: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g"},
        "spec": {"services": services, **spec},
    }


def _beta_doc(components_: list[Obj], **spec: Any) -> Obj:
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g"},
        "spec": {"components": components_, **spec},
    }


def _main(**fields: Any) -> Obj:
    return {"spec": {"containers": [{"name": "main", "image": "vllm:1.5.1", **fields}]}}


def test_gms_and_failover_read_the_v1beta1_component() -> None:
    """GMS and failover come from ``experimental`` and container ``main`` of the component
    alone."""
    from dyn_gitops.expand.context import ComponentError
    from dyn_gitops.expand.podspec import build_pod_spec
    from dyn_gitops.settings import RenderSettings

    comp: Obj = {
        "name": "W",
        "type": "worker",
        "experimental": {"gpuMemoryService": {}, "failover": {}},
        "podTemplate": _main(
            command=["python3", "-m", "dynamo.vllm"], resources={"limits": {"nvidia.com/gpu": "1"}}
        ),
    }
    ctx = _context(comp, settings=RenderSettings(dra=True), container_discovery=True)
    pod = build_pod_spec(ctx)
    assert [c["name"] for c in pod["containers"]] == ["engine-0", "engine-1"]
    assert [c["name"] for c in pod["initContainers"]] == ["gms-server"]
    assert pod["resourceClaims"] == [
        {"name": "intrapod-shared-gpu", "resourceClaimTemplateName": "g-w-gpu"}
    ]
    # failover without GMS: refused at the component's field (a v1alpha1 service's failover)
    alone = {**comp, "experimental": {"failover": {}}}
    with pytest.raises(ComponentError) as info:
        build_pod_spec(_context(alone, settings=RenderSettings(dra=True)))
    assert info.value.path == ("experimental", "failover")
    # no GPU in container main: refused
    bare = {**comp, "podTemplate": _main(command=["python3", "-m", "dynamo.vllm"])}
    with pytest.raises(ComponentError, match=r"GPU count >= 1"):
        build_pod_spec(_context(bare, settings=RenderSettings(dra=True)))


@pytest.mark.parametrize(
    ("alpha_checkpoint", "beta_checkpoint", "want"),
    [
        # enabled, both forms: refused at the v1alpha1 path (automatic checkpointing)
        ({"enabled": True}, {"enabled": True}, ("enabled", "automatic checkpointing")),
        # a v1beta1 block without enabled: present means enabled (models/convert.py)
        ({"enabled": True}, {}, ("enabled", "automatic checkpointing")),
        # a checkpointRef names the PodSnapshot
        (
            {"enabled": True, "checkpointRef": "snap"},
            {"checkpointRef": "snap"},
            ("checkpointRef", "PodSnapshot 'snap'"),
        ),
        # disabled (v1alpha1: written so, or enabled omitted; v1beta1: written so): none
        ({"enabled": False}, {"enabled": False}, None),
        ({"checkpointRef": "snap"}, {"enabled": False, "checkpointRef": "snap"}, None),
    ],
)
def test_checkpoint_reads_experimental_checkpoint(
    alpha_checkpoint: Obj, beta_checkpoint: Obj, want: tuple[str, str] | None
) -> None:
    """The "not yet supported" check reads the component's ``experimental.checkpoint``: a
    v1alpha1 ``checkpoint`` converts into it as written (its ``enabled`` decides), a
    v1beta1 block's presence means enabled unless it says ``enabled: false``; each names
    the field its user wrote."""
    from dyn_gitops.expand import checkpoint

    alpha = form_of(_alpha_doc({"W": {"componentType": "worker", "checkpoint": alpha_checkpoint}}))
    beta = form_of(
        _beta_doc(
            [{"name": "W", "type": "worker", "experimental": {"checkpoint": beta_checkpoint}}]
        )
    )
    written = {
        id(alpha): ("spec", "services", "W", "checkpoint"),
        id(beta): ("spec", "components", 0, "experimental", "checkpoint"),
    }
    for graph in (alpha, beta):
        found = checkpoint.problem(graph.components, "W")
        if want is None:
            assert found is None
            continue
        assert found is not None
        assert found.path == ("spec", "components", 0, "experimental", "checkpoint", want[0])
        assert graph.written_path(found.path) == (*written[id(graph)], want[0])
        assert want[1] in found.message


def test_elastic_ep_admission_reads_container_main() -> None:
    """A vLLM graph's component whose container ``main`` asks for the elastic-EP Ray
    topology without a command is refused, at its container ``main``'s ``command`` (the
    v1alpha1 ``mainContainer.command``): the v1beta1 component and its v1alpha1 twin alike;
    with a command, or another framework, nothing."""
    from dyn_gitops.expand import elastic_ep

    args = ["--enable-elastic-ep", "--data-parallel-backend", "ray"]
    alpha = form_of(
        _alpha_doc(
            {"W": {"componentType": "worker", "extraPodSpec": {"mainContainer": {"args": args}}}}
        )
    )
    beta = form_of(_beta_doc([{"name": "W", "type": "worker", "podTemplate": _main(args=args)}]))
    path = ("spec", "components", 0, "podTemplate", "spec", "containers", 0, "command")
    written = {
        id(alpha): ("spec", "services", "W", "extraPodSpec", "mainContainer", "command"),
        id(beta): path,
    }
    for graph in (alpha, beta):
        [problem] = elastic_ep.requires_command("vllm", graph.components)
        assert problem.path == path
        assert graph.written_path(problem.path) == written[id(graph)]
        assert "explicit container command" in problem.message
        assert list(elastic_ep.requires_command("sglang", graph.components)) == []
    with_command = _main(args=args, command=["python3", "-m", "dynamo.vllm"])
    ok = components_of(_beta_doc([{"name": "W", "type": "worker", "podTemplate": with_command}]))
    assert list(elastic_ep.requires_command("vllm", ok)) == []


def test_provider_overrides_read_the_v1beta1_components() -> None:
    """Each component's ``providerOverride`` resolves its target from the component
    (multinode or ``forceScalingGroup``: its scaling group, else its clique), a role's
    from ``roles[]``; the v1alpha1 twin (no roles there) gives the same."""
    from dyn_gitops.expand import provider_override as po

    value = {"topologyConstraint": {"packDomain": "rack"}}
    override = {"apiVersion": "grove.io/v1alpha1", "value": value}
    beta = components_of(
        _beta_doc(
            [
                {"name": "Solo", "type": "worker", "providerOverride": override},
                {
                    "name": "Group",
                    "type": "worker",
                    "providerOverride": override,
                    "experimental": {"grove": {"forceScalingGroup": True}},
                },
                {
                    "name": "Multi",
                    "type": "worker",
                    "multinode": {"nodeCount": 2},
                    "providerOverride": override,
                    "roles": [{"name": "leader", "providerOverride": override}],
                },
            ]
        )
    )
    got = [(f.loc, f.target, f.role) for f in po.overrides(po.Root(), beta)]
    base = ("spec", "components")
    assert got == [
        ((*base, 1, "providerOverride"), po.SCALING_GROUP, None),
        ((*base, 2, "providerOverride"), po.SCALING_GROUP, None),
        ((*base, 2, "roles", 0, "providerOverride"), po.CLIQUE, "leader"),
        ((*base, 0, "providerOverride"), po.CLIQUE, None),
    ]
    alpha = components_of(
        _alpha_doc(
            {
                "Solo": {"componentType": "worker", "providerOverride": override},
                "Multi": {
                    "componentType": "worker",
                    "multinode": {"nodeCount": 2},
                    "providerOverride": override,
                },
            }
        )
    )
    assert [(f.loc, f.target) for f in po.overrides(po.Root(), alpha)] == [
        ((*base, 0, "providerOverride"), po.SCALING_GROUP),  # the name-sorted services
        ((*base, 1, "providerOverride"), po.CLIQUE),
    ]
    # the typed topology of a component refuses a topology override on Grove
    typed = components_of(
        _beta_doc(
            [
                {
                    "name": "Solo",
                    "type": "worker",
                    "providerOverride": override,
                    "topologyConstraint": {"packDomain": "zone"},
                }
            ]
        )
    )
    [refused] = po.problems(po.Root(), typed, on_grove=True)
    assert refused.path == (*base, 0, "providerOverride", "value")
    assert po.problems(po.Root(), typed, on_grove=False)[0].path == (*base, 0, "providerOverride")


LEGACY_MAIN_ENV = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: legacy
spec:
  services:
    Front:
      componentType: frontend
      envs:
        - name: DYN_DEPLOYMENT_CONFIG
          value: '{"Front":{"ServiceArgs":{"workers":1}}}'
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
          env:
            - name: DYN_DEPLOYMENT_CONFIG
              value: '{"Front":{"ServiceArgs":{"workers":3,"resources":{"custom":{"x.io/a":"2"}}}}}'
          resources:
            limits: {x.io/b: "1"}
"""


def test_legacy_config_is_read_from_container_mains_env(tmp_path: Path) -> None:
    """Parity fix: the config is read from container ``main``'s env (the DGD's env merged
    under it), which for a v1alpha1 service is its ``envs`` with ``mainContainer.env``
    merged over them, so the mainContainer's value wins (``applyDynDeploymentConfig`` on
    the converted component, ``internal/dynamo/graph.go`` @ upstream main ``014cc221``;
    before, only ``envs`` was read, the 1.1 ``GetDynamoDeploymentConfig``). Custom
    resources are set key by key, beside the ones container ``main`` has."""
    (tmp_path / "g.yaml").write_text(LEGACY_MAIN_ENV)
    objs = render(tmp_path, namespace="ns", origin_version="none")
    [dep] = [o for o in objs if o["kind"] == "Deployment"]
    assert dep["spec"]["replicas"] == 3
    main = dep["spec"]["template"]["spec"]["containers"][0]
    config = next(e["value"] for e in main["env"] if e["name"] == "DYN_DEPLOYMENT_CONFIG")
    assert json.loads(config)["Front"]["port"] == 8000  # the frontend's entry, rewritten
    assert main["resources"] == {
        "requests": {"x.io/a": "2"},
        "limits": {"x.io/b": "1", "x.io/a": "2"},
    }


def test_legacy_config_with_a_bad_quantity_is_an_input_error(tmp_path: Path) -> None:
    """A quantity the operator's ``resource.ParseQuantity`` refuses is an error at the
    value of the env entry carrying the config (the DGD's ``envs[0]`` here), with the path
    inside the JSON and no part of the value (before: an internal error; then the value
    quoted at the service's ``envs``)."""
    from dyn_gitops.errors import RenderError

    doc = LEGACY.replace('"CPU":"2"', '"CPU":"two"')
    (tmp_path / "g.yaml").write_text(doc)
    with pytest.raises(RenderError) as info:
        render(tmp_path, namespace="ns", origin_version="none")
    [problem] = info.value.problems
    assert problem.path == ("spec", "envs", 0, "value")
    assert problem.message == (
        "DYN_DEPLOYMENT_CONFIG: Worker.ServiceArgs.resources.cpu: is not a Kubernetes "
        "quantity (such as '1', '500m' or '8Gi')"
    )


# ------------------------------------------------------------ no down-conversion to render
BETA_EXAMPLE = CONFORMANCE / "examples__backends__vllm__deploy__v1beta1__agg.yaml"


def test_rendering_a_v1beta1_dgd_converts_nothing_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """A v1beta1 DGD is validated and expanded as written: ``convert.to_v1alpha1`` is not
    called (it is the output conversion of setting source-api-version v1alpha1 only), and
    the validated item holds the v1beta1 form, no v1alpha1 model."""
    import dataclasses

    from dyn_gitops import validate
    from dyn_gitops.models import convert

    def refused(*_: Any) -> None:
        raise AssertionError("converted down")

    monkeypatch.setattr(convert, "to_v1alpha1", refused)
    objs = render(BETA_EXAMPLE, runtime_version_admission="lenient")
    (dgd,) = [o for o in objs if o["kind"] == "DynamoGraphDeployment"]
    assert dgd["apiVersion"] == "nvidia.com/v1beta1"
    assert [f.name for f in dataclasses.fields(validate.Validated) if f.name in ("dgd",)] == []
    with pytest.raises(AssertionError, match="converted down"):
        render(BETA_EXAMPLE, runtime_version_admission="lenient", source_api_version="v1alpha1")


def test_to_v1alpha1_is_called_only_to_emit_v1alpha1() -> None:
    """The only caller of the down-conversion is the emit of a v1beta1 DGD in v1alpha1."""
    import ast

    import dyn_gitops

    callers = []
    for path in sorted(Path(dyn_gitops.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id == "to_v1alpha1":
                callers.append(path.relative_to(Path(dyn_gitops.__file__).parent).as_posix())
    assert sorted(set(callers)) == ["expand/stage.py"]


SIDECAR_ENV_FROM = [{"configMapRef": {"name": "fe-config"}}, {"secretRef": {"name": "fe-token"}}]


def test_a_v1beta1_frontend_sidecar_envfrom_renders_as_written(tmp_path: Path) -> None:
    """A v1beta1 frontend sidecar's ``envFrom`` is merged over the frontend's defaults as the
    operator does (``mergeFrontendSidecarDefaults``, ``internal/dynamo/graph.go`` @
    2a6da14c8: mergo with override, the defaults have none): the list as written. Only its
    emit in v1alpha1 (one ``envFromSecret`` there) is refused."""
    from dyn_gitops.errors import RenderError

    doc = _beta_doc(
        [
            {
                "name": "Frontend",
                "type": "frontend",
                "podTemplate": _main(),
                "frontendSidecar": "fe",
            }
        ]
    )
    doc["spec"]["components"][0]["podTemplate"]["spec"]["containers"].append(
        {"name": "fe", "image": "frontend:1.5.1", "envFrom": SIDECAR_ENV_FROM}
    )
    path = tmp_path / "dgd.yaml"
    path.write_text(yaml.safe_dump(doc))
    objs = render(path)
    (dep,) = [o for o in objs if o["kind"] == "Deployment"]
    containers = dep["spec"]["template"]["spec"]["containers"]
    (sidecar,) = [c for c in containers if c["name"] == "fe"]
    assert sidecar["envFrom"] == SIDECAR_ENV_FROM
    with pytest.raises(RenderError) as info:
        render(path, source_api_version="v1alpha1")
    [problem] = info.value.problems
    assert problem.path == ("spec", "components", 0, "podTemplate", "spec", "containers", 1)
    assert "envFrom other than one secretRef" in problem.message
