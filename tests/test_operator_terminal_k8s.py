"""A terminal answer from the real API server: the controller runs as a user whose Role
lets it do everything in the namespace but patch Deployments (RBAC answers 403 to the
owner-reference apply every new graph needs). Reported on the DGD (Stalled condition,
Warning Event), not retried until the DGD changes, cleared once RBAC allows the write
and the DGD changes again."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator.kube import DGDS, Kube, make_api_client
from dyn_gitops_operator.testing import gitops_apply, running, settings_for_tests, wait_for
from support.rendering import render

pytestmark = pytest.mark.realk8s

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
GRAPH = "vllm-agg"
USER = "terminal-test-controller"
QUIET = 3.0


def role(namespace: str, deployment_verbs: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": USER, "namespace": namespace},
        "rules": [
            {
                "apiGroups": ["", "coordination.k8s.io", "nvidia.com", "grove.io"],
                "resources": ["*"],
                "verbs": ["*"],
            },
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": deployment_verbs},
        ],
    }


def restricted(control_plane: Any, kube: Any, namespace: str) -> Kube:
    """The controller's client as ``USER``, bound to a Role without ``patch deployments``."""
    from kubernetes import client as k8s

    rbac = k8s.RbacAuthorizationV1Api(kube)
    rbac.create_namespaced_role(namespace, role(namespace, ["get", "list", "watch", "delete"]))
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": USER, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": USER},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
        },
    )
    api = make_api_client(str(control_plane.kubeconfig))
    api.set_default_header("Impersonate-User", USER)
    return Kube(api)


def forbidden_passes(m: Any) -> int:
    return int(
        m.metrics.value(
            "dyn_gitops_controller_reconcile_errors_total",
            {"reconciler": "apply", "error_type": "forbidden"},
        )
    )


def stalled(k: Kube, namespace: str) -> dict[str, Any] | None:
    conds = (k.get(DGDS, namespace, GRAPH).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c.get("type") == "Stalled"), None)


def warnings(kube: Any, namespace: str) -> list[Any]:
    from kubernetes import client as k8s

    items = k8s.CoreV1Api(kube).list_namespaced_event(namespace).items
    return [e for e in items if e.type == "Warning" and e.involved_object.name == GRAPH]


def change_spec(k: Kube, namespace: str, value: str) -> None:
    body = {"spec": {"env": [{"name": "CHANGED", "value": value}]}}
    k.patch(DGDS, namespace, GRAPH, body)


def may_patch_deployments(kube: Any, namespace: str) -> bool:
    """The API server's authorizer lets ``USER`` patch Deployments now."""
    from kubernetes import client as k8s

    review = k8s.AuthorizationV1Api(kube).create_subject_access_review(
        {
            "spec": {
                "user": USER,
                "resourceAttributes": {
                    "namespace": namespace,
                    "verb": "patch",
                    "group": "apps",
                    "resource": "deployments",
                },
            }
        }
    )
    return bool(review.status.allowed)


def test_a_forbidden_write_is_reported_and_retried_only_when_the_dgd_changes(
    control_plane: Any, kube: Any, k: Kube, namespace: str
) -> None:
    from kubernetes import client as k8s

    gitops_apply(k, render(SAMPLES / GRAPH / "input", namespace))
    as_user = restricted(control_plane, kube, namespace)
    with running(settings_for_tests(namespace), as_user, timeout=60) as m:
        wait_for(lambda: forbidden_passes(m) >= 1, 60, "the first forbidden pass")
        time.sleep(QUIET)  # no change meanwhile: a slower machine can only retry less
        again = forbidden_passes(m) - 1
        assert again == 0, f"retried {again} times in {QUIET:g} s without any change"
        cond = wait_for(lambda: stalled(k, namespace), what="the Stalled condition")
        assert (cond["status"], cond["reason"]) == ("True", "Forbidden")
        msg = cond["message"]
        assert msg.startswith(f"apply Deployment {namespace}/{GRAPH}-"), msg
        assert f'User "{USER}" cannot patch resource "deployments"' in msg
        (event,) = wait_for(lambda: warnings(kube, namespace), what="the Warning event")
        assert (event.reason, event.message) == ("Forbidden", msg)
        # the DGD changes: one more pass, reported for the new generation
        generation = k.get(DGDS, namespace, GRAPH)["metadata"]["generation"]
        change_spec(k, namespace, "1")
        wait_for(lambda: forbidden_passes(m) >= 2, what="a pass after the change")
        wait_for(
            lambda: (stalled(k, namespace) or {}).get("observedGeneration") == generation + 1,
            what="the condition of the new generation",
        )
        time.sleep(QUIET)
        assert forbidden_passes(m) == 2
        # RBAC allows the write (no retry by itself), then the DGD changes: cleared
        k8s.RbacAuthorizationV1Api(kube).replace_namespaced_role(
            USER, namespace, role(namespace, ["get", "list", "watch", "delete", "patch"])
        )
        wait_for(lambda: may_patch_deployments(kube, namespace), what="RBAC allows the patch")
        change_spec(k, namespace, "2")
        wait_for(lambda: stalled(k, namespace) is None, 60, "the Stalled condition cleared")
        status = k.get(DGDS, namespace, GRAPH)["status"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert ready["observedGeneration"] == generation + 2
