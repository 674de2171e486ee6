"""Rendering changes of the Dynamo operator after 1.1 (``spec/upstream-1.5.md`` 1.2), each
test naming its upstream source: the operator's Go code at ``2a6da14c8`` (1.5.0-dev) or, for
what was released after it, the 1.5.0 release-note PR and the upstream file it was read
from (``docs/reference-behaviour.md`` says where a form is best-evidenced only).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from support.graph_cases import deployments, dgd, env, main, pod, render, render_error

from dyn_gitops import keys
from dyn_gitops.errors import UsageError
from dyn_gitops.kvtransfer import go_float32

Obj = dict[str, Any]

IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1"
WORKER_CMD = {
    "image": IMAGE,
    "command": ["python3"],
    "args": ["-m", "dynamo.vllm", "--model", "Qwen/Qwen3-0.6B"],
}
EPP_CONFIG = {
    "config": {
        "plugins": [{"type": "disagg-profile-handler"}],
        "schedulingProfiles": [{"name": "decode", "plugins": []}],
    }
}


def graph(**extra: Obj) -> Obj:
    """Frontend, decode worker, planner and EPP (Rust EPP: no eppConfig)."""
    services: Obj = {
        "Frontend": {
            "componentType": "frontend",
            "extraPodSpec": {"mainContainer": {"image": IMAGE}},
        },
        "decode": {
            "componentType": "decode",
            "frontendSidecar": {"image": IMAGE},
            "extraPodSpec": {"mainContainer": dict(WORKER_CMD)},
        },
        "Planner": {
            "componentType": "planner",
            "extraPodSpec": {"mainContainer": {"image": IMAGE}},
        },
        "Epp": {"componentType": "epp", "extraPodSpec": {"mainContainer": {"image": IMAGE}}},
    }
    for name, patch in extra.items():
        services[name] = {**services.get(name, {}), **patch}
    return dgd("g", services, namespace="ns")


def kinds(objs: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objs if o["kind"] == kind]


def container(dep: Obj, name: str) -> Obj:
    found: Obj = next(c for c in pod(dep)["containers"] if c["name"] == name)
    return found


# ----------------------------------------------------------------- 1. transport TLS env
TLS_SETTINGS = {
    "nats_address": "tls://nats.dynamo-system:4222",
    "nats_tls_ca_path": "/etc/certs/ca/ca.pem",
    "nats_tls_client_cert_path": "/etc/certs/client/cert.pem",
    "nats_tls_client_key_path": "/etc/certs/client/key.pem",
    "tcp_tls_cert_path": "/etc/certs/server/cert.pem",
    "tcp_tls_key_path": "/etc/certs/server/key.pem",
    "tcp_tls_ca_path": "/etc/certs/ca/ca.pem",
    "tcp_tls_client_cert_path": "/etc/certs/client/cert.pem",
    "tcp_tls_client_key_path": "/etc/certs/client/key.pem",
    "tcp_tls_client_ca_path": "/etc/certs/client-ca/ca.pem",
    "tcp_tls_server_name": "dynamo.internal",
}
TLS_ENV = {
    "NATS_TLS_CA_CERT_PATH": "/etc/certs/ca/ca.pem",
    "NATS_TLS_CLIENT_CERT_PATH": "/etc/certs/client/cert.pem",
    "NATS_TLS_CLIENT_KEY_PATH": "/etc/certs/client/key.pem",
    "DYN_TCP_TLS_CERT_PATH": "/etc/certs/server/cert.pem",
    "DYN_TCP_TLS_KEY_PATH": "/etc/certs/server/key.pem",
    "DYN_TCP_TLS_CA_CERT_PATH": "/etc/certs/ca/ca.pem",
    "DYN_TCP_TLS_CLIENT_CERT_PATH": "/etc/certs/client/cert.pem",
    "DYN_TCP_TLS_CLIENT_KEY_PATH": "/etc/certs/client/key.pem",
    "DYN_TCP_TLS_CLIENT_CA_CERT_PATH": "/etc/certs/client-ca/ca.pem",
    "DYN_TCP_TLS_SERVER_NAME": "dynamo.internal",
}


def test_transport_tls_env_in_every_main_container_and_the_frontend_sidecar(
    tmp_path: Path,
) -> None:
    """#13689 (v1.5.0): ``AddTransportTLSEnvVars`` (internal/dynamo/graph.go of the 1.5 line,
    read through the public index; tested upstream by ``TestAddTransportTLSEnvVars``) runs
    after ``AddStandardEnvVars`` on the main container of every DGD pod and in
    ``mergeFrontendSidecarDefaults``; an env the user set wins."""
    user = {"name": "DYN_TCP_TLS_SERVER_NAME", "value": "mine"}
    doc = graph(Frontend={"envs": [user]})
    deps = deployments(render(tmp_path, doc, **TLS_SETTINGS))
    assert set(deps) == {"Frontend", "decode", "Planner", "Epp"}
    for name, dep in deps.items():
        got = env(main(dep))
        want = {**TLS_ENV, "DYN_TCP_TLS_SERVER_NAME": "mine"} if name == "Frontend" else TLS_ENV
        assert {k: got.get(k) for k in TLS_ENV} == want, name
    sidecar = env(container(deps["decode"], "sidecar-frontend"))
    assert {k: sidecar.get(k) for k in TLS_ENV} == TLS_ENV


def test_transport_tls_env_absent_by_default(tmp_path: Path) -> None:
    """#13689: only the paths that are set are injected (all empty by default)."""
    for dep in deployments(render(tmp_path, graph())).values():
        assert not set(env(main(dep))) & set(TLS_ENV)


def test_transport_tls_env_on_the_grove_path(tmp_path: Path) -> None:
    """#13689: GenerateBasePodSpec serves the Grove path too."""
    objs = render(
        tmp_path,
        graph(),
        grove=True,
        tcp_tls_cert_path="/c",
        tcp_tls_key_path="/k",
        tcp_tls_ca_path="/ca",
    )
    (pcs,) = kinds(objs, "PodCliqueSet")
    for clique in pcs["spec"]["template"]["cliques"]:
        got = env(clique["spec"]["podSpec"]["containers"][0])
        assert got["DYN_TCP_TLS_CERT_PATH"] == "/c" and got["DYN_TCP_TLS_CA_CERT_PATH"] == "/ca"


@pytest.mark.parametrize(
    ("settings", "word"),
    [
        ({"tcp_tls_cert_path": "/c"}, "tcp-tls-key-path must be set together"),
        ({"tcp_tls_cert_path": "/c", "tcp_tls_key_path": "/k"}, "tcp-tls-ca-path is required"),
        ({"tcp_tls_ca_path": "/ca"}, "tcp-tls-cert-path and tcp-tls-key-path are required"),
        ({"nats_tls_ca_path": "/ca", "nats_address": "nats://n:4222"}, "tls:// address"),
        ({"nats_tls_ca_path": "/ca"}, "tls:// address"),
        (
            {
                "nats_tls_client_cert_path": "/c",
                "nats_tls_client_key_path": "/k",
                "nats_address": "tls://n:4222",
            },
            "nats-tls-client-cert-path requires nats-tls-ca-path",
        ),
        ({"service_mesh": "istio", "istio_tls_mode": "MUTUAL"}, "istio-client-certificate"),
    ],
)
def test_operator_config_combinations_it_refuses(
    tmp_path: Path, settings: dict[str, str], word: str
) -> None:
    """api/config/validation/validation.go (1.5 line, ``validateInfrastructure`` for
    #13689 and ``validateServiceMesh``): the operator does not start with these."""
    with pytest.raises(UsageError) as info:
        render(tmp_path, graph(), **settings)
    assert word in str(info.value)


# ------------------------------------------------------- 2. Istio DestinationRule per EPP
def test_epp_destination_rule_under_istio(tmp_path: Path) -> None:
    """#8270 ``GenerateEPPDestinationRule`` (internal/dynamo/graph.go @ 2a6da14c8) created
    by ``dgd_epp_reconciler.go`` when the mesh is on (#10773 ``serviceMesh``): named like the
    EPP Service, host ``<svc>.<ns>.svc.cluster.local``, TLS mode from
    ``serviceMesh.istio.tlsMode`` (default SIMPLE), insecureSkipVerify default true."""
    doc = graph()
    objs = render(tmp_path, doc, service_mesh="istio")
    (dr,) = kinds(objs, "DestinationRule")
    assert dr["apiVersion"] == "networking.istio.io/v1beta1"
    assert (dr["metadata"]["name"], dr["metadata"]["namespace"]) == ("g-epp", "ns")
    assert dr["spec"] == {
        "host": "g-epp.ns.svc.cluster.local",
        "trafficPolicy": {"tls": {"mode": "SIMPLE", "insecureSkipVerify": True}},
    }
    assert any(o["kind"] == "Service" and o["metadata"]["name"] == "g-epp" for o in objs)
    assert not kinds(render(tmp_path, doc), "DestinationRule")  # mesh off: none


def test_epp_destination_rule_tls_modes(tmp_path: Path) -> None:
    """GenerateEPPDestinationRule @ 2a6da14c8: client certificate, key and CA only in MUTUAL
    mode; DISABLE is Istio's zero enum, which its protobuf JSON leaves out."""
    mutual = render(
        tmp_path,
        graph(),
        service_mesh="istio",
        istio_tls_mode="MUTUAL",
        istio_client_certificate="/etc/istio/cert.pem",
        istio_private_key="/etc/istio/key.pem",
        istio_ca_certificates="/etc/istio/ca.pem",
        istio_insecure_skip_verify=False,
    )
    (dr,) = kinds(mutual, "DestinationRule")
    assert dr["spec"]["trafficPolicy"]["tls"] == {
        "mode": "MUTUAL",
        "clientCertificate": "/etc/istio/cert.pem",
        "privateKey": "/etc/istio/key.pem",
        "caCertificates": "/etc/istio/ca.pem",
        "insecureSkipVerify": False,
    }
    simple = render(tmp_path, graph(), service_mesh="istio", istio_client_certificate="/ignored")
    assert kinds(simple, "DestinationRule")[0]["spec"]["trafficPolicy"]["tls"] == {
        "mode": "SIMPLE",
        "insecureSkipVerify": True,
    }
    off = render(tmp_path, graph(), service_mesh="istio", istio_tls_mode="DISABLE")
    assert kinds(off, "DestinationRule")[0]["spec"]["trafficPolicy"]["tls"] == {
        "insecureSkipVerify": True
    }


def test_epp_pods_opt_out_of_istio_sidecar(tmp_path: Path) -> None:
    """#9935 (internal/dynamo/graph.go ``generateSingleDCD`` @ 2a6da14c8): the EPP's pod
    template gets ``sidecar.istio.io/inject: "false"`` unless it sets the annotation itself,
    before DGD-level annotations (which cannot turn it back on); it reaches the Deployment,
    its pods and the Service (``GetDCDKubeAnnotations``). Other components are untouched."""
    doc = graph()
    doc["spec"]["annotations"] = {keys.ANN_ISTIO_INJECT: "true"}
    objs = render(tmp_path, doc)
    deps = deployments(objs)
    epp = deps["Epp"]
    assert epp["metadata"]["annotations"][keys.ANN_ISTIO_INJECT] == "false"
    assert epp["spec"]["template"]["metadata"]["annotations"][keys.ANN_ISTIO_INJECT] == "false"
    (svc,) = [o for o in kinds(objs, "Service") if o["metadata"]["name"] == "g-epp"]
    assert svc["metadata"]["annotations"][keys.ANN_ISTIO_INJECT] == "false"
    assert deps["Frontend"]["metadata"]["annotations"][keys.ANN_ISTIO_INJECT] == "true"
    own = graph(Epp={"extraPodMetadata": {"annotations": {keys.ANN_ISTIO_INJECT: "true"}}})
    epp = deployments(render(tmp_path, own))["Epp"]
    assert epp["spec"]["template"]["metadata"]["annotations"][keys.ANN_ISTIO_INJECT] == "true"


# ------------------------------------------------------------------------ 3. EPP in 1.5
def test_rust_epp_is_the_default(tmp_path: Path) -> None:
    """#11355 (v1.5.0: Go EPP removed, the Rust EPP in the Frontend image is the default;
    internal/dynamo/component_epp.go of the 1.5 line, read through the public index): without
    eppConfig no arguments and no config file (the image's entrypoint runs), HOME pinned to
    /home/dynamo with the hf-cache emptyDir under it; ports and probes unchanged; no EPP
    ConfigMap; more than one replica is allowed (the Rust EPP syncs its replicas)."""
    doc = graph(Epp={"replicas": 2})
    objs = render(tmp_path, doc)
    epp = deployments(objs)["Epp"]
    c = main(epp)
    assert "args" not in c and "command" not in c
    assert env(c)["HOME"] == "/home/dynamo"
    mounts = [m for m in c["volumeMounts"] if m["name"] != "shared-memory"]
    assert mounts == [{"name": "hf-cache", "mountPath": "/home/dynamo/.cache"}]
    volumes = [v for v in pod(epp)["volumes"] if v["name"] != "shared-memory"]
    assert volumes == [{"name": "hf-cache", "emptyDir": {}}]
    assert [p["containerPort"] for p in c["ports"]] == [9002, 9003, 9090]
    assert c["readinessProbe"]["grpc"] == {"port": 9003, "service": "inference-extension"}
    assert epp["spec"]["replicas"] == 2
    assert not [o for o in kinds(objs, "ConfigMap") if o["metadata"]["name"] == "g-epp-config"]
    assert kinds(objs, "InferencePool")
    # #13811: DYN_EPP_REPLICA_SYNC_PORT belongs to the standalone EPP, set by hand
    assert "DYN_EPP_REPLICA_SYNC_PORT" not in env(c)


def test_rust_epp_user_args_and_home_win(tmp_path: Path) -> None:
    """component_epp.go (1.5 line): users can still override args through the main
    container, and a HOME they set wins (MergeEnvs gives user env precedence)."""
    mc = {"image": IMAGE, "args": ["--flag"], "env": [{"name": "HOME", "value": "/h"}]}
    c = main(
        deployments(render(tmp_path, graph(Epp={"extraPodSpec": {"mainContainer": mc}})))["Epp"]
    )
    assert c["args"] == ["--flag"] and env(c)["HOME"] == "/h"


def test_go_epp_kept_when_epp_config_is_set(tmp_path: Path) -> None:
    """#11355: ``eppConfig`` is deprecated but honoured, so a DGD pinned to a 1.4 Go EPP
    image keeps its launch contract: flags, the config ConfigMap and its volume; one
    replica only (the webhook's rule for the Go EPP)."""
    go_epp = {"extraPodSpec": {"mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/epp:1.4.0"}}}
    objs = render(tmp_path, graph(Epp={"eppConfig": EPP_CONFIG, **go_epp}))
    epp = deployments(objs)["Epp"]
    c = main(epp)
    assert "-config-file" in c["args"][-2] or "--config-file" in c["args"][-2]
    assert "HOME" not in env(c)
    assert {v["name"] for v in pod(epp)["volumes"]} - {"shared-memory"} == {"epp-config"}
    assert [o for o in kinds(objs, "ConfigMap") if o["metadata"]["name"] == "g-epp-config"]
    err = render_error(tmp_path, graph(Epp={"eppConfig": EPP_CONFIG, "replicas": 2, **go_epp}))
    assert "exactly 1 replica" in str(err)


def test_go_epp_has_no_model_config_cache(tmp_path: Path) -> None:
    """The 1.5 line withholds the ``hf-cache`` emptyDir and its mount from the legacy Go
    EPP (an EPP with ``eppConfig``); only the Rust EPP gets them, under its pinned HOME.

    Evidence (``internal/dynamo/component_epp.go``): at 2a6da14c8 (before #11355) every EPP
    is the Go EPP and mounts ``hf-cache`` at ``/home/nonroot/.cache``. PR #11355 (merged
    before 1.5.0, review thread of 2026-09-01) first kept it per launch contract
    (``legacyGoEPPHome``), a form the review rejected because ``eppConfig`` selects the
    contract but not the image; every later version of the file in the public index (the
    three with ``IsLegacyGoEPP``) puts the volume and mount in the native branch only and
    states the deliberate one-time roll of legacy EPP pods on the upgrade, and the
    matching ``component_epp_test.go`` asserts "legacy Go EPP gets no cache mount". No
    1.5 release branch or tag that keeps it could be found, so 1.5.1 is followed."""
    go_epp = {"extraPodSpec": {"mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/epp:1.4.0"}}}
    epp = deployments(render(tmp_path, graph(Epp={"eppConfig": EPP_CONFIG, **go_epp})))["Epp"]
    mounts = [m["name"] for m in main(epp)["volumeMounts"]]
    assert "hf-cache" not in mounts and "epp-config" in mounts
    assert "hf-cache" not in [v["name"] for v in pod(epp)["volumes"]]


# ------------------------------------------------------------- 4. kvTransferPolicy
def kv_graph(policy: Obj, **extra: Obj) -> Obj:
    doc = graph(**extra)
    doc["spec"]["experimental"] = {"kvTransferPolicy": policy}
    return doc


ZONE = "topology.kubernetes.io/zone"


def test_kv_transfer_policy_with_label_key(tmp_path: Path) -> None:
    """#9768 (env, internal/consts/consts.go), #9792/#9879 (Downward-API volume and the
    topology-label annotation): ``applyKvTransferPolicyToWorkerComponent``,
    ``TopologyLabelVolume`` and ``applyKvTransferPolicyTopologyAnnotations``
    (internal/dynamo/graph.go and component_worker.go @ 2a6da14c8). Workers only; the
    policy's env replaces the user's of those names; the annotation reaches the Deployment,
    its pods and the Service (``GetDCDKubeAnnotations``)."""
    user_env = [
        {"name": "DYN_KV_TRANSFER_DOMAIN", "value": "user"},
        {"name": "DYN_KV_TRANSFER_PREFERRED_WEIGHT", "value": "0.1"},
    ]
    doc = kv_graph(
        {"labelKey": ZONE, "domain": "zone"},
        decode={"envs": user_env, "annotations": {keys.ANN_TOPOLOGY_CLUSTER_TOPOLOGY_NAME: "x"}},
    )
    objs = render(tmp_path, doc)
    deps = deployments(objs)
    worker = deps["decode"]
    got = env(main(worker))
    assert {k: got.get(k) for k in got if k.startswith(("DYN_KV_TRANSFER", "DYN_TOPOLOGY"))} == {
        "DYN_KV_TRANSFER_DOMAIN": "zone",
        "DYN_KV_TRANSFER_ENFORCEMENT": "required",  # the CRD default
        "DYN_TOPOLOGY_ENABLED": "true",
        "DYN_TOPOLOGY_MOUNT_PATH": "/etc/dynamo/topology",
    }
    mounts = main(worker)["volumeMounts"]
    assert {
        "name": "topology-labels",
        "mountPath": "/etc/dynamo/topology",
        "readOnly": True,
    } in mounts
    (vol,) = [v for v in pod(worker)["volumes"] if v["name"] == "topology-labels"]
    assert vol["downwardAPI"] == {
        "items": [{"path": "zone", "fieldRef": {"fieldPath": f"metadata.labels['{ZONE}']"}}]
    }
    want = {keys.ANN_TOPOLOGY_LABEL_KEY: ZONE}
    for where in (worker["metadata"], worker["spec"]["template"]["metadata"]):
        ann = where["annotations"]
        assert {k: ann[k] for k in keys.TOPOLOGY_SOURCE_ANNOTATIONS if k in ann} == want
    (svc,) = [
        o for o in kinds(objs, "Service") if o["metadata"]["name"] == worker["metadata"]["name"]
    ]
    assert svc["metadata"]["annotations"][keys.ANN_TOPOLOGY_LABEL_KEY] == ZONE
    for name in ("Frontend", "Planner", "Epp"):
        assert "DYN_KV_TRANSFER_DOMAIN" not in env(main(deps[name]))
        assert keys.ANN_TOPOLOGY_LABEL_KEY not in (deps[name]["metadata"].get("annotations") or {})
    # the frontend sidecar mounts what the main container mounts (#8598), this too
    assert "topology-labels" in {
        m["name"] for m in container(worker, "sidecar-frontend").get("volumeMounts", [])
    }


def test_kv_transfer_preferred_weight_is_a_float32(tmp_path: Path) -> None:
    """#9768: ``strconv.FormatFloat(float64(*kvt.PreferredWeight), 'f', -1, 32)``."""
    doc = kv_graph(
        {"labelKey": ZONE, "domain": "zone", "enforcement": "preferred", "preferredWeight": 0.85}
    )
    got = env(main(deployments(render(tmp_path, doc))["decode"]))
    assert got["DYN_KV_TRANSFER_ENFORCEMENT"] == "preferred"
    assert got["DYN_KV_TRANSFER_PREFERRED_WEIGHT"] == "0.85"
    assert [go_float32(v) for v in (1, 0, 0.123456789, 1e-5)] == ["1", "0", "0.12345679", "0.00001"]


def test_user_topology_annotations_are_dropped(tmp_path: Path) -> None:
    """graph.go ``generateSingleDCD`` and v1beta1_helpers.go ``GetDCDKubeAnnotations`` @
    2a6da14c8: the topology-label controller's annotations come from the policy only."""
    ann = {keys.ANN_TOPOLOGY_LABEL_KEY: "user"}
    deps = deployments(render(tmp_path, graph(decode={"annotations": ann})))
    assert keys.ANN_TOPOLOGY_LABEL_KEY not in (deps["decode"]["metadata"].get("annotations") or {})


@pytest.mark.parametrize(
    ("policy", "word"),
    [
        ({"labelKey": ZONE, "clusterTopologyName": "ct", "domain": "zone"}, "exactly one of"),
        ({"domain": "zone"}, "exactly one of"),
        ({"labelKey": ZONE, "domain": "zone", "enforcement": "preferred"}, "preferredWeight is"),
        ({"labelKey": ZONE, "domain": "zone", "preferredWeight": 0.5}, "may only be set"),
        ({"labelKey": ZONE, "domain": "Zone"}, "must match"),
    ],
)
def test_kv_transfer_policy_crd_rules(tmp_path: Path, policy: Obj, word: str) -> None:
    """The CRD's CEL rules on ``KvTransferPolicy`` (api/v1beta1/common.go @ 2a6da14c8)."""
    assert word in str(render_error(tmp_path, kv_graph(policy)))


def test_cluster_topology_name_needs_grove_and_its_levels(tmp_path: Path) -> None:
    """#10041: ``validateKvTransferPolicy`` (webhook, @ 2a6da14c8) forbids
    clusterTopologyName off the Grove path and checks the domain against the
    ClusterTopologyBinding's levels, which the operator reads from the cluster (here the
    setting grove-topology-domains)."""
    doc = kv_graph({"clusterTopologyName": "ct", "domain": "rack"})
    assert "needs the Grove path" in str(render_error(tmp_path, doc))
    assert "grove-topology-domains" in str(render_error(tmp_path, doc, grove=True))
    err = render_error(tmp_path, doc, grove=True, grove_topology_domains="zone,host")
    assert "not a level" in str(err)


def test_cluster_topology_name_on_grove(tmp_path: Path) -> None:
    """#10041: ``topologyLabelVolumeItems`` (component_worker.go @ 2a6da14c8): one file per
    level, read from ``nvidia.com/dynamo-topology.<domain>``, which the topology-label
    controller copies from the node; the clique carries the binding's name
    (``buildCliqueForRole``)."""
    doc = kv_graph({"clusterTopologyName": "ct", "domain": "rack"})
    objs = render(tmp_path, doc, grove=True, grove_topology_domains="zone, rack,host")
    (pcs,) = kinds(objs, "PodCliqueSet")
    cliques = {c["name"]: c for c in pcs["spec"]["template"]["cliques"]}
    worker = cliques["decode"]
    (vol,) = [v for v in worker["spec"]["podSpec"]["volumes"] if v["name"] == "topology-labels"]
    assert vol["downwardAPI"]["items"] == [
        {"path": d, "fieldRef": {"fieldPath": f"metadata.labels['nvidia.com/dynamo-topology.{d}']"}}
        for d in ("zone", "rack", "host")
    ]
    assert worker["annotations"][keys.ANN_TOPOLOGY_CLUSTER_TOPOLOGY_NAME] == "ct"
    assert keys.ANN_TOPOLOGY_CLUSTER_TOPOLOGY_NAME not in (
        cliques["frontend"].get("annotations") or {}
    )


# ------------------------------------------------- 5. discovery RBAC label, 63 characters
def test_discovery_label_value_is_capped_at_63(tmp_path: Path) -> None:
    """#11709 ``getK8sDiscoveryLabelValue`` (internal/discovery/resource.go @ 2a6da14c8): the
    discovery ServiceAccount's ``app.kubernetes.io/name`` is its name, or for a name over 63
    characters its first 54 + "-" + the first 8 hex digits of its SHA-256."""
    name = "a" * 45
    doc = dgd(
        name,
        {"fe": {"componentType": "frontend", "extraPodSpec": {"mainContainer": {"image": IMAGE}}}},
    )
    objs = render(tmp_path, doc)
    (sa,) = [o for o in kinds(objs, "ServiceAccount") if o["metadata"]["name"].startswith(name)]
    full = f"{name}-k8s-service-discovery"
    assert len(full) > 63
    value = sa["metadata"]["labels"]["app.kubernetes.io/name"]
    assert value == f"{full[:54]}-{hashlib.sha256(full.encode()).hexdigest()[:8]}"
    assert len(value) == 63
    short = render(tmp_path, graph())
    (sa,) = [o for o in kinds(short, "ServiceAccount") if "discovery" in o["metadata"]["name"]]
    assert sa["metadata"]["labels"]["app.kubernetes.io/name"] == "g-k8s-service-discovery"


# ------------------------------------------- 6. Dynamo namespace values (issue 13, point 4)
def test_namespace_prefix_stays_literal_up_to_operator_1_5_1(tmp_path: Path) -> None:
    """Issue 13's "stricter namespace values": between 1.1 (``df888f68``) and ``2a6da14c8``
    the operator neither validates nor computes the Dynamo namespace any stricter
    (``ComputeDynamoNamespace`` in api/v1beta1/dynamocomponentdeployment_types.go already
    replaced dots at 1.1; ``dynamoNamespace`` stays a warning in
    internal/webhook/validation/shared_v1alpha1.go). The only stricter namespace handling
    upstream is ``DYN_NAMESPACE_PREFIX_STRICT=true`` on frontends, frontend sidecars and the
    Rust EPP (issue #10990, PR #10998; internal/dynamo/component_namespace_test.go @
    ``9c4ecf12``/``40ec5f3a``, not on main at ``2a6da14c8`` nor in the 1.5.0 release notes),
    gated on runtime 1.6.0: a later operator's gate, off here even for a 1.6.0 image."""
    newer = IMAGE.replace(":1.5.1", ":1.6.0")
    doc = graph(
        Frontend={"extraPodSpec": {"mainContainer": {"image": newer}}},
        decode={
            "frontendSidecar": {"image": newer},
            "extraPodSpec": {"mainContainer": {**WORKER_CMD, "image": newer}},
        },
        Epp={"extraPodSpec": {"mainContainer": {"image": newer}}},
    )
    doc["metadata"]["name"] = "g.v1"
    deps = deployments(render(tmp_path, doc))
    prefixed = [
        env(main(deps["Frontend"])),
        env(main(deps["Epp"])),
        env(container(deps["decode"], "sidecar-frontend")),
    ]
    for got in prefixed:
        assert got["DYN_NAMESPACE_PREFIX"] == "ns-g-v1"
        assert "DYN_NAMESPACE_PREFIX_STRICT" not in got
    assert env(main(deps["decode"]))["DYN_NAMESPACE"] == "ns-g-v1"
