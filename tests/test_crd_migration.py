"""Upgrading CRDs that stored v1alpha1 DGDs to the v1beta1-only CRDs, keeping the workloads.

The documented procedure (docs/operator.md, *Upgrading from v1alpha1 CRDs*) on a private
realistic cluster: the garbage collector of kube-controller-manager is what orphans the
workers when their DGD is deleted with ``propagationPolicy: Orphan``, so the worker
Deployments (and their pods) must survive with the same uid, and the controller must own
them again from the v1beta1 DGD that the next sync creates.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dyn_gitops_operator import objects as o
from dyn_gitops_operator.kube import DEPLOYMENTS, Kube, make_api_client
from dyn_gitops_operator.resources import DGDS, Resource
from dyn_gitops_operator.testing import gitops_apply, running, settings_for_tests, wait_for
from support.rendering import render

from dyn_gitops.crds import crds

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
DGDS_V1ALPHA1 = Resource("nvidia.com", "v1alpha1", DGDS.plural, DGDS.kind)
#: the CRDs that stored v1alpha1 before (DGD and DCD)
MIGRATED = ("dynamographdeployments.nvidia.com", "dynamocomponentdeployments.nvidia.com")


def _crd(name: str, version: str) -> dict[str, Any]:
    (crd,) = [c for c in crds(version) if c["metadata"]["name"] == name]
    return crd


def _update_crd(ext: Any, name: str, change: Callable[[Any], None], status: bool = False) -> None:
    from kubernetes.client.exceptions import ApiException

    for _ in range(20):  # the apiextensions controller writes the CRD too: retry on 409
        current = ext.api_client.sanitize_for_serialization(
            ext.read_custom_resource_definition(name)
        )
        change(current)
        try:
            if status:
                ext.replace_custom_resource_definition_status(name, current)
            else:
                ext.replace_custom_resource_definition(name, current)
            return
        except ApiException as exc:
            if exc.status != 409:
                raise
    raise AssertionError(f"could not update {name}")


def test_migrating_v1alpha1_storage_to_v1beta1_keeps_the_workers(
    cluster_binaries: tuple[dict[str, Path], Path],
) -> None:
    from kubernetes import client as kc
    from support.cluster import realistic_cluster
    from support.controlplane import install_crds
    from support.thirdparty_crds import thirdparty_crds

    with realistic_cluster(*cluster_binaries) as c:
        install_crds(c.client(), crds("v1alpha1") + thirdparty_crds())  # an older install
        k = Kube(make_api_client(str(c.kubeconfig)))
        ns = "migrate"
        k.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})

        # what the older release left: a v1alpha1 DGD owning its managed worker Deployment
        old = render(SAMPLES / "vllm-agg" / "input", ns, source_api_version="v1alpha1")
        (alpha,) = [x for x in old if x["kind"] == DGDS.kind]
        created = k.create(DGDS_V1ALPHA1, alpha)
        gitops_apply(k, [x for x in old if x["kind"] == "Deployment"], kinds=("Deployment",))
        workers = [d for d in k.list(DEPLOYMENTS, ns)[0] if o.is_managed(d) and o.worker_hash(d)]
        assert workers
        for d in workers:
            owner = {
                "apiVersion": DGDS_V1ALPHA1.api_version,
                "kind": DGDS.kind,
                "name": alpha["metadata"]["name"],
                "uid": created["metadata"]["uid"],
            }
            k.request(
                "PATCH",
                DEPLOYMENTS.path(ns, d["metadata"]["name"]),
                body={"metadata": {"ownerReferences": [owner]}},
                content_type="application/merge-patch+json",
            )
        uids = {d["metadata"]["name"]: d["metadata"]["uid"] for d in workers}

        ext = kc.ApiextensionsV1Api(c.client())
        # the new CRD alone is refused while v1alpha1 objects may be stored
        try:
            install_crds(c.client(), [_crd(MIGRATED[0], "v1beta1")])
        except Exception as exc:
            assert "storedVersions" in str(exc)
        else:
            raise AssertionError("the v1beta1-only CRD replaced one that stored v1alpha1")

        # 1. (controller scaled to 0: none runs here) 2. delete the DGD, orphaning its workers
        k.request(
            "DELETE",
            DGDS_V1ALPHA1.path(ns, alpha["metadata"]["name"]),
            body={"propagationPolicy": "Orphan"},
        )
        wait_for(lambda: not k.list(DGDS_V1ALPHA1, ns)[0], 90, "the DGD deleted (orphaned)")

        # 3. the transitional CRDs: v1beta1 stored, v1alpha1 kept in the list, not served;
        # 4. no object is stored as v1alpha1 any more (there is none): drop it from status
        for name in MIGRATED:

            def transitional(crd: Any, name: str = name) -> None:
                alpha_version = copy.deepcopy(_crd(name, "v1alpha1")["spec"]["versions"][0])
                alpha_version.update(served=False, storage=False)
                crd["spec"]["versions"] = [
                    *_crd(name, "v1beta1")["spec"]["versions"],
                    alpha_version,
                ]

            _update_crd(ext, name, transitional)
            _update_crd(
                ext, name, lambda crd: crd["status"].update(storedVersions=["v1beta1"]), True
            )
        # 5. the new CRDs install
        install_crds(c.client(), crds())

        # 6. the next sync creates the DGD as v1beta1; 7. the upgraded controller owns the
        # orphaned workers again
        gitops_apply(k, render(SAMPLES / "vllm-agg" / "input", ns))
        with running(settings_for_tests(ns), k):
            beta = k.get(DGDS, ns, alpha["metadata"]["name"])

            def owned_again() -> bool:
                for name in uids:
                    refs = k.get(DEPLOYMENTS, ns, name)["metadata"].get("ownerReferences") or []
                    if [(r["apiVersion"], r["uid"]) for r in refs] != [
                        (DGDS.api_version, beta["metadata"]["uid"])
                    ]:
                        return False
                return True

            wait_for(owned_again, 90, "the workers owned by the v1beta1 DGD")
        for name, uid in uids.items():  # the same Deployments: nothing was recreated
            assert k.get(DEPLOYMENTS, ns, name)["metadata"]["uid"] == uid
