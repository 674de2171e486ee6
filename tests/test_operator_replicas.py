"""Who owns replicas: HPA / KEDA / the Planner, the controller and GitOps, against the real
kube-apiserver (issue 14, point 2, last bullet; the pains ai-dynamo/dynamo#12080, #4420,
#13538).

Three writers play against the controller, interleaved over several rounds:

* an autoscaler (HPA / KEDA) writes the scaling adapter's ``/scale`` (a merge patch under
  its own field manager, as kube-controller-manager's scale client does);
* the Dynamo 1.5 Planner, for a worker without an adapter, replayed request for request with
  the ``kubernetes`` client it uses: ``/scale`` of the v1beta1 adapter answers 404, so it reads
  the DGD and sends a JSON patch ``test`` name + ``add /spec/components/<i>/replicas``
  (``KubernetesAPI.update_service_replicas`` / ``_update_dgd_replicas``,
  components/src/dynamo/planner/connectors/clients/kubernetes_api.py @ 2a6da14c8; no field
  manager is sent, so the API server names it after the client's User-Agent);
* a GitOps re-sync: server-side apply, forced, of every rendered Deployment, DGD and adapter
  under Flux's field manager, honouring ``kustomize.toolkit.fluxcd.io/ssa: IfNotPresent``
  (the one per-object apply policy the renderer sets), or under Argo CD's with the
  ``ignoreDifferences`` and sync options we ship (``support.replicas.gitops_resync``).

After every re-sync each replicas field has exactly one owner in ``managedFields`` and keeps
its value; at the end the generations count the writes, so a value that a re-sync reset
and a writer restored (an oscillation) shows up even if it was undone before we looked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, DGDSAS, Kube
from dyn_gitops_operator.testing import (
    HPA_MANAGER,
    hpa_scale,
    running,
    settings_for_tests,
    wait_for,
)
from support.rendering import render
from support.replicas import (
    FLUX_MANAGER,
    PLANNER_MANAGER,
    component,
    component_key,
    gitops_resync,
    manager_of,
    owners,
    planner_scale,
)

from dyn_gitops import keys

pytestmark = pytest.mark.realk8s
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
#: the Dynamo operator's field manager (its binary, ``manager``: deploy/operator/Dockerfile)
OPERATOR_MANAGER = "manager"
#: re-syncs per test, each after one autoscaler / Planner decision
ROUNDS = 5


def generation(k: Kube, res: Any, namespace: str, name: str) -> int:
    return int(k.get(res, namespace, name)["metadata"]["generation"])


def spec_replicas(k: Kube, namespace: str, name: str) -> int | None:
    value = k.get(DEPLOYMENTS, namespace, name)["spec"].get("replicas")
    return None if value is None else int(value)


TOOLS = pytest.mark.parametrize("tool", ["flux", "argocd"])


@TOOLS
def test_autoscaler_scale_survives_gitops_resyncs(k: Kube, namespace: str, tool: str) -> None:
    """HPA / KEDA through the adapter's /scale, a GitOps re-sync after each decision: the
    adapter's spec.replicas is the autoscaler's alone once it scaled (Git only created it),
    the Deployment's the controller's alone, the DGD's Git's alone; no value moves back."""
    objs = render(SAMPLES / "scaling-adapter" / "input", namespace)
    gitops_resync(k, objs, tool)
    dgd, adapter = "sglang-disagg", "sglang-disagg-decode"
    decode = next(
        o["metadata"]["name"]
        for o in objs
        if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("sglang-disagg-decode-")
    )
    # Git created the adapter with its seed: GitOps owns it until an autoscaler writes it
    assert owners(k.get(DGDSAS, namespace, adapter), "f:spec", "f:replicas") == {manager_of(tool)}
    with running(settings_for_tests(namespace), k):
        wait_for(lambda: spec_replicas(k, namespace, decode) == 2, what="decode at Git's 2")
        gens = {
            "adapter": generation(k, DGDSAS, namespace, adapter),
            "deployment": generation(k, DEPLOYMENTS, namespace, decode),
            "dgd": generation(k, DGDS, namespace, dgd),
        }
        values = [3, 5, 2, 4, 6][:ROUNDS]
        for want in values:
            hpa_scale(k, namespace, adapter, want)
            wait_for(
                lambda w=want: spec_replicas(k, namespace, decode) == w,  # type: ignore[misc]
                what=f"decode at {want}",
            )
            gitops_resync(k, objs, tool)
            live_adapter = k.get(DGDSAS, namespace, adapter)
            assert live_adapter["spec"]["replicas"] == want, "the re-sync reset the autoscaler"
            assert owners(live_adapter, "f:spec", "f:replicas") == {HPA_MANAGER}
            dep = k.get(DEPLOYMENTS, namespace, decode)
            assert dep["spec"]["replicas"] == want
            assert owners(dep, "f:spec", "f:replicas") == {FIELD_MANAGER}
            live_dgd = k.get(DGDS, namespace, dgd)
            assert owners(
                live_dgd, "f:spec", "f:components", component_key("decode"), "f:replicas"
            ) == {manager_of(tool)}
            # the controller saw the re-synced objects: the adapter status, the Deployment
            wait_for(
                lambda w=want: (  # type: ignore[misc]
                    (a := k.get(DGDSAS, namespace, adapter))["status"]["replicas"] == w
                    and a["status"]["observedGeneration"] == a["metadata"]["generation"]
                ),
                what="adapter status",
            )
            assert spec_replicas(k, namespace, decode) == want
        # one write per decision, none by a re-sync or a restoring writer
        assert generation(k, DGDSAS, namespace, adapter) - gens["adapter"] == len(values)
        assert generation(k, DEPLOYMENTS, namespace, decode) - gens["deployment"] == len(values)
        # the DGD is Git's: nobody wrote its replicas back (the operator does, #12080: below)
        assert generation(k, DGDS, namespace, dgd) == gens["dgd"]


def operator_propagate(k: Kube, namespace: str, adapter: str) -> None:
    """The Dynamo operator's adapter controller, replayed: the adapter's replicas written
    into the DGD component with an update (``DynamoGraphDeploymentScalingAdapterReconciler``
    in internal/controller/dynamographdeploymentscalingadapter_controller.go @ 2a6da14c8;
    its binary is ``manager``, the field manager the API server names it)."""
    op = Kube(k.api, k.timeout, field_manager=OPERATOR_MANAGER)
    ref = k.get(DGDSAS, namespace, adapter)["spec"]["dgdRef"]
    dgd = k.get(DGDS, namespace, ref["name"])
    # sent back, the managedFields read would be taken as written instead of tracked
    dgd["metadata"].pop("managedFields", None)
    wanted = k.get(DGDSAS, namespace, adapter)["spec"]["replicas"]
    for comp in dgd["spec"]["components"]:
        if comp["name"] == ref["serviceName"] and comp.get("replicas", 1) != wanted:
            comp["replicas"] = wanted
            op.update(DGDS, dgd)


def test_operator_replay_fights_gitops_over_the_dgd(k: Kube, namespace: str) -> None:
    """The same autoscaler decisions and re-syncs with the operator's documented adapter
    behaviour in place of our controller (#12080): it copies the adapter into the DGD that
    Git also writes, so every re-sync takes the field back and the operator writes it
    again. This is the failure the first test rules out for us."""
    objs = render(SAMPLES / "scaling-adapter" / "input", namespace)
    gitops_resync(k, objs)
    dgd, adapter = "sglang-disagg", "sglang-disagg-decode"
    path = ("f:spec", "f:components", component_key("decode"), "f:replicas")
    start = generation(k, DGDS, namespace, dgd)
    values = [3, 5, 1, 4, 6][:ROUNDS]  # never Git's 2, which the operator would not write
    for want in values:
        hpa_scale(k, namespace, adapter, want)
        operator_propagate(k, namespace, adapter)
        live = k.get(DGDS, namespace, dgd)
        assert component(live, "decode")["replicas"] == want
        assert owners(live, *path) == {OPERATOR_MANAGER}
        gitops_resync(k, objs)
        live = k.get(DGDS, namespace, dgd)
        assert component(live, "decode")["replicas"] == 2  # Git's value is back
        assert owners(live, *path) == {FLUX_MANAGER}
    operator_propagate(k, namespace, adapter)
    # two writes per decision instead of none: the value oscillates
    assert generation(k, DGDS, namespace, dgd) - start == 2 * len(values) + 1


@TOOLS
def test_planner_dgd_patch_survives_gitops_resyncs(
    kube: Any, k: Kube, namespace: str, tool: str
) -> None:
    """The 1.5 Planner patching the DGD (no adapter: /scale is 404), a GitOps re-sync after
    each decision: the component's replicas in the DGD is the Planner's alone (Git does not
    render it; the controller wrote Git's seed once), the Deployment follows it and is the
    controller's alone; no value moves back."""
    objs = render(SAMPLES / "planner" / "input", namespace)
    dgd = "vllm-disagg-planner"
    workers = {
        o["metadata"]["labels"][keys.LABEL_COMPONENT]: o["metadata"]["name"]
        for o in objs
        if o["kind"] == "Deployment" and keys.LABEL_WORKER_HASH in o["metadata"]["labels"]
    }
    assert set(workers) == {"VllmDecodeWorker", "VllmPrefillWorker"}
    gitops_resync(k, objs, tool)
    with running(settings_for_tests(namespace), k):
        # Git's count (1) reaches the DGD once, written by the controller
        live = wait_for(
            lambda: (
                (d := k.get(DGDS, namespace, dgd))
                and all(component(d, s).get("replicas") == 1 for s in workers)
                and d
            ),
            what="the seed in the DGD",
        )
        for service in workers:
            path = ("f:spec", "f:components", component_key(service), "f:replicas")
            assert owners(live, *path) == {FIELD_MANAGER}, service
        gens = {name: generation(k, DEPLOYMENTS, namespace, name) for name in workers.values()}
        gens[dgd] = generation(k, DGDS, namespace, dgd)
        rounds = list(zip([3, 2, 4, 1, 5], [2, 4, 1, 3, 2], strict=True))[:ROUNDS]
        for decode_n, prefill_n in rounds:
            planner_scale(kube, namespace, dgd, "VllmDecodeWorker", decode_n)
            planner_scale(kube, namespace, dgd, "VllmPrefillWorker", prefill_n)
            want = {"VllmDecodeWorker": decode_n, "VllmPrefillWorker": prefill_n}
            for service, name in workers.items():
                wait_for(
                    lambda n=name, w=want[service]: spec_replicas(k, namespace, n) == w,  # type: ignore[misc]
                    what=f"{service} at {want[service]}",
                )
            gitops_resync(k, objs, tool)
            live = k.get(DGDS, namespace, dgd)
            for service, name in workers.items():
                assert component(live, service)["replicas"] == want[service], (
                    "the re-sync reset the Planner"
                )
                path = ("f:spec", "f:components", component_key(service), "f:replicas")
                assert owners(live, *path) == {PLANNER_MANAGER}, service
                dep = k.get(DEPLOYMENTS, namespace, name)
                assert dep["spec"]["replicas"] == want[service]
                assert owners(dep, "f:spec", "f:replicas") == {FIELD_MANAGER}
        # the controller looked at the re-synced DGD (its status observed the last
        # generation) and left the Deployments where the Planner put them
        wait_for(
            lambda: (
                (d := k.get(DGDS, namespace, dgd)).get("status", {}).get("observedGeneration")
                == d["metadata"]["generation"]
            ),
            what="the DGD status observed",
        )
        for service, name in workers.items():
            assert spec_replicas(k, namespace, name) == rounds[-1][service == "VllmPrefillWorker"]
        # one DGD write per Planner patch that changed a value, one Deployment write per
        # change: none by a re-sync or a restoring writer
        assert generation(k, DGDS, namespace, dgd) - gens[dgd] == 2 * len(rounds)
        for service, name in workers.items():
            col = 0 if service == "VllmDecodeWorker" else 1
            changes = sum(
                1 for i, r in enumerate(rounds) if r[col] != (rounds[i - 1][col] if i else 1)
            )
            assert generation(k, DEPLOYMENTS, namespace, name) - gens[name] == changes, service
