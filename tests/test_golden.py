"""Golden files: ``samples/<name>/input`` rendered through the real CLI must equal
``samples/<name>/expected.yaml`` byte for byte.

``python -m pytest tests/test_golden.py --update-golden`` rewrites the expected files
from the current output (review the diff like code). Without the flag a difference fails
with a unified diff, and a missing ``expected.yaml`` fails.

A golden file only pins *whatever the renderer printed when it was refreshed*. So each
sample also has a few explicit assertions (``test_facts_<sample>``) of the facts it
exists to show, written from ``spec/dynamo-pod-spec.md`` and ``spec/dynamo-objects.md``:
a golden refreshed from a wrong output cannot pass review silently. Known deviations
from the spec are ``xfail(strict=True)`` facts, so fixing them is noticed.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import pytest
import yaml
from support.cli import run_cli
from support.golden import check_golden
from support.paths import SAMPLES
from support.rendering import render_stdout

from dyn_gitops.models.v1alpha1 import DynamoGraphDeployment

Obj = dict[str, Any]

SAMPLE_DIRS = sorted(p.parent for p in SAMPLES.glob("*/input") if p.is_dir())
SAMPLE_NAMES = [p.name for p in SAMPLE_DIRS]

# Labels and annotations used by several facts.
COMPONENT = "nvidia.com/dynamo-component"
COMPONENT_TYPE = "nvidia.com/dynamo-component-type"
SUB_COMPONENT_TYPE = "nvidia.com/dynamo-sub-component-type"
WORKER_HASH = "nvidia.com/dynamo-worker-hash"
DISCOVERY_BACKEND_LABEL = "nvidia.com/dynamo-discovery-backend"
DISCOVERY_ENABLED_LABEL = "nvidia.com/dynamo-discovery-enabled"
DESIRED_REPLICAS = "dyn-gitops.io/desired-replicas"
MANAGED_REPLICAS = "dyn-gitops.io/managed-replicas"
ARGOCD_SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
ARGOCD_COMPARE_OPTIONS = "argocd.argoproj.io/compare-options"
FLUX_PRUNE = "kustomize.toolkit.fluxcd.io/prune"
CONTROLLER_ANNOTATIONS = (
    DESIRED_REPLICAS,
    MANAGED_REPLICAS,
    ARGOCD_SYNC_OPTIONS,
    ARGOCD_COMPARE_OPTIONS,
    FLUX_PRUNE,
)


# --- golden comparison ---------------------------------------------------------------------


@functools.cache
def _render(sample: str) -> str:
    """stdout of ``dyn-gitops render samples/<sample>/input`` (the real entry point)."""
    return render_stdout(str(SAMPLES / sample / "input"), subprocess=True, quiet=True)


@pytest.mark.golden
@pytest.mark.parametrize("sample", SAMPLE_NAMES)
def test_golden(sample: str, update_golden: bool) -> None:
    check_golden(
        SAMPLES / sample / "expected.yaml",
        _render(sample),
        update_golden,
        produced_by=f"dyn-gitops render samples/{sample}/input",
    )


# --- helpers for the facts -----------------------------------------------------------------


@functools.cache
def _objects(sample: str) -> tuple[Obj, ...]:
    return tuple(d for d in yaml.safe_load_all(_render(sample)) if d is not None)


def objects(sample: str) -> list[Obj]:
    return list(_objects(sample))


def of_kind(objs: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objs if o["kind"] == kind]


def get(objs: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}: " + ", ".join(
        f"{o['kind']}/{o['metadata']['name']}" for o in objs
    )
    return found[0]


def names(objs: list[Obj], kind: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs if o["kind"] == kind)


def component(objs: list[Obj], kind: str, service: str, dgd: str | None = None) -> Obj:
    """The Deployment/Service of a DGD service (worker names carry a hash suffix)."""
    found = [
        o
        for o in objs
        if o["kind"] == kind
        and (o["metadata"].get("labels") or {}).get(COMPONENT) == service
        and (
            dgd is None
            or o["metadata"]["labels"].get("nvidia.com/dynamo-graph-deployment-name") == dgd
        )
    ]
    assert len(found) == 1, f"expected one {kind} for service {service}, found {len(found)}"
    return found[0]


def pod(deployment: Obj) -> Obj:
    return deployment["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def container(deployment: Obj, name: str = "main") -> Obj:
    found = [c for c in pod(deployment)["containers"] if c["name"] == name]
    assert len(found) == 1, f"no container {name!r}"
    return found[0]


def env(c: Obj) -> dict[str, Any]:
    """name -> value (or the valueFrom mapping); fails on duplicate names."""
    out: dict[str, Any] = {}
    for e in c.get("env") or []:
        assert e["name"] not in out, f"duplicate env {e['name']}"
        out[e["name"]] = e.get("value", e.get("valueFrom"))
    return out


def annotations(o: Obj) -> dict[str, str]:
    return dict(o["metadata"].get("annotations") or {})


def pod_labels(deployment: Obj) -> dict[str, str]:
    return dict(deployment["spec"]["template"]["metadata"]["labels"])


def volumes(deployment: Obj) -> dict[str, Obj]:
    return {v["name"]: v for v in pod(deployment).get("volumes") or []}


def mounts(c: Obj) -> list[tuple[str, str]]:
    return [(m["name"], m["mountPath"]) for m in c.get("volumeMounts") or []]


def load_input(sample: str, filename: str) -> Obj:
    docs = list(yaml.safe_load_all((SAMPLES / sample / "input" / filename).read_text()))
    return docs[0]  # type: ignore[no-any-return]


# --- checks over every sample --------------------------------------------------------------


def test_every_sample_has_facts() -> None:
    missing = [s for s in SAMPLE_NAMES if f"test_facts_{s.replace('-', '_')}" not in globals()]
    assert not missing, f"samples without a test_facts_<name> test: {missing}"


@pytest.mark.parametrize("sample", SAMPLE_NAMES)
def test_sample_settings_and_images(sample: str) -> None:
    settings = yaml.safe_load((SAMPLES / sample / "input" / "dyn-gitops.yaml").read_text())
    assert settings["namespace"] == "demo"
    image_re = re.compile(r"^[a-z0-9.-]+(/[a-z0-9._-]+)+:[0-9][A-Za-z0-9._-]*$")
    pods = [(d["metadata"]["name"], pod(d)) for d in of_kind(objects(sample), "Deployment")]
    pods += [
        (f"{p['metadata']['name']}/{c['name']}", c["spec"]["podSpec"])
        for p in of_kind(objects(sample), "PodCliqueSet")
        for c in p["spec"]["template"]["cliques"]
    ]
    assert pods
    for name, spec in pods:
        for c in spec["containers"]:
            assert image_re.match(c.get("image", "")), (
                f"{name}/{c['name']}: image {c.get('image')!r} is not a "
                "concrete registry/repository:tag reference"
            )
    assert all(o["metadata"]["namespace"] == "demo" for o in objects(sample))


# --- one fact test per sample --------------------------------------------------------------


def test_facts_vllm_agg() -> None:
    objs = objects("vllm-agg")
    frontend = get(objs, "Deployment", "vllm-agg-frontend")
    assert frontend["spec"]["replicas"] == 1
    assert not set(CONTROLLER_ANNOTATIONS) & set(annotations(frontend))
    # default (managed-replicas on): the worker's replicas belong to the controller
    worker = component(objs, "Deployment", "VllmDecodeWorker")
    whash = worker["metadata"]["labels"][WORKER_HASH]
    assert re.fullmatch(r"[0-9a-f]{8}", whash)
    assert worker["metadata"]["name"] == f"vllm-agg-vllmdecodeworker-{whash}"
    assert "replicas" not in worker["spec"]
    ann = annotations(worker)
    assert ann[DESIRED_REPLICAS] == "2"
    assert ann[MANAGED_REPLICAS] == "true"
    assert "Prune=false" in ann[ARGOCD_SYNC_OPTIONS].split(",")
    assert ann[FLUX_PRUNE] == "disabled"
    main = container(worker)
    assert main["command"] == ["python3", "-m", "dynamo.vllm"]
    assert env(main)["DYN_NAMESPACE_WORKER_SUFFIX"] == whash
    assert env(main)["DYN_NAMESPACE"] == "demo-vllm-agg"
    assert pod(worker)["serviceAccountName"] == "vllm-agg-k8s-service-discovery"
    # k8s discovery (default): RBAC per DGD and a Service for every component
    assert names(objs, "Service") == ["vllm-agg-frontend", f"vllm-agg-vllmdecodeworker-{whash}"]
    assert get(objs, "Service", "vllm-agg-frontend")["spec"]["ports"] == [
        {"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}
    ]
    get(objs, "Role", "vllm-agg-k8s-service-discovery-role")


def test_facts_vllm_disagg() -> None:
    objs = objects("vllm-disagg")
    prefill = component(objs, "Deployment", "VllmPrefillWorker")
    decode = component(objs, "Deployment", "VllmDecodeWorker")
    # one hash over all workers, on both names
    whash = prefill["metadata"]["labels"][WORKER_HASH]
    assert decode["metadata"]["labels"][WORKER_HASH] == whash
    assert prefill["metadata"]["name"] == f"vllm-disagg-vllmprefillworker-{whash}"
    assert decode["metadata"]["name"] == f"vllm-disagg-vllmdecodeworker-{whash}"
    for dep, sub, flag in (
        (prefill, "prefill", "--is-prefill-worker"),
        (decode, "decode", "--is-decode-worker"),
    ):
        labels = pod_labels(dep)
        # worker + subComponentType prefill/decode is that v1beta1 type
        # (sharedComponentTypeToHub, api/v1alpha1/shared_spec_conversion.go @ 2a6da14c8),
        # the sub-component label kept (GetDCDKubeLabels)
        assert labels[COMPONENT_TYPE] == sub
        assert labels[SUB_COMPONENT_TYPE] == sub
        assert dep["metadata"]["labels"][SUB_COMPONENT_TYPE] == sub
        main = container(dep)
        assert main["command"] == ["python3", "-m", "dynamo.vllm"]
        assert flag in main["args"]
        assert env(main)["DYN_COMPONENT"] == sub
        assert [p["name"] for p in main["ports"]] == ["system", "nixl"]
    assert annotations(prefill)[DESIRED_REPLICAS] == "2"
    assert annotations(decode)[DESIRED_REPLICAS] == "1"
    svc = component(objs, "Service", "VllmPrefillWorker")
    assert svc["spec"]["selector"] == {
        COMPONENT: "VllmPrefillWorker",
        COMPONENT_TYPE: "prefill",
        "nvidia.com/dynamo-namespace": "demo-vllm-disagg",
    }


def test_facts_planner() -> None:
    objs = objects("planner")
    planner = get(objs, "Deployment", "vllm-disagg-planner-planner")  # no worker hash
    assert planner["spec"]["replicas"] == 1
    assert not set(CONTROLLER_ANNOTATIONS) & set(annotations(planner))
    assert pod(planner)["serviceAccountName"] == "planner-serviceaccount"
    main = container(planner)
    assert main["ports"] == [
        {"name": "metrics", "containerPort": 9085, "protocol": "TCP"},
        {"name": "system", "containerPort": 9090, "protocol": "TCP"},
    ]
    e = env(main)
    assert e["PLANNER_PROMETHEUS_PORT"] == "9085"
    assert e["DYN_SYSTEM_PORT"] == "9090"
    assert e["DYN_COMPONENT"] == "planner"
    assert "DYN_SYSTEM_ENABLED" not in e  # worker-only default
    assert main["startupProbe"]["httpGet"] == {"path": "/live", "port": "system"}
    # extraPodSpec volume + mainContainer mount, then shared memory (pod-spec 5.12)
    assert volumes(planner)["planner-profile-data"]["configMap"] == {"name": "planner-profile-data"}
    assert mounts(main) == [
        ("planner-profile-data", "/workspace/profiling_results"),
        ("shared-memory", "/dev/shm"),
    ]
    binding = get(objs, "RoleBinding", "planner-serviceaccount-binding")
    assert binding["roleRef"]["name"] == "dynamo-platform-dynamo-operator-planner"
    get(objs, "ServiceAccount", "planner-serviceaccount")
    # a non-DGD input passes through unchanged
    assert get(objs, "ConfigMap", "planner-profile-data") == load_input(
        "planner", "planner-profile-data.yaml"
    )


def test_facts_sglang_agg() -> None:
    objs = objects("sglang-agg")
    worker = component(objs, "Deployment", "decode")
    assert worker["metadata"]["name"].startswith("sglang-agg-decode-")
    main = container(worker)
    assert main["command"] == ["python3", "-m", "dynamo.sglang"]
    assert main["args"][:2] == ["--model-path", "Qwen/Qwen3-0.6B"]
    e = env(main)
    assert "VLLM_CACHE_ROOT" not in e
    assert e["NIXL_TELEMETRY_ENABLE"] == "n"
    # single node: no SGLang flag injection, no extra nixl ports
    assert "--dist-init-addr" not in main["args"]
    assert [p["name"] for p in main["ports"]] == ["system", "nixl"]
    assert main["envFrom"] == [{"secretRef": {"name": "hf-token-secret"}}]


def test_facts_trtllm_agg() -> None:
    objs = objects("trtllm-agg")
    worker = component(objs, "Deployment", "TRTLLMWorker")
    main = container(worker)
    # single node TRT-LLM: command untouched, no MPI/SSH plumbing (pod-spec 7.4)
    assert main["command"] == ["python3", "-m", "dynamo.trtllm"]
    assert main["args"][-1] == "./examples/backends/trtllm/engine_configs/qwen3/agg.yaml"
    assert "OMPI_MCA_orte_keep_fqdn_hostnames" not in env(main)
    assert mounts(main) == [("shared-memory", "/dev/shm")]
    assert list(volumes(worker)) == ["shared-memory"]
    assert not of_kind(objs, "Secret")
    assert main["readinessProbe"]["httpGet"] == {"path": "/health", "port": "system"}


def test_facts_pvc_cache() -> None:
    objs = objects("pvc-cache")
    # only create: true is rendered (objects 5.1)
    assert names(objs, "PersistentVolumeClaim") == ["model-cache"]
    assert get(objs, "PersistentVolumeClaim", "model-cache")["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "100Gi"}},
        "storageClassName": "standard-rwx",
    }
    worker = component(objs, "Deployment", "VllmWorker")
    vols = volumes(worker)
    assert vols["model-cache"]["persistentVolumeClaim"] == {"claimName": "model-cache"}
    assert vols["compile-cache"]["persistentVolumeClaim"] == {"claimName": "compile-cache"}
    main = container(worker)
    assert mounts(main) == [
        ("model-cache", "/opt/models"),
        ("compile-cache", "/root/.cache/vllm"),
        ("shared-memory", "/dev/shm"),
    ]
    # vLLM compilation cache: env appended by the backend, after the sorted env
    assert main["env"][-1] == {"name": "VLLM_CACHE_ROOT", "value": "/root/.cache/vllm"}
    frontend = get(objs, "Deployment", "vllm-pvc-frontend")
    assert list(volumes(frontend)) == ["shared-memory"]


def test_facts_scaling_adapter() -> None:
    objs = objects("scaling-adapter")
    dgdsa = "DynamoGraphDeploymentScalingAdapter"
    assert names(objs, dgdsa) == ["sglang-disagg-decode", "sglang-disagg-frontend"]
    decode_sa = get(objs, dgdsa, "sglang-disagg-decode")
    assert decode_sa["apiVersion"] == "nvidia.com/v1alpha1"
    assert decode_sa["spec"] == {
        "replicas": 2,
        "dgdRef": {"name": "sglang-disagg", "serviceName": "decode"},
    }
    assert decode_sa["metadata"]["labels"] == {
        COMPONENT: "decode",
        "nvidia.com/dynamo-graph-deployment-name": "sglang-disagg",
    }
    assert get(objs, dgdsa, "sglang-disagg-frontend")["spec"]["replicas"] == 1  # unset -> 1
    # the adapter owns the replicas: none in the rendered Deployments
    decode = component(objs, "Deployment", "decode")
    assert "replicas" not in decode["spec"]
    assert DESIRED_REPLICAS not in annotations(decode)
    frontend = get(objs, "Deployment", "sglang-disagg-frontend")
    assert "replicas" not in frontend["spec"]
    # scalingAdapter.enabled: false is no adapter
    prefill = component(objs, "Deployment", "prefill")
    assert annotations(prefill)[DESIRED_REPLICAS] == "1"


def test_facts_ingress_virtualservice() -> None:
    objs = objects("ingress-virtualservice")
    assert names(objs, "Ingress") == ["vllm-agg-frontend", "vllm-agg-internalfrontend"]
    assert names(objs, "VirtualService") == ["vllm-agg-frontend", "vllm-agg-internalfrontend"]
    default = get(objs, "Ingress", "vllm-agg-frontend")["spec"]
    assert default["ingressClassName"] == "nginx"
    assert default["rules"][0]["host"] == "vllm-agg.llm.example.com"
    assert default["rules"][0]["http"]["paths"] == [
        {
            "path": "/",
            "pathType": "Prefix",
            "backend": {"service": {"name": "vllm-agg-frontend", "port": {"number": 8000}}},
        }
    ]
    assert default["tls"] == [
        {"hosts": ["vllm-agg.llm.example.com"], "secretName": "dynamo-wildcard-tls"}
    ]
    vs = get(objs, "VirtualService", "vllm-agg-frontend")
    assert vs["apiVersion"] == "networking.istio.io/v1beta1"
    assert vs["spec"]["gateways"] == ["istio-system/dynamo-gateway"]
    assert vs["spec"]["hosts"] == ["vllm-agg.llm.example.com"]
    assert vs["spec"]["http"][0]["route"] == [
        {"destination": {"host": "vllm-agg-frontend", "port": {"number": 8000}}}
    ]
    # the service's own ingress block wins over the settings
    own = get(objs, "Ingress", "vllm-agg-internalfrontend")
    assert own["spec"]["ingressClassName"] == "traefik"
    assert own["spec"]["rules"][0]["host"] == "internal-vllm.corp.example.net"
    assert own["spec"]["tls"] == [
        {"hosts": ["internal-vllm.corp.example.net"], "secretName": "corp-tls"}
    ]
    # ingress.annotations are accepted by the schema but not applied (objects 5.6)
    assert not [k for k in annotations(own) if not k.startswith("dyn-gitops.io/")]
    assert get(objs, "VirtualService", "vllm-agg-internalfrontend")["spec"]["gateways"] == [
        "istio-system/internal-gateway"
    ]


def test_facts_discovery_etcd() -> None:
    objs = objects("discovery-etcd")
    # setting etcd: no discovery RBAC for vllm-etcd; the annotated vllm-k8s has it
    assert names(objs, "ServiceAccount") == [
        "planner-serviceaccount",
        "vllm-k8s-k8s-service-discovery",
    ]
    assert names(objs, "Role") == ["vllm-k8s-k8s-service-discovery-role"]
    assert "vllm-etcd-k8s-service-discovery-binding" not in names(objs, "RoleBinding")
    # etcd: a Service only for the frontend; k8s discovery: one per component
    services = names(objs, "Service")
    assert [s for s in services if s.startswith("vllm-etcd-")] == ["vllm-etcd-frontend"]
    assert len([s for s in services if s.startswith("vllm-k8s-")]) == 2
    for service in ("Frontend", "VllmDecodeWorker"):
        etcd = component(objs, "Deployment", service, dgd="vllm-etcd")
        assert pod(etcd)["serviceAccountName"] == "default"
        e = env(container(etcd))
        assert "DYN_DISCOVERY_BACKEND" not in e
        assert e["ETCD_ENDPOINTS"] == "http://etcd.dynamo-system.svc.cluster.local:2379"
        assert e["NATS_SERVER"] == "nats://nats.dynamo-system.svc.cluster.local:4222"
        assert DISCOVERY_BACKEND_LABEL not in pod_labels(etcd)
        k8s = component(objs, "Deployment", service, dgd="vllm-k8s")
        assert pod(k8s)["serviceAccountName"] == "vllm-k8s-k8s-service-discovery"
        assert env(container(k8s))["DYN_DISCOVERY_BACKEND"] == "kubernetes"
        assert pod_labels(k8s)[DISCOVERY_BACKEND_LABEL] == "kubernetes"
        assert pod_labels(k8s)[DISCOVERY_ENABLED_LABEL] == "true"


def test_facts_extrapodspec_merge() -> None:
    objs = objects("extrapodspec-merge")
    worker = component(objs, "Deployment", "VllmWorker")
    spec = pod(worker)
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert spec["terminationGracePeriodSeconds"] == 300
    # a user securityContext is used as-is: no fsGroup 1000 default (pod-spec 5.7)
    assert spec["securityContext"] == {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000}
    assert list(volumes(worker)) == ["engine-config", "logs", "shared-memory"]
    # sidecars are appended after main, untouched (no defaults injected)
    assert [c["name"] for c in spec["containers"]] == ["main", "log-shipper"]
    shipper = container(worker, "log-shipper")
    assert "env" not in shipper and "ports" not in shipper
    main = container(worker)
    assert main["command"] == ["/bin/sh", "-c"]
    assert len(main["args"]) == 1 and "python3 -m dynamo.vllm" in main["args"][0]
    # a non-empty ports list replaces the defaults (nixl is gone)
    assert [(p["name"], p["containerPort"]) for p in main["ports"]] == [
        ("system", 9090),
        ("metrics", 8081),
    ]
    e = env(main)
    # mainContainer env wins over service envs (mergeExtraPodSpecMainContainer,
    # api/v1alpha1/shared_spec_conversion.go @ 2a6da14c8)
    assert e["SHARED_SETTING"] == "from-main-container"
    assert e["VLLM_LOGGING_LEVEL"] == "DEBUG"
    assert e["DYN_SYSTEM_PORT"] == "9090"  # defaults kept
    # mainContainer resources beat top-level ones key by key (the same mergo merge @
    # 2a6da14c8; the 1.1 line had it the other way round)
    assert main["resources"] == {
        "requests": {"cpu": "4", "memory": "32Gi"},
        "limits": {"memory": "48Gi", "nvidia.com/gpu": "1"},
    }
    assert mounts(main) == [
        ("engine-config", "/etc/vllm"),
        ("logs", "/var/log/dynamo"),
        ("shared-memory", "/dev/shm"),
    ]
    # only `command` given on the frontend: the default args survive (mergo)
    frontend = container(get(objs, "Deployment", "vllm-eps-frontend"))
    assert frontend["command"] == ["python3"]
    assert frontend["args"] == ["-m", "dynamo.frontend"]


def test_facts_envfromsecret() -> None:
    objs = objects("envfromsecret")
    frontend = container(get(objs, "Deployment", "vllm-envfrom-frontend"))
    assert frontend["envFrom"] == [{"secretRef": {"name": "frontend-api-keys"}}]
    worker = container(component(objs, "Deployment", "VllmDecodeWorker"))
    # the secret is appended after the mainContainer's own envFrom
    assert worker["envFrom"] == [
        {"configMapRef": {"name": "vllm-tuning"}},
        {"secretRef": {"name": "hf-token-secret"}},
    ]
    # the secret is referenced, never rendered
    assert not of_kind(objs, "Secret")


def test_facts_graph_envs() -> None:
    objs = objects("graph-envs")
    frontend = container(get(objs, "Deployment", "vllm-envs-frontend"))
    worker = container(component(objs, "Deployment", "VllmDecodeWorker"))
    fe, we = env(frontend), env(worker)
    # graph envs reach every service ...
    assert fe["LOG_FORMAT"] == "graph-json"
    assert fe["HF_HUB_OFFLINE"] == "0"
    assert we["DYN_LOG"] == "info"
    # ... and beat operator defaults
    assert we["DYN_HEALTH_CHECK_ENABLED"] == "true"
    # service envs beat graph envs; mainContainer env beats both (the operator converts the
    # service to a v1beta1 pod template first: mergeExtraPodSpecMainContainer,
    # api/v1alpha1/shared_spec_conversion.go, then applyDGDTemplateDefaults @ 2a6da14c8)
    assert fe["DYN_LOG"] == "debug"
    assert fe["DYN_ROUTER_MODE"] == "kv"
    assert we["LOG_FORMAT"] == "main-container"
    assert we["HF_TOKEN"] == {"secretKeyRef": {"name": "hf-token-secret", "key": "HF_TOKEN"}}
    assert "DYN_ROUTER_MODE" not in we
    for c in (frontend, worker):
        listed = [e["name"] for e in c["env"]]
        assert listed == sorted(listed)


def test_facts_graph_envs_main_container_beats_graph() -> None:
    # was graph-beats-main-container (1.1); at 2a6da14c8 the graph envs are the lowest
    # layer above the defaults (applyDGDTemplateDefaults, internal/dynamo/graph.go)
    worker = container(component(objects("graph-envs"), "Deployment", "VllmDecodeWorker"))
    assert env(worker)["HF_HUB_OFFLINE"] == "1"


def test_facts_user_probes() -> None:
    objs = objects("user-probes")
    source = load_input("user-probes", "vllm-probes.yaml")["spec"]["services"]
    frontend = container(get(objs, "Deployment", "vllm-probes-frontend"))
    # service-level probes replace the default wholesale: no default field survives
    assert frontend["readinessProbe"] == source["Frontend"]["readinessProbe"]
    assert frontend["livenessProbe"]["initialDelaySeconds"] == 15  # default untouched
    worker = container(component(objs, "Deployment", "VllmDecodeWorker"))
    assert worker["livenessProbe"] == source["VllmDecodeWorker"]["livenessProbe"]
    assert worker["readinessProbe"] == source["VllmDecodeWorker"]["readinessProbe"]
    # mainContainer startupProbe replaces the default startup probe wholesale
    assert (
        worker["startupProbe"]
        == (source["VllmDecodeWorker"]["extraPodSpec"]["mainContainer"]["startupProbe"])
    )


def test_facts_shared_memory() -> None:
    objs = objects("shared-memory")
    frontend = get(objs, "Deployment", "vllm-shm-frontend")
    assert "shared-memory" not in volumes(frontend)
    assert all(path != "/dev/shm" for _, path in mounts(container(frontend)))
    worker = component(objs, "Deployment", "VllmDecodeWorker")
    assert volumes(worker)["shared-memory"] == {
        "name": "shared-memory",
        "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"},
    }
    assert mounts(container(worker))[-1] == ("shared-memory", "/dev/shm")


def test_facts_managed_replicas_off() -> None:
    objs = objects("managed-replicas-off")
    worker = component(objs, "Deployment", "VllmDecodeWorker")
    assert worker["spec"]["replicas"] == 2
    assert not set(CONTROLLER_ANNOTATIONS) & set(annotations(worker))
    assert get(objs, "Deployment", "vllm-agg-frontend")["spec"]["replicas"] == 1
    # same graph as samples/vllm-agg: only the replica ownership differs
    assert (
        worker["metadata"]["name"]
        == component(objects("vllm-agg"), "Deployment", "VllmDecodeWorker")["metadata"]["name"]
    )


def test_facts_epp_sidecar() -> None:
    objs = objects("epp-sidecar")
    # EPP RBAC (cluster-wide mode), not owned by the DGD
    get(objs, "ServiceAccount", "epp-serviceaccount")
    assert get(objs, "RoleBinding", "epp-serviceaccount-binding")["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "dynamo-platform-dynamo-operator-epp",
    }
    # EPP ConfigMap: the inline config plus apiVersion/kind, through the operator's Go
    # struct: plugins' absent name/parameters and profile plugins' absent weight written as
    # "" / null (internal/dynamo/epp/config.go @ 2a6da14c8)
    source = load_input("epp-sidecar", "qwen-gaie-agg.yaml")["spec"]["services"]
    config = copy.deepcopy(source["Epp"]["eppConfig"]["config"])
    for plugin in config["plugins"]:
        plugin.setdefault("name", "")
        plugin.setdefault("parameters", None)
    for profile in config["schedulingProfiles"]:
        for ref in profile["plugins"]:
            ref.setdefault("weight", None)
    cm = get(objs, "ConfigMap", "qwen-agg-epp-config")
    assert yaml.safe_load(cm["data"]["epp-config-dynamo.yaml"]) == {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        **config,
    }
    pool = get(objs, "InferencePool", "qwen-agg-pool")["spec"]
    assert pool["targetPorts"] == [{"number": 8000}]
    # the workers' class (epp/inference_pool.go @ 2a6da14c8)
    assert pool["selector"]["matchLabels"] == {
        "nvidia.com/dynamo-component-class": "worker",
        "nvidia.com/dynamo-namespace": "demo-qwen-agg",
    }
    assert pool["endpointPickerRef"] == {
        "kind": "Service",
        "name": "qwen-agg-epp",
        "port": {"number": 9002},
    }
    assert get(objs, "Service", "qwen-agg-epp")["spec"]["ports"] == [
        {
            "name": "grpc",
            "port": 9002,
            "targetPort": 9002,
            "protocol": "TCP",
            "appProtocol": "http2",
        }
    ]
    epp = get(objs, "Deployment", "qwen-agg-epp")
    assert pod(epp)["serviceAccountName"] == "epp-serviceaccount"
    assert pod(epp)["terminationGracePeriodSeconds"] == 130
    assert volumes(epp)["epp-config"]["configMap"]["name"] == "qwen-agg-epp-config"
    main = container(epp)
    assert "command" not in main  # image entrypoint
    assert main["args"][:2] == ["--pool-name", "qwen-agg-pool"]  # component_epp.go @ 2a6da14c8
    assert main["livenessProbe"]["grpc"] == {"port": 9003, "service": "inference-extension"}
    # the worker carries a frontend sidecar instead of a Frontend service
    assert not [n for n in names(objs, "Deployment") if n.endswith("-frontend")]
    worker = component(objs, "Deployment", "VllmDecodeWorker")
    assert [c["name"] for c in pod(worker)["containers"]] == ["main", "sidecar-frontend"]
    sidecar = container(worker, "sidecar-frontend")
    assert sidecar["image"] == "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0"
    assert sidecar["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert sidecar["args"] == ["--router-mode", "direct"]
    assert sidecar["envFrom"] == [{"secretRef": {"name": "hf-token-secret"}}]
    se = env(sidecar)
    assert se["DYN_COMPONENT"] == "frontend"
    assert se["DYN_NAMESPACE_PREFIX"] == "demo-qwen-agg"
    assert volumes(worker)["shared-memory"]["emptyDir"]["sizeLimit"] == "2Gi"


def test_facts_epp_sidecar_config_keys_sorted() -> None:
    cm = get(objects("epp-sidecar"), "ConfigMap", "qwen-agg-epp-config")

    def unsorted(node: Any, path: str = "") -> list[str]:
        if isinstance(node, dict):
            out = [path or "/"] if list(node) != sorted(node) else []
            return out + [p for k, v in node.items() for p in unsorted(v, f"{path}/{k}")]
        if isinstance(node, list):
            return [p for i, v in enumerate(node) for p in unsorted(v, f"{path}/{i}")]
        return []

    # PyYAML keeps the document's key order in the mappings it builds
    assert unsorted(yaml.safe_load(cm["data"]["epp-config-dynamo.yaml"])) == []


def _without_source_path(text: str) -> str:
    return "".join(
        ln for ln in text.splitlines(keepends=True) if "dyn-gitops.io/source-path:" not in ln
    )


def _worker_hash(text: str) -> str:
    """The worker hash a rendered stream names its workers with."""
    found = re.findall(r"nvidia\.com/dynamo-worker-hash: '?([0-9a-f]{8})'?", text)
    assert found, "no worker hash"
    return str(found[0])


def _documents_except_dgds(text: str) -> list[str]:
    return [d for d in text.split("---\n") if d and "\nkind: DynamoGraphDeployment\n" not in d]


def test_facts_v1beta1_pair() -> None:
    """A v1beta1 DGD renders byte-identically to its v1alpha1 twin (dynamo-pod-spec.md 4, 9);
    only the source-path annotation differs; the source DGD is emitted as written (v1beta1),
    or, with source-api-version v1alpha1, as the v1alpha1 DGD it converts to, equal to the
    twin."""
    twin = run_cli(
        "render",
        "--namespace",
        "demo",
        str(SAMPLES / "v1beta1-pair" / "v1alpha1" / "sglang-disagg.yaml"),
    )
    assert twin.code == 0, twin.stderr
    # The worker hash v2 is over each side's converted spec, and the operator's conversion is
    # not exact for this pair: mergo lets extraPodSpec.mainContainer.envFrom replace the
    # envFromSecret entry, so the v1alpha1 twin hashes differently (values printed by the
    # operator's ComputeDGDWorkersSpecHash at 2a6da14c8 for each file, as applied: without the
    # origin-version stamp, which the hash covers).
    as_applied = ("--namespace", "demo", "--origin-version", "none")
    twin_applied = run_cli("render", *as_applied, str(SAMPLES / "v1beta1-pair" / "v1alpha1"))
    beta_applied = run_cli("render", *as_applied, str(SAMPLES / "v1beta1-pair" / "input"))
    assert "-2b9cd7df" in twin_applied.stdout and "-8b55d4f4" in beta_applied.stdout
    beta_hash = _worker_hash(_render("v1beta1-pair"))
    assert _documents_except_dgds(_without_source_path(_render("v1beta1-pair"))) == (
        _documents_except_dgds(
            _without_source_path(twin.stdout.replace(_worker_hash(twin.stdout), beta_hash))
        )
    )
    objs = objects("v1beta1-pair")
    [beta_emitted] = of_kind(objs, "DynamoGraphDeployment")
    assert (
        beta_emitted["apiVersion"] == "nvidia.com/v1beta1" and "components" in beta_emitted["spec"]
    )
    # for clusters whose CRDs serve v1alpha1 only: the v1alpha1 DGD it converts to
    as_alpha = run_cli(
        "render",
        "--namespace",
        "demo",
        "--source-api-version",
        "v1alpha1",
        str(SAMPLES / "v1beta1-pair" / "input" / "sglang-disagg.yaml"),
    )
    assert as_alpha.code == 0, as_alpha.stderr
    [emitted] = of_kind(
        [yaml.safe_load(d) for d in as_alpha.stdout.split("---\n") if d], "DynamoGraphDeployment"
    )
    assert emitted["apiVersion"] == "nvidia.com/v1alpha1"
    assert annotations(emitted)["dyn-gitops.io/source-api-version"] == "nvidia.com/v1beta1"
    twin_alpha = run_cli(
        "render",
        "--namespace",
        "demo",
        "--source-api-version",
        "v1alpha1",
        str(SAMPLES / "v1beta1-pair" / "v1alpha1" / "sglang-disagg.yaml"),
    )
    [written] = of_kind(
        [yaml.safe_load(d) for d in twin_alpha.stdout.split("---\n") if d],
        "DynamoGraphDeployment",
    )

    def model(dgd: Obj) -> Obj:
        dgd = copy.deepcopy(dgd)
        dgd["metadata"]["annotations"] = {
            k: v
            for k, v in annotations(dgd).items()
            if not k.startswith("dyn-gitops.io/") and k != "nvidia.com/current-worker-hash-v2"
        }
        return DynamoGraphDeployment.model_validate(dgd).model_dump(exclude_none=True)

    assert model(emitted) == model(written)
    # as written, for clusters with Dynamo's own v1beta1 CRDs
    as_written = run_cli(
        "render",
        "--namespace",
        "demo",
        "--source-api-version",
        "as-written",
        str(SAMPLES / "v1beta1-pair" / "input" / "sglang-disagg.yaml"),
    )
    assert as_written.code == 0, as_written.stderr
    [beta] = of_kind(
        [yaml.safe_load(d) for d in as_written.stdout.split("---\n") if d], "DynamoGraphDeployment"
    )
    assert beta["apiVersion"] == "nvidia.com/v1beta1" and "components" in beta["spec"]
    decode = component(objs, "Deployment", "decode")
    # type: decode renders as decode, with the sub-component label the operator restores
    # through v1alpha1 (dynamocomponentdeployment_renderer.go, v1beta1_helpers.go @ 2a6da14c8)
    assert pod_labels(decode)[COMPONENT_TYPE] == "decode"
    assert pod_labels(decode)[SUB_COMPONENT_TYPE] == "decode"
    main = container(decode)
    assert env(main)["DYN_COMPONENT"] == "decode"
    assert env(main)["DYN_LOG"] == "info"  # graph env
    assert env(main)["SGLANG_LOG_LEVEL"] == "debug"
    assert main["envFrom"] == [
        {"configMapRef": {"name": "sglang-tuning"}},
        {"secretRef": {"name": "hf-token-secret"}},
    ]
    assert main["resources"] == {
        "requests": {"cpu": "8", "memory": "32Gi"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    assert main["readinessProbe"] == {
        "httpGet": {"path": "/health", "port": "system"},
        "periodSeconds": 15,
    }
    assert volumes(decode)["model-cache"] == {
        "name": "model-cache",
        "persistentVolumeClaim": {"claimName": "model-cache"},
    }
    assert volumes(decode)["shared-memory"]["emptyDir"]["sizeLimit"] == "16Gi"
    assert pod_labels(decode)["team"] == "inference"


def _lws(objs: list[Obj], dgd: str) -> Obj:
    found = [
        o
        for o in objs
        if o["kind"] == "LeaderWorkerSet"
        and o["metadata"]["labels"]["nvidia.com/dynamo-graph-deployment-name"] == dgd
    ]
    assert len(found) >= 1
    return found[0]


def _role(lws: Obj, role: str) -> Obj:
    return lws["spec"]["leaderWorkerTemplate"][f"{role}Template"]  # type: ignore[no-any-return]


def _role_main(lws: Obj, role: str) -> Obj:
    return _role(lws, role)["spec"]["containers"][0]  # type: ignore[no-any-return]


PROBES = {"livenessProbe", "readinessProbe", "startupProbe"}


def test_facts_multinode_lws() -> None:
    """LeaderWorkerSet path (dynamo-objects.md 6, dynamo-pod-spec.md 6.1, 7.2-7.4)."""
    objs = objects("multinode-lws")
    # sglang: replicas 2 -> one LWS <dcd>-0 natively scaled, no PodGroup (#9612, v1.2;
    # generateLeaderWorkerSet @ 2a6da14c8); no Deployment for the worker. The sample's
    # managed replicas: the companion controller sizes it, as a managed worker Deployment
    sg = [
        o
        for o in objs
        if o["kind"] == "LeaderWorkerSet" and o["metadata"]["name"].startswith("sglang-mn-")
    ]
    assert len(sg) == 1 and not [
        d for d in of_kind(objs, "Deployment") if pod_labels(d).get(COMPONENT) == "decode"
    ]
    assert not of_kind(objs, "PodGroup")
    lws = sg[0]
    assert lws["metadata"]["name"].endswith("-0")
    assert "replicas" not in lws["spec"] and lws["spec"]["startupPolicy"] == "LeaderCreated"
    assert lws["metadata"]["annotations"]["dyn-gitops.io/managed-replicas"] == "true"
    assert lws["metadata"]["annotations"]["dyn-gitops.io/desired-replicas"] == "2"
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    assert "instance-id" not in lws["metadata"]["labels"]
    for role in ("leader", "worker"):
        tmpl = _role(lws, role)
        assert tmpl["metadata"]["labels"]["role"] == role
        assert "nvidia.com/selector" not in tmpl["metadata"]["labels"]
        assert "instance-id" not in tmpl["metadata"]["labels"]
        assert "scheduling.k8s.io/group-name" not in tmpl["metadata"].get("annotations", {})
        assert "schedulerName" not in tmpl["spec"]
    leader, worker = _role_main(sg[0], "leader"), _role_main(sg[0], "worker")
    assert leader["args"][-6:] == [
        "--dist-init-addr",
        "$(LWS_LEADER_ADDRESS):29500",
        "--nnodes",
        "2",
        "--node-rank",
        "0",
    ]
    assert worker["args"][-1] == "$(LWS_WORKER_INDEX)"
    assert set(leader) >= PROBES and not PROBES & set(worker)
    svc = component(objs, "Service", "decode", "sglang-mn")
    assert svc["spec"]["selector"]["role"] == "leader"
    # vLLM TP 16 > 8 GPUs, Ray (graph_test.go "multinode vllm", where no origin version is
    # stamped; the sample asks for ray, since a 1.5 origin stamp selects mp: ERRATA 4)
    ray = _lws(objs, "vllm-ray")
    assert _role_main(ray, "leader")["args"] == [
        "ray start --head --port=6379 && python3 -m dynamo.vllm --model Qwen/Qwen3-32B "
        "--tensor-parallel-size 16 --distributed-executor-backend ray"
    ]
    assert _role_main(ray, "worker")["args"] == [
        "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"
    ]
    # vLLM mp (annotation): flags, side-channel env, wait-for-leader init container + ConfigMap
    mp = _lws(objs, "vllm-mp")
    w = _role_main(mp, "worker")
    assert w["args"][-11:] == [
        "--distributed-executor-backend",
        "mp",
        "--nnodes",
        "2",
        "--master-addr",
        "$(LWS_LEADER_ADDRESS)",
        "--master-port",
        "29500",
        "--node-rank",
        "$(LWS_WORKER_INDEX)",
        "--headless",
    ]
    assert "--headless" in w["args"] and "--headless" not in _role_main(mp, "leader")["args"]
    assert env(w)["VLLM_NIXL_SIDE_CHANNEL_HOST"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    init = _role(mp, "worker")["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["wait-for-leader-mp"]
    assert "initContainers" not in _role(mp, "leader")["spec"]
    cm = get(objs, "ConfigMap", "vllm-mp-wait-leader-script")
    assert "wait-for-leader.py" in cm["data"]
    # vLLM data parallel across nodes: hybrid LB, worker start rank needs a shell
    dp = _lws(objs, "vllm-dp")
    assert "--data-parallel-size-local" in _role_main(dp, "leader")["args"]
    dpw = _role_main(dp, "worker")
    assert dpw["command"] == ["sh", "-c"]
    assert dpw["args"][0].startswith("exec python3 -m dynamo.vllm ")
    assert "--data-parallel-start-rank $(( 8 * $(LWS_WORKER_INDEX) ))" in dpw["args"][0]
    # TRT-LLM: MPI over SSH from the secret; worker runs sshd with a TCP readiness probe
    trt = _lws(objs, "trtllm-mn")
    for role in ("leader", "worker"):
        spec = _role(trt, role)["spec"]
        assert {
            "name": "mpi-run-ssh-secret",
            "secret": {"secretName": "mpi-run-ssh-secret", "defaultMode": 420},
        } in spec["volumes"]
        main = spec["containers"][0]
        assert {"name": "mpi-run-ssh-secret", "mountPath": "/ssh-pk", "readOnly": True} in main[
            "volumeMounts"
        ]
        assert env(main)["OMPI_MCA_orte_keep_fqdn_hostnames"] == "1"
    tw = _role_main(trt, "worker")
    assert set(tw) & PROBES == {"readinessProbe"}
    assert tw["readinessProbe"]["tcpSocket"] == {"port": 2222}
    assert "/usr/sbin/sshd -D" in tw["args"][0]
    tl = _role_main(trt, "leader")["args"][0]
    assert "mpirun " in tl and "-n 8 " in tl and "-x HF_TOKEN " in tl
    assert "trtllm-llmapi-launch python3 -m dynamo.trtllm" in tl
    assert not of_kind(objs, "Secret")  # the SSH secret is the operator's, never rendered


def test_facts_vllm_gms() -> None:
    """GPU Memory Service and failover (the operator's internal/dra/dra.go,
    internal/gms/gms.go and internal/dynamo/failover*.go @ 2a6da14c8; ERRATA 2)."""
    objs = objects("vllm-gms")
    claim = "intrapod-shared-gpu"
    socket_mount = ("gms-intrapod-control", "/gms-intrapod-control")
    for dgd, gpus in (("vllm-gms", 1), ("vllm-failover", 2)):
        rct = get(objs, "ResourceClaimTemplate", f"{dgd}-vllmworker-gpu")
        assert rct["apiVersion"] == "resource.k8s.io/v1"
        assert rct["spec"] == {
            "metadata": {},  # Go's empty template ObjectMeta
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpus",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "allocationMode": "ExactCount",
                                "count": gpus,
                            },
                        }
                    ]
                }
            },
        }
        worker = component(objs, "Deployment", "VllmWorker", dgd)
        spec = pod(worker)
        assert spec["resourceClaims"] == [
            {"name": claim, "resourceClaimTemplateName": f"{dgd}-vllmworker-gpu"}
        ]
        assert spec["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
        assert volumes(worker)["gms-intrapod-control"] == {
            "name": "gms-intrapod-control",
            "emptyDir": {},
        }
        (server,) = spec["initContainers"]
        assert server["name"] == "gms-server" and server["restartPolicy"] == "Always"
        assert server["command"] == ["python3", "-m", "gpu_memory_service.cli.server"]
        assert server["image"] == spec["containers"][0]["image"]
        assert env(server) == {"GMS_SOCKET_DIR": "/gms-intrapod-control"}
        assert server["resources"] == {"claims": [{"name": claim}]}
        assert mounts(server) == [socket_mount]
        assert "startupProbe" not in server  # gms.EnsureServerSidecar @ 2a6da14c8
        for c in spec["containers"]:
            assert c["resources"] == {"claims": [{"name": claim}]}  # no nvidia.com/gpu left
            assert socket_mount in mounts(c)
            assert env(c)["GMS_SOCKET_DIR"] == "/gms-intrapod-control"
        # only GMS services change: the frontend keeps a plain pod
        assert "resourceClaims" not in pod(component(objs, "Deployment", "Frontend", dgd))
    assert [
        c["name"]
        for c in pod(component(objs, "Deployment", "VllmWorker", "vllm-gms"))["containers"]
    ] == ["main"]
    # failover: engine-0 (active) and engine-1 (standby), staggered system/vLLM ports
    spec = pod(component(objs, "Deployment", "VllmWorker", "vllm-failover"))
    engines = spec["containers"]
    assert [c["name"] for c in engines] == ["engine-0", "engine-1"]
    for i, engine in enumerate(engines):
        e = env(engine)
        assert engine["ports"] == [
            {"name": f"system-{i}", "containerPort": 9090 + i, "protocol": "TCP"}
        ]
        assert engine["readinessProbe"]["httpGet"]["port"] == f"system-{i}"
        assert (e["ENGINE_ID"], e["CONTAINER_NAME"], e["DYN_SYSTEM_PORT"]) == (
            str(i),
            f"engine-{i}",
            str(9090 + i),
        )
        assert e["FAILOVER_LOCK_PATH"] == "/gms-intrapod-control/failover.lock"
        assert e["DYN_FORWARDPASS_METRIC_PORT"] == str(20380 + i)
        assert e["DYN_SYSTEM_STARTING_HEALTH_STATUS"] == "notready"
        assert e["DYN_VLLM_GMS_SHADOW_MODE"] == "true"
        assert (e["VLLM_NIXL_SIDE_CHANNEL_PORT"], e["DYN_VLLM_KV_EVENT_PORT"]) == (
            str(5600 + i),
            str(20080 + i),
        )
        assert e["DYN_KUBE_DISCOVERY_MODE"] == "container"
        assert "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS" not in e
    assert "--master-port" not in engines[0]["args"]
    assert engines[1]["args"][-2:] == ["--master-port", "29600"]


def _clique(objs: list[Obj], pcs: str, name: str) -> Obj:
    found = [
        c
        for c in get(objs, "PodCliqueSet", pcs)["spec"]["template"]["cliques"]
        if c["name"] == name
    ]
    assert len(found) == 1, name
    return found[0]


def test_facts_grove_multinode() -> None:
    """Grove path (dynamo-objects.md 7, dynamo-pod-spec.md 6.2, 7.1-7.5)."""
    objs = objects("grove-multinode")
    assert not of_kind(objs, "Deployment") and not of_kind(objs, "LeaderWorkerSet")
    assert names(objs, "PodCliqueSet") == ["trtllm-disagg-mn", "vllm-agg"]
    trt = get(objs, "PodCliqueSet", "trtllm-disagg-mn")["spec"]
    assert trt["replicas"] == 1
    # both have a multinode service (a scaling group): setting grove-safe-rollout keeps
    # Grove's RollingRecreate, as the operator renders it (tests/test_grove.py)
    for pcs in of_kind(objs, "PodCliqueSet"):
        assert pcs["spec"]["template"]["podCliqueScalingGroups"]
        assert "updateStrategy" not in pcs["spec"]
    t = trt["template"]
    # in the v1beta1 component order: the v1alpha1 conversion sorts the service names as
    # bytes ("Frontend" < "decode"), roles in order (GenerateGrovePodCliqueSet and
    # dgdServiceNamesInEmissionOrder @ 2a6da14c8)
    assert [c["name"] for c in t["cliques"]] == [
        "frontend",
        "decode-ldr",
        "decode-wkr",
        "prefill-ldr",
        "prefill-wkr",
    ]
    assert t["cliqueStartupType"] == "CliqueStartupTypeExplicit"  # TRT-LLM multinode
    assert t["terminationDelay"] == "4h0m0s"  # the setting grove-termination-delay
    assert t["headlessServiceConfig"] == {"publishNotReadyAddresses": True}
    assert t["podCliqueScalingGroups"] == [
        {
            "name": "decode",
            "cliqueNames": ["decode-ldr", "decode-wkr"],
            "replicas": 1,
            "minAvailable": 1,
        },
        {
            "name": "prefill",
            "cliqueNames": ["prefill-ldr", "prefill-wkr"],
            "replicas": 2,
            "minAvailable": 1,
        },
    ]
    ldr, wkr = (
        _clique(objs, "trtllm-disagg-mn", "decode-ldr"),
        _clique(objs, "trtllm-disagg-mn", "decode-wkr"),
    )
    assert ldr["spec"]["startsAfter"] == ["decode-wkr"]
    assert (wkr["spec"]["replicas"], wkr["spec"]["minAvailable"]) == (2, 2)  # nodeCount 3
    host = "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-decode"
    assert (
        f"-n 12 -H {host}-ldr-0.$(GROVE_HEADLESS_SERVICE),"
        f"{host}-wkr-0.$(GROVE_HEADLESS_SERVICE),{host}-wkr-1.$(GROVE_HEADLESS_SERVICE) "
        in ldr["spec"]["podSpec"]["containers"][0]["args"][0]
    )
    assert wkr["spec"]["podSpec"]["containers"][0]["readinessProbe"]["tcpSocket"] == {"port": 2222}
    for clique in (ldr, wkr):
        # the worker hash labels the clique and suffixes the Dynamo namespace (#12769), but
        # names nothing: the selector is the component's
        whash = clique["labels"]["nvidia.com/dynamo-worker-hash"]
        env = {e["name"]: e.get("value") for e in clique["spec"]["podSpec"]["containers"][0]["env"]}
        assert env["DYN_NAMESPACE_WORKER_SUFFIX"] == whash
        assert clique["labels"]["nvidia.com/selector"] == "trtllm-disagg-mn-decode"
        assert clique["labels"]["nvidia.com/dynamo-sub-component-type"] == "decode"
    # vLLM mp over 2 x 8 GPUs: Grove addressing, worker rank by shell arithmetic
    v_ldr = _clique(objs, "vllm-agg", "vllmdecodeworker-ldr")["spec"]["podSpec"]
    v_wkr = _clique(objs, "vllm-agg", "vllmdecodeworker-wkr")["spec"]["podSpec"]
    leader = (
        "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-vllmdecodeworker-ldr-0.$(GROVE_HEADLESS_SERVICE)"
    )
    assert v_ldr["containers"][0]["args"][-8:] == [
        "--nnodes",
        "2",
        "--master-addr",
        leader,
        "--master-port",
        "29500",
        "--node-rank",
        "0",
    ]
    assert v_wkr["containers"][0]["command"] == ["sh", "-c"]
    assert v_wkr["containers"][0]["args"][0].endswith(
        "--node-rank $((GROVE_PCLQ_POD_INDEX + 1)) --headless"
    )
    assert v_wkr["initContainers"][0]["name"] == "wait-for-leader-mp"
    assert _clique(objs, "vllm-agg", "frontend")["spec"]["replicas"] == 2
    # Services from the DGD controller: <dgd>-<service>, component selector, no role; a
    # worker with subComponentType decode is type decode (sharedComponentTypeToHub @ 2a6da14c8)
    svc = get(objs, "Service", "trtllm-disagg-mn-decode")
    assert svc["spec"]["selector"] == {
        COMPONENT: "decode",
        "nvidia.com/dynamo-component-type": "decode",
        "nvidia.com/dynamo-namespace": "demo-trtllm-disagg-mn",
    }
    assert names(objs, "ConfigMap") == [
        "trtllm-disagg-mn-wait-leader-script",
        "vllm-agg-wait-leader-script",
    ]
