"""The writers of replicas, as the tests of replica ownership play them against a real
kube-apiserver: a GitOps re-sync as Flux or Argo CD does it with the configuration we ship
(:func:`gitops_resync`), the Dynamo 1.5 Planner replayed request for request
(:func:`planner_scale`), and the reading of ``managedFields`` (:func:`owners`).
"""

from __future__ import annotations

import json
from typing import Any

from dyn_gitops_operator.errors import NotFoundError
from dyn_gitops_operator.kube import DGDSAS, Kube
from dyn_gitops_operator.testing import GITOPS_MANAGER, KINDS, as_served

from dyn_gitops import keys

Obj = dict[str, Any]

#: kustomize-controller's server-side apply field manager
FLUX_MANAGER = "kustomize-controller"
#: the field manager the API server gives a request without one from the Python client the
#: Planner uses (the User-Agent up to its first "/": "OpenAPI-Generator/<v>/python")
PLANNER_MANAGER = "OpenAPI-Generator"
#: the User-Agent of kubernetes==32.0.1, the Planner's pin (container/deps/requirements.planner.txt)
PLANNER_USER_AGENT = "OpenAPI-Generator/32.0.1/python"


def manager_of(tool: str) -> str:
    return FLUX_MANAGER if tool == "flux" else GITOPS_MANAGER


def gitops_resync(k: Kube, objects: list[Obj], tool: str = "flux") -> None:
    """One sync of the rendered objects by ``tool``: a forced server-side apply of each
    Deployment, DGD and adapter, except an existing adapter.

    * ``flux``: kustomize-controller skips an object marked ``ssa: IfNotPresent`` that
      exists;
    * ``argocd``: the configuration we ship (deploy/argocd/helm-values.yaml: adapters'
      ``/spec/replicas`` in ``ignoreDifferences``; the sample Applications sync with
      ``ApplyOutOfSyncOnly`` and ``RespectIgnoreDifferences``): an adapter whose other
      rendered fields are live is in sync and not applied; one that is not is applied with
      the live ``spec.replicas``.
    """
    gitops = Kube(k.api, k.timeout, field_manager=manager_of(tool))
    for obj in objects:
        res = KINDS.get(obj["kind"])
        if res is None or obj["kind"] in ("LeaderWorkerSet", "PodCliqueSet"):
            continue
        meta = obj["metadata"]
        try:
            live = k.get(res, meta["namespace"], meta["name"])
        except NotFoundError:
            live = None
        if live is not None and res is DGDSAS:
            ann = meta.get("annotations") or {}
            if tool == "flux" and ann.get(keys.ANN_FLUX_SSA) == keys.FLUX_SSA_IF_NOT_PRESENT:
                continue
            if tool == "argocd":
                if _in_sync_but_replicas(obj, live):
                    continue
                obj = {**obj, "spec": {**obj["spec"], "replicas": live["spec"]["replicas"]}}
        gitops.apply(res, as_served(obj), force=True)


def _in_sync_but_replicas(obj: Obj, live: Obj) -> bool:
    meta, live_meta = obj["metadata"], live["metadata"]
    return all(
        (live_meta.get(part) or {}).get(key) == value
        for part in ("labels", "annotations")
        for key, value in (meta.get(part) or {}).items()
    ) and obj["spec"].get("dgdRef") == live["spec"].get("dgdRef")


def owners(obj: Obj, *path: str) -> set[str]:
    """The managers whose ``fieldsV1`` hold the field at ``path`` (fieldsV1 keys)."""
    out = set()
    for entry in obj["metadata"].get("managedFields") or []:
        node: Any = entry.get("fieldsV1") or {}
        for step in path:
            node = node.get(step) if isinstance(node, dict) else None
        if node is not None:
            out.add(entry["manager"])
    return out


def component_key(name: str) -> str:
    """The fieldsV1 key of a DGD component (a list map keyed by ``name``)."""
    return "k:" + json.dumps({"name": name}, separators=(",", ":"))


def component(dgd: Obj, name: str) -> Obj:
    (comp,) = [c for c in dgd["spec"]["components"] if c["name"] == name]
    return dict(comp)


def planner_scale(api: Any, namespace: str, dgd: str, service: str, replicas: int) -> None:
    """``KubernetesAPI.update_service_replicas`` of the 1.5 Planner, replayed with its client:
    ``/scale`` of the v1beta1 adapter answers 404 (our CRD serves v1alpha1), so it reads the
    DGD and sends a JSON patch ``test`` name + ``add /spec/components/<i>/replicas``
    (``_update_dgd_replicas``, components/src/dynamo/planner/connectors/clients/
    kubernetes_api.py @ 2a6da14c8; no field manager is sent, so the API server names it
    after the client's User-Agent)."""
    from kubernetes import client as k8s

    custom = k8s.CustomObjectsApi(api)
    try:
        custom.patch_namespaced_custom_object_scale(
            group="nvidia.com",
            version="v1beta1",
            namespace=namespace,
            plural="dynamographdeploymentscalingadapters",
            name=f"{dgd}-{service.lower()}",
            body={"spec": {"replicas": replicas}},
        )
        raise AssertionError("the adapter's /scale answered: the Planner would not patch the DGD")
    except k8s.ApiException as exc:
        assert exc.status == 404, exc
    live: Any = custom.get_namespaced_custom_object(
        "nvidia.com", "v1beta1", namespace, "dynamographdeployments", dgd
    )
    (index,) = [i for i, c in enumerate(live["spec"]["components"]) if c.get("name") == service]
    patch = [
        {"op": "test", "path": f"/spec/components/{index}/name", "value": service},
        {"op": "add", "path": f"/spec/components/{index}/replicas", "value": replicas},
    ]
    # the Planner's own call (kubernetes 32.0.1's ``call_api`` with these arguments), built by
    # the client installed here, whose call_api has another signature
    method, url, headers, body, post = api.param_serialize(
        "PATCH",
        "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}",
        path_params={
            "group": "nvidia.com",
            "version": "v1beta1",
            "namespace": namespace,
            "plural": "dynamographdeployments",
            "name": dgd,
        },
        header_params={"Accept": "application/json", "Content-Type": "application/json-patch+json"},
        body=patch,
        auth_settings=["BearerToken"],
    )
    headers["User-Agent"] = PLANNER_USER_AGENT
    resp = api.call_api(method, url, header_params=headers, body=body, post_params=post)
    resp.read()
    assert resp.status == 200, resp.data
