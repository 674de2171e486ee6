"""Coexistence with a Dynamo 1.5 operator (docs/operator.md, *Support matrix*): GitOps
applies of the rendered DGD against the real kube-apiserver, with a stand-in for the
operator's admission webhooks (``support/dynamo_webhook.py``: its defaulting stamps,
workload-provider immutability, and the namespace-scope Lease it honours) served over TLS
on loopback and called through webhook configurations with a caBundle.

One test per row of the matrix that can be reproduced here; the operator's controllers
(reconciling the DGD into DynamoComponentDeployments) and its conversion webhook are Go code
this suite cannot run: their rows cite the upstream source instead.

Measured on kube-apiserver v1.36: fields a mutating webhook adds during a server-side apply
are owned by no field manager (managedFields lists only the applied fields), so a later
apply that leaves them out keeps them; what breaks is removing or changing the provider:
a replace (PUT) of a DGD without it, an apply that stops carrying a provider it carried
before, or a provider that differs from the stamped one.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator.errors import ApiError, NotFoundError
from dyn_gitops_operator.kube import Kube
from dyn_gitops_operator.leases import expired
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.resources import LEASES
from dyn_gitops_operator.scope import ScopeLeaseHolder
from dyn_gitops_operator.settings import (
    SCOPE_LEASE_HANDOVER_ANNOTATION,
    SCOPE_LEASE_NAME,
    ScopeSettings,
)
from support.dynamo_webhook import (
    ORIGIN,
    PROVIDER,
    SELECTOR_LABEL,
    Served,
    StandIn,
    serve,
    wait_active,
)
from support.inputs import small_dgd
from support.rendering import render

from dyn_gitops import keys
from dyn_gitops.errors import RenderError

Obj = dict[str, Any]
ARGO = "argocd-controller"  # the field manager Argo CD applies with
CSA = "kubectl-client-side-apply"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
DGD_API = "/apis/nvidia.com/v1beta1"


# ------------------------------------------------------------------------------ harness
@dataclass
class Operator:
    """The stand-in, served and registered; namespaces it covers are made by ``namespace``."""

    k: Kube
    kube: Any
    standin: StandIn
    served: Served

    def namespace(self, name: str, *, covered: bool = True) -> str:
        """A fresh namespace, covered by the webhooks (labelled) or not."""
        from kubernetes import client as kc

        labels = {SELECTOR_LABEL: self.served.label_value} if covered else {}
        ns = f"{name}-{self.served.label_value}"
        kc.CoreV1Api(self.kube).create_namespace({"metadata": {"name": ns, "labels": labels}})
        if covered:
            self.wait_covered(ns)
        return ns

    def cover(self, ns: str) -> None:
        """Label ``ns`` so that the webhooks start covering it (an operator installed later)."""
        from kubernetes import client as kc

        kc.CoreV1Api(self.kube).patch_namespace(
            ns, {"metadata": {"labels": {SELECTOR_LABEL: self.served.label_value}}}
        )
        self.wait_covered(ns)

    def wait_covered(self, ns: str) -> None:
        probe = {
            "apiVersion": "nvidia.com/v1beta1",
            "kind": "DynamoGraphDeployment",
            "metadata": {"name": "webhook-probe", "namespace": ns},
            "spec": {"components": []},
        }

        def create() -> None:
            with contextlib.suppress(ApiError):  # a refusal is a call too
                self.k.request("POST", dgd_path(ns), [("dryRun", "All")], probe)

        wait_active(create, lambda: any(s.name == "webhook-probe" for s in self.standin.seen(ns)))
        with self.standin.lock:
            self.standin.requests[:] = [
                s for s in self.standin.requests if s.name != "webhook-probe"
            ]


@pytest.fixture
def operator(kube: Any, k: Kube) -> Iterator[Callable[..., Operator]]:
    """``operator(**StandIn fields)``: a Dynamo operator's webhooks (stand-in) on the test
    control plane; ``honour_lease=False`` ignores scope leases (the mechanism removed)."""
    from kubernetes import client as kc

    adm = kc.AdmissionregistrationV1Api(kube)
    stack: list[tuple[Any, Served]] = []

    def start(honour_lease: bool = True, **kw: Any) -> Operator:
        standin = StandIn(lease_live=lease_checker(k) if honour_lease else None, **kw)
        ctx = serve(standin)
        served = ctx.__enter__()
        stack.append((ctx, served))
        mutating, validating = served.configurations()
        adm.create_mutating_webhook_configuration(mutating)
        adm.create_validating_webhook_configuration(validating)
        return Operator(k, kube, standin, served)

    yield start
    for ctx, served in reversed(stack):
        name = served.configurations()[0]["metadata"]["name"]
        adm.delete_mutating_webhook_configuration(name)
        adm.delete_validating_webhook_configuration(name)
        ctx.__exit__(None, None, None)


def lease_checker(k: Kube) -> Callable[[str], bool]:
    """The operator's ``LeaseWatcher.Contains``: a live scope lease in the namespace."""

    def live(ns: str) -> bool:
        try:
            lease = k.get(LEASES, ns, SCOPE_LEASE_NAME)
        except NotFoundError:
            return False
        return not expired(lease, datetime.now(UTC))

    return live


def dgd_path(ns: str, name: str | None = None) -> str:
    base = f"{DGD_API}/namespaces/{ns}/dynamographdeployments"
    return f"{base}/{name}" if name else base


def rendered_dgd(tmp_path: Path, ns: str, name: str = "g", **settings: Any) -> Obj:
    """The source DGD as ``dyn-gitops render`` emits it into ``ns``."""
    src = tmp_path / f"{name}.yaml"
    src.write_text(small_dgd(name))
    objs = render(src, namespace=ns, **settings)
    (dgd,) = [o for o in objs if o["kind"] == "DynamoGraphDeployment"]
    return dgd


def without_stamps(dgd: Obj) -> Obj:
    """``dgd`` as a renderer that does not emit the webhook's stamps would output it."""
    out = json.loads(json.dumps(dgd))
    for key in (PROVIDER, ORIGIN):
        out["metadata"]["annotations"].pop(key, None)
    return out


def ssa(k: Kube, obj: Obj, *, dry_run: bool = False, manager: str = ARGO) -> Obj:
    """A server-side apply as Argo CD's ``ServerSideApply=true`` sends it (no force)."""
    query = [("fieldManager", manager)] + ([("dryRun", "All")] if dry_run else [])
    meta = obj["metadata"]
    path = dgd_path(meta["namespace"], meta["name"])
    return k.request("PATCH", path, query, obj, "application/apply-patch+yaml")


def replace(k: Kube, obj: Obj) -> Obj:
    """A replace (``kubectl replace``, Argo CD ``Replace=true``): PUT of Git's object."""
    meta = obj["metadata"]
    live = k.request("GET", dgd_path(meta["namespace"], meta["name"]))
    body = {**obj, "metadata": {**meta, "resourceVersion": live["metadata"]["resourceVersion"]}}
    return k.request("PUT", dgd_path(meta["namespace"], meta["name"]), [], body)


def client_side_apply(k: Kube, obj: Obj) -> Obj:
    """``kubectl apply`` (Argo CD's default sync): create with the last-applied annotation,
    then a three-way JSON merge patch (a custom resource has no strategic merge): keys of
    the last-applied object that Git dropped are deleted, keys that differ from live set."""
    meta = obj["metadata"]
    path = dgd_path(meta["namespace"], meta["name"])
    modified = json.loads(json.dumps(obj))
    modified["metadata"].setdefault("annotations", {})[LAST_APPLIED] = json.dumps(
        obj, sort_keys=True
    )
    try:
        live = k.request("GET", path)
    except NotFoundError:
        return k.request("POST", dgd_path(meta["namespace"]), [("fieldManager", CSA)], modified)
    original = json.loads(((live["metadata"].get("annotations") or {}).get(LAST_APPLIED)) or "{}")
    patch = _three_way(original, modified, live)
    return k.request("PATCH", path, [("fieldManager", CSA)], patch, "application/merge-patch+json")


def _three_way(original: Any, modified: Any, current: Any) -> Any:
    if not (isinstance(modified, dict) and isinstance(current, dict)):
        return modified
    original = original if isinstance(original, dict) else {}
    out: Obj = {k: None for k in original if k not in modified}
    for key, value in modified.items():
        if key not in current:
            out[key] = value
        elif value != current[key]:
            sub = _three_way(original.get(key), value, current[key])
            if sub != {}:
                out[key] = sub
    return out


def component(dgd: Obj, name: str) -> Obj:
    """The v1beta1 DGD's component ``name``."""
    return next(c for c in dgd["spec"]["components"] if c["name"] == name)


def live_dgd(k: Kube, ns: str, name: str = "g") -> Obj:
    return k.request("GET", dgd_path(ns, name))


def annotations(obj: Obj) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def owned_annotations(obj: Obj, manager: str) -> set[str]:
    """The annotation keys ``manager`` owns, from managedFields."""
    keys_: set[str] = set()
    for entry in obj["metadata"].get("managedFields") or []:
        if entry.get("manager") == manager:
            fields = entry.get("fieldsV1", {}).get("f:metadata", {}).get("f:annotations", {})
            keys_ |= {f[2:] for f in fields if f.startswith("f:")}
    return keys_


def refusal(call: Callable[[], Any]) -> str:
    with pytest.raises(ApiError) as err:
        call()
    assert err.value.status == 422, err.value
    return str(err.value)


def assert_stable(k: Kube, dgd: Obj) -> None:
    """Argo CD's view after a sync: a server-side dry-run apply of Git's DGD equals the
    live object (no diff), and a real apply is accepted and writes nothing (no conflict,
    same resourceVersion)."""
    ns, name = dgd["metadata"]["namespace"], dgd["metadata"]["name"]
    before = live_dgd(k, ns, name)
    assert ssa(k, dgd, dry_run=True) == before
    after = ssa(k, dgd)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


# ---------------------------------------------------------------- row: cluster-wide operator
@pytest.mark.parametrize("grove", [False, True])
def test_cluster_wide_ssa_of_the_rendered_dgd_twice_is_stable(
    operator: Callable[..., Operator], k: Kube, tmp_path: Path, grove: bool
) -> None:
    """The rendered DGD carries the stamps the defaulting webhook would write: applied
    twice with the operator's webhooks in place, no conflict and no diff; the applier owns
    the stamps, the webhook changed nothing (component path, and Grove on both sides). A
    service without ``replicas`` gets 1 from the webhook on every write, owned by no one:
    no diff either."""
    op = operator(grove_enabled=grove)
    ns = op.namespace("cw")
    dgd = rendered_dgd(tmp_path, ns, grove=grove)
    assert annotations(dgd)[PROVIDER] == ("grove" if grove else "component")
    assert annotations(dgd)[ORIGIN] == "1.5.1"
    first = ssa(k, dgd)
    assert {PROVIDER, ORIGIN} <= owned_annotations(first, ARGO)
    assert_stable(k, dgd)
    assert_stable(k, dgd)
    seen = op.standin.seen(ns)
    assert {(s.webhook, s.operation) for s in seen} >= {
        ("mutate", "CREATE"),
        ("validate", "CREATE"),
        ("mutate", "UPDATE"),
        ("validate", "UPDATE"),
    }
    assert all(s.allowed and not s.skipped and not s.patched for s in seen)

    src = tmp_path / "r.yaml"
    src.write_text(small_dgd("r").replace("      replicas: 2\n", ""))
    (no_replicas,) = [
        o for o in render(src, namespace=ns, grove=grove) if o["kind"] == "DynamoGraphDeployment"
    ]
    assert "replicas" not in component(no_replicas, "Frontend")
    stored = ssa(k, no_replicas)
    assert component(stored, "Frontend")["replicas"] == 1  # the webhook's default
    assert_stable(k, no_replicas)


def test_cluster_wide_client_side_apply_and_replace_are_stable_with_the_stamps(
    operator: Callable[..., Operator], k: Kube, tmp_path: Path
) -> None:
    """Argo CD's default sync (``kubectl apply``) and ``Replace=true`` of the rendered DGD
    are accepted again and again: the provider they send is the stored one."""
    op = operator()
    ns = op.namespace("cw-csa")
    dgd = rendered_dgd(tmp_path, ns)
    client_side_apply(k, dgd)
    rv = live_dgd(k, ns)["metadata"]["resourceVersion"]
    client_side_apply(k, dgd)
    assert live_dgd(k, ns)["metadata"]["resourceVersion"] == rv  # an empty patch
    replace(k, dgd)
    replace(k, dgd)
    assert annotations(live_dgd(k, ns))[PROVIDER] == "component"
    assert all(s.allowed for s in op.standin.seen(ns))


def test_cluster_wide_without_the_stamp_a_replace_is_refused(
    operator: Callable[..., Operator], k: Kube, tmp_path: Path
) -> None:
    """What the stamps prevent: a DGD applied without them gets them from the webhook on
    create; server-side and client-side applies leave the unowned stamp alone, but a
    replace sends the DGD without it, i.e. removes it, which the validating webhook
    refuses. The same replace of the rendered (stamped) DGD is accepted."""
    op = operator()
    ns = op.namespace("cw-bare")
    bare = without_stamps(rendered_dgd(tmp_path, ns))
    created = ssa(k, bare)
    assert annotations(created)[PROVIDER] == "component"  # stamped by the webhook...
    assert PROVIDER not in owned_annotations(created, ARGO)  # ...owned by no one
    assert_stable(k, bare)
    message = refusal(lambda: replace(k, bare))
    assert 'denied the request: DynamoGraphDeployment.nvidia.com "g" is invalid' in message
    # the controller's API errors never repeat a value (errors.redact): the field path and
    # the rule are what the test reads
    assert f'metadata.annotations[{PROVIDER}]: Invalid value: "<redacted>": field is immutable' in (
        message
    )
    replace(k, rendered_dgd(tmp_path, ns))  # the mitigation: the same replace, stamped

    csa_ns = op.namespace("cw-bare-csa")
    bare = without_stamps(rendered_dgd(tmp_path, csa_ns))
    client_side_apply(k, bare)
    client_side_apply(k, bare)
    assert annotations(live_dgd(k, csa_ns))[PROVIDER] == "component"


def test_cluster_wide_a_provider_change_is_refused(
    operator: Callable[..., Operator], k: Kube, tmp_path: Path
) -> None:
    """The provider is fixed at create. A render whose provider differs from the stored one
    (Grove enabled after the DGD was created on the component path), or an apply that
    stops carrying the provider it applied before, is refused by the validating webhook
    with server-side apply too: delete and recreate the DGD, or keep the old routing."""
    op = operator()
    ns = op.namespace("cw-change")
    ssa(k, rendered_dgd(tmp_path, ns))
    grove = rendered_dgd(tmp_path, ns, grove=True)
    assert annotations(grove)[PROVIDER] == "grove"
    message = refusal(lambda: ssa(k, grove))
    assert f'metadata.annotations[{PROVIDER}]: Invalid value: "<redacted>": field is immutable' in (
        message
    )
    message = refusal(lambda: ssa(k, without_stamps(rendered_dgd(tmp_path, ns))))
    # the controller's API errors never repeat a value (errors.redact): the field path and
    # the rule are what the test reads
    assert f'metadata.annotations[{PROVIDER}]: Invalid value: "<redacted>": field is immutable' in (
        message
    )
    assert annotations(live_dgd(k, ns))[PROVIDER] == "component"


def test_omit_mode_outputs_nothing_the_operator_acts_on(
    operator: Callable[..., Operator], k: Kube, tmp_path: Path
) -> None:
    """Setting nvidia-objects omit, for a namespace a cluster-wide operator reconciles: no
    nvidia.com object in the output, so the operator's webhooks are never called for it
    (nor would its controllers find a DGD to reconcile); what would need one is refused."""
    op = operator()
    ns = op.namespace("omit")
    src = tmp_path / "g.yaml"
    src.write_text(small_dgd("g"))
    objs = render(src, namespace=ns, nvidia_objects="omit")
    assert objs and not [o for o in objs if o["apiVersion"].startswith("nvidia.com/")]
    for obj in objs:  # server-side dry-run of everything: the webhooks see none of it
        query = [("fieldManager", ARGO), ("dryRun", "All")]
        k.request("PATCH", _path_of(obj, ns), query, obj, "application/apply-patch+yaml")
    assert op.standin.seen(ns) == []

    adapter = small_dgd("h").replace(
        "      replicas: 3\n", "      replicas: 3\n      scalingAdapter:\n        enabled: true\n"
    )
    (tmp_path / "h.yaml").write_text(adapter)
    with pytest.raises(RenderError) as err:
        render(tmp_path / "h.yaml", nvidia_objects="omit")
    assert "spec.services.VllmWorker.scalingAdapter: renders a nvidia.com" in str(err.value)
    assert render(tmp_path / "h.yaml")  # emit (the default) renders the adapter
    (tmp_path / "m.yaml").write_text(
        "apiVersion: nvidia.com/v1alpha1\nkind: DynamoModel\nmetadata: {name: m}\n"
        "spec: {modelName: m, baseModelName: b}\n"
    )
    with pytest.raises(RenderError) as err:
        render(tmp_path / "m.yaml", nvidia_objects="omit")
    assert "apiVersion: DynamoModel is a nvidia.com object" in str(err.value)


def _path_of(obj: Obj, ns: str) -> str:
    group_version = obj["apiVersion"]
    prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    plural = {
        "ServiceAccount": "serviceaccounts",
        "Service": "services",
        "Role": "roles",
        "RoleBinding": "rolebindings",
        "Deployment": "deployments",
    }[obj["kind"]]
    return f"{prefix}/namespaces/{ns}/{plural}/{obj['metadata']['name']}"


# ------------------------------------------------------------------------ row: operator absent
def test_operator_absent_then_installed_the_stamped_dgd_stays_admitted(
    operator: Callable[..., Operator], k: Kube, tmp_path: Path
) -> None:
    """Without an operator nothing stamps the DGD, so the renderer does: when an operator
    arrives later its webhooks find the provider already there and admit every apply.
    Without the stamps, the DGD stays unannotated until the operator's controller writes
    the provider; a dyn-gitops that starts emitting it meanwhile is refused (only the
    operator may add it)."""
    op = operator()
    ns = op.namespace("absent", covered=False)
    dgd = rendered_dgd(tmp_path, ns)
    ssa(k, dgd)
    bare_ns = op.namespace("absent-bare", covered=False)
    ssa(k, without_stamps(rendered_dgd(tmp_path, bare_ns)))
    assert op.standin.seen(ns) == [] and op.standin.seen(bare_ns) == []

    op.cover(ns)  # the operator is installed
    assert_stable(k, dgd)
    assert all(s.allowed for s in op.standin.seen(ns))

    op.cover(bare_ns)
    message = refusal(lambda: ssa(k, rendered_dgd(tmp_path, bare_ns)))
    assert (
        f"metadata.annotations[{PROVIDER}]: Forbidden: may only be materialized by the "
        "Dynamo operator" in message
    )


# ------------------------------------------------------------------ row: namespace-scoped
def hold_scope_lease(k: Kube, ns: str) -> ScopeLeaseHolder:
    """What dyn-gitops-operator --mode namespace does first: take the namespace's scope
    lease (renewed in the background until stopped)."""
    holder = ScopeLeaseHolder(k, ScopeSettings(), ns, "coexist-test", Metrics(), lambda: None)
    assert holder.acquire(threading.Event())
    holder.start_renewing()
    return holder


def test_namespace_scope_lease_keeps_the_webhooks_out_and_stamps_keep_the_dgd_valid(
    operator: Callable[..., Operator], k: Kube, tmp_path: Path
) -> None:
    """The companion controller in namespace mode holds the scope lease: the cluster-wide
    operator's defaulting and validating webhooks skip the namespace (as its controllers
    do), so nothing is stamped: the renderer's stamps are what is stored. When the lease
    goes (the controller stops, or is uninstalled) the webhooks act again and the stamped
    DGD stays admitted; an unstamped one can then no longer be given its provider by
    GitOps."""
    op = operator()
    ns = op.namespace("scoped")
    holder = hold_scope_lease(k, ns)
    try:
        dgd = rendered_dgd(tmp_path, ns)
        stored = ssa(k, dgd)
        assert_stable(k, dgd)
        bare = without_stamps(rendered_dgd(tmp_path, ns, name="bare"))
        bare_stored = ssa(k, bare)
        seen = op.standin.seen(ns)
        assert seen and all(s.skipped and s.allowed and not s.patched for s in seen)
        assert annotations(stored)[PROVIDER] == "component"
        assert PROVIDER not in annotations(bare_stored)  # the webhook skipped: no stamp
        assert component(live_dgd(k, ns, "bare"), "Frontend")["replicas"] == 2
    finally:
        holder.stop(release=True)
    # a clean stop keeps the lease live, marked for a successor (the webhooks still skip);
    # with no successor it expires: stand for that by deleting it
    lease = k.get(LEASES, ns, SCOPE_LEASE_NAME)
    assert lease["metadata"]["annotations"][SCOPE_LEASE_HANDOVER_ANNOTATION] == "true"
    k.delete(LEASES, ns, SCOPE_LEASE_NAME)
    with pytest.raises(NotFoundError):
        k.get(LEASES, ns, SCOPE_LEASE_NAME)

    assert_stable(k, dgd)
    assert [s.skipped for s in op.standin.seen(ns)][-2:] == [False, False]
    message = refusal(lambda: ssa(k, rendered_dgd(tmp_path, ns, name="bare")))
    assert "may only be materialized by the Dynamo operator" in message


# -------------------------------------------------------- row: lease mechanism removed upstream
def test_lease_removed_upstream_webhooks_act_despite_our_lease_and_stamps_keep_applies_stable(
    operator: Callable[..., Operator], k: Kube, tmp_path: Path
) -> None:
    """An operator that no longer honours the scope lease (the deprecated mechanism
    removed, or #11475's global admission): its webhooks act in the namespace our
    controller claims. The stamped DGD applies without conflict or diff; keeping its
    controllers away then takes setting nvidia-objects omit (see the omit test)."""
    op = operator(honour_lease=False)
    ns = op.namespace("nolease")
    holder = hold_scope_lease(k, ns)
    try:
        dgd = rendered_dgd(tmp_path, ns)
        ssa(k, dgd)
        assert_stable(k, dgd)
        seen = op.standin.seen(ns)
        assert seen and not any(s.skipped for s in seen)
        assert all(s.allowed and not s.patched for s in seen)
    finally:
        holder.stop(release=True)
    assert keys.ANN_WORKLOAD_PROVIDER == PROVIDER  # the stand-in and the renderer agree


def test_omit_mode_the_controller_rolls_workers_from_the_workloads_alone() -> None:
    """With nvidia-objects omit there is no DGD for the companion controller to read: the
    newest worker generation is current, sized from the rendered desired count and rolled
    in within the budget, the old one drained and deleted (in-memory API server)."""
    from support.fakecluster import FakeCluster
    from support.graphs import WORKER, rollout_graph, rollout_step, worker_name
    from support.rendering import render

    c = FakeCluster()

    def kcm(dep: Obj) -> Obj:
        return rollout_step(dep, stuck=set(), failed=set())

    first = render([rollout_graph("img:1", 4)], c.ns, nvidia_objects="omit")
    assert not [o for o in first if o["apiVersion"].startswith("nvidia.com/")]
    old = worker_name(first)
    c.apply(first)
    for _ in range(10):
        c.converge("roll")
        c.kcm_step(kcm)
    assert c.replicas(old) == 4
    c.advance(10)
    second = render([rollout_graph("img:2", 4)], c.ns, nvidia_objects="omit")
    new = worker_name(second)
    c.apply(second)
    for _ in range(60):
        c.converge("roll")
        deps = c.deployments(WORKER)
        assert sum(d["spec"]["replicas"] for d in deps.values()) <= 4 + 1  # max-surge 25 %
        if old not in deps:
            break
        c.kcm_step(kcm)
    assert set(c.deployments(WORKER)) == {new}
    assert c.replicas(new) == 4
