"""GPU Memory Service (intra-pod) on a multinode service: the LeaderWorkerSet and Grove paths.

The operator at upstream 2a6da14c8 refuses nothing here: ``GenerateBasePodSpec``
(``deploy/operator/internal/dynamo/graph.go``) applies the GMS rewrite (``dra.ApplyClaim``,
``gms.EnsureServerSidecar``) and then the intra-pod failover clone (``buildFailoverPod``) as
its last steps, for whatever role it renders, after the backend's multinode
``UpdateContainer``/``UpdatePodSpec``. The LeaderWorkerSet path calls it for the leader and
the worker template (``generatePodTemplateSpec`` in
``internal/controller/dynamocomponentdeployment_renderer.go``), the Grove path for the
leader and worker cliques (``generatePodSpecForRole`` / ``buildCliqueForRole`` in
``graph.go``); the DGD controller syncs one ResourceClaimTemplate per component
(``reconcileGMSResourceClaimTemplates``, ``dgd_gms_resource_claims_reconciler.go``), and
no webhook check looks at the node count (``validateGPUMemoryServiceSpec``,
``internal/webhook/validation/shared_v1beta1.go``). What each role pod gains is what the
operator's own output shows for the single-node example
(``conformance/operator-output/examples__backends__vllm__deploy__agg_gms.yaml``, produced by
the 2a6da14c8 reconcilers): these tests take the GMS parts from that file.

On main every test here failed: each render was refused with
``spec.services.VllmWorker.gpuMemoryService: gpuMemoryService on a multinode service is not
yet supported`` (RenderError, exit 1).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.parity import SETTINGS
from support.paths import CONFORMANCE
from support.rendering import renderer

from dyn_gitops import naming
from dyn_gitops.errors import RenderError

Obj = dict[str, Any]

GMS_EXAMPLE = "examples__backends__vllm__deploy__agg_gms.yaml"
FAILOVER_EXAMPLE = "examples__backends__vllm__deploy__agg_failover.yaml"
OPERATOR_OUTPUT = CONFORMANCE.parent / "operator-output"
WORKER = "VllmWorker"
NODES = 2
GPU = "nvidia.com/gpu"

#: the operator-output README's configuration; each test picks the multinode path
BASE = {k.replace("-", "_"): v for k, v in SETTINGS.items()}
PATHS = {
    "lws": {"lws": True, "grove": False},
    "grove": {"lws": False, "grove": True},
}

render = renderer()


def example(name: str, *, gms: bool = True) -> Obj:
    """The upstream example with its worker made multinode (and, ``gms`` False, without
    ``gpuMemoryService``: the plain twin)."""
    (doc,) = [d for d in yaml.safe_load_all((CONFORMANCE / name).read_text()) if d]
    svc = doc["spec"]["services"][WORKER]
    svc["multinode"] = {"nodeCount": NODES}
    args = svc["extraPodSpec"]["mainContainer"]["args"]
    if "--tensor-parallel-size" not in args:
        args[2:2] = ["--tensor-parallel-size", str(NODES)]
    if not gms:
        del svc["gpuMemoryService"]
    return doc


def role_pods(objs: list[Obj], path: str) -> dict[str, Obj]:
    """The worker's leader and worker pod specs on ``path``."""
    if path == "lws":
        (lws,) = [o for o in objs if o["kind"] == "LeaderWorkerSet"]
        tpl = lws["spec"]["leaderWorkerTemplate"]
        return {
            "leader": tpl["leaderTemplate"]["spec"],
            "worker": tpl["workerTemplate"]["spec"],
        }
    (pcs,) = [o for o in objs if o["kind"] == "PodCliqueSet"]
    cliques = {c["name"]: c["spec"]["podSpec"] for c in pcs["spec"]["template"]["cliques"]}
    leader, worker = naming.clique_names(WORKER, multinode=True)
    return {"leader": cliques[leader], "worker": cliques[worker]}


def operator_gms_pod() -> Obj:
    """The operator's single-node GMS worker pod (2a6da14c8, ``conformance/operator-output``)."""
    docs = yaml.safe_load_all((OPERATOR_OUTPUT / GMS_EXAMPLE).read_text())
    (dep,) = [
        d for d in docs if d["kind"] == "Deployment" and "vllmworker" in d["metadata"]["name"]
    ]
    pod: Obj = dep["spec"]["template"]["spec"]
    return pod


def with_operator_gms(plain: Obj, dgd: str) -> Obj:
    """``plain`` (a role pod without GMS) with exactly what the operator's GMS rewrite added
    to its single-node pod: the main container's GPUs replaced by the shared claim, the
    socket env and mount appended, the socket volume, the ``gms-server`` native sidecar,
    the GPU toleration and the pod's claim on ``<dgd>-<service>-gpu``."""
    op = operator_gms_pod()
    op_main = op["containers"][0]
    (server,) = op["initContainers"]
    (claim,) = op["resourceClaims"]
    pod = copy.deepcopy(plain)
    main = pod["containers"][0]
    resources = main.setdefault("resources", {})
    for side in ("limits", "requests"):
        rest = {k: v for k, v in (resources.get(side) or {}).items() if k != GPU}
        resources.pop(side, None)
        if rest:
            resources[side] = rest
    resources["claims"] = op_main["resources"]["claims"]
    main["env"] = [*main["env"], op_main["env"][-1]]
    main["volumeMounts"] = [*main["volumeMounts"], op_main["volumeMounts"][-1]]
    pod["volumes"] = [*pod["volumes"], op["volumes"][-1]]
    pod["initContainers"] = [*(pod.get("initContainers") or []), {**server, "image": main["image"]}]
    pod["tolerations"] = [*(pod.get("tolerations") or []), *op["tolerations"]]
    pod["resourceClaims"] = [{**claim, "resourceClaimTemplateName": f"{dgd}-vllmworker-gpu"}]
    return pod


def same_suffix(plain: Obj, gms: Obj) -> Obj:
    """``plain`` with ``gms``'s worker suffix: the worker hash covers ``gpuMemoryService``
    (``ComputeDGDWorkersSpecHash``), so the plain twin's ``DYN_NAMESPACE_WORKER_SUFFIX``
    differs, and nothing else should."""
    suffix = "DYN_NAMESPACE_WORKER_SUFFIX"
    (value,) = [e["value"] for e in gms["containers"][0]["env"] if e["name"] == suffix]
    pod = copy.deepcopy(plain)
    for e in pod["containers"][0]["env"]:
        if e["name"] == suffix:
            e["value"] = value
    return pod


@pytest.mark.parametrize("path", sorted(PATHS))
def test_gms_on_each_leader_and_worker_pod(tmp_path: Path, path: str) -> None:
    """Each role pod is the plain role pod plus the operator's GMS rewrite, applied after
    the multinode launch rewrite (``GenerateBasePodSpec`` step order, graph.go @ 2a6da14c8;
    the GMS parts from the operator's own agg_gms output). Failed on main: RenderError
    ``gpuMemoryService on a multinode service is not yet supported``."""
    settings = {**BASE, **PATHS[path]}
    gms = role_pods(render(tmp_path, example(GMS_EXAMPLE), **settings), path)
    plain = role_pods(render(tmp_path, example(GMS_EXAMPLE, gms=False), **settings), path)
    for role in ("leader", "worker"):
        expected = with_operator_gms(same_suffix(plain[role], gms[role]), "vllm-agg-gms")
        assert gms[role] == expected, role
    # the launch rewrite is intact: the leader runs the engine, the worker joins it
    assert gms["leader"]["containers"][0]["args"] != gms["worker"]["containers"][0]["args"]


@pytest.mark.parametrize("path", sorted(PATHS))
def test_one_claim_template_per_component(tmp_path: Path, path: str) -> None:
    """``reconcileGMSResourceClaimTemplates`` (dgd_gms_resource_claims_reconciler.go @
    2a6da14c8): one template per component, its count the main container's GPUs (per pod,
    not times the nodes); each leader and worker pod claims its own instance. As the
    operator's single-node output. Failed on main: RenderError (not yet supported)."""
    objs = render(tmp_path, example(GMS_EXAMPLE), **{**BASE, **PATHS[path]})
    ours = [o for o in objs if o["kind"] == "ResourceClaimTemplate"]
    docs = yaml.safe_load_all((OPERATOR_OUTPUT / GMS_EXAMPLE).read_text())
    theirs = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    assert [o["spec"] for o in ours] == [d["spec"] for d in theirs]
    assert [o["metadata"]["name"] for o in ours] == [d["metadata"]["name"] for d in theirs]


def test_intra_pod_failover_on_grove_clones_both_engines_per_role(tmp_path: Path) -> None:
    """Grove: ``buildFailoverPod`` runs on each role pod after GMS, both engines carry
    ``NNODES`` (``TestBuildFailoverPod_MultinodeNNODES``, internal/dynamo/failover_test.go @
    2a6da14c8) and share the pod's claim (``TestBuildFailoverPod_PreservesDRAClaim``).
    Failed on main: RenderError (not yet supported)."""
    objs = render(tmp_path, example(FAILOVER_EXAMPLE), **{**BASE, **PATHS["grove"]})
    for role, pod in role_pods(objs, "grove").items():
        engines = pod["containers"][:2]
        assert [c["name"] for c in engines] == ["engine-0", "engine-1"], role
        for c in engines:
            env = {e["name"]: e.get("value") for e in c["env"]}
            assert env["NNODES"] == str(NODES), (role, c["name"])
            assert env["GMS_SOCKET_DIR"] == "/gms-intrapod-control"
            assert c["resources"]["claims"] == [{"name": "intrapod-shared-gpu"}]
            assert GPU not in (c["resources"].get("limits") or {})
        assert [c["name"] for c in pod["initContainers"]][-1] == "gms-server"
        assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == (
            "vllm-agg-failover-vllmworker-gpu"
        )


def test_intra_pod_failover_on_lws_is_refused_with_what_to_do(tmp_path: Path) -> None:
    """LeaderWorkerSet: after ``GenerateBasePodSpec`` has cloned ``main`` into the engines,
    ``checkMainContainer`` refuses each template ("main container not found in pod spec";
    ``generateLeaderPodTemplateSpec`` in dynamocomponentdeployment_renderer.go,
    ``checkMainContainer`` in dynamocomponentdeployment_controller.go @ 2a6da14c8): no
    LeaderWorkerSet is created. dyn-gitops refuses at ``failover`` and names the Grove
    path. Failed on main: the one problem was at ``gpuMemoryService`` (not yet supported)."""
    with pytest.raises(RenderError) as info:
        render(tmp_path, example(FAILOVER_EXAMPLE), **{**BASE, **PATHS["lws"]})
    found = [f"{p.field}: {p.message}" for p in info.value.problems]
    assert len(found) == 1, found
    assert found[0].startswith(f"spec.services.{WORKER}.failover: "), found
    assert "main container not found" in found[0]
    assert "setting grove true" in found[0]
