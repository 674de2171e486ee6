"""Every upstream example in ``CONFORMANCE`` renders, and every rendered object is accepted by
a real kube-apiserver (server-side apply, dry-run), with our CRDs (``dyn-gitops crds``) and
the minimal third-party ones (``support/thirdparty_crds.py``) installed.

The settings, the lists of what is expected not to render and of what needs the settings
lws or dra all come from ``test_conformance.py``: that module stays the single place they
are written.

Every source DGD is emitted in ``nvidia.com/v1beta1`` (setting source-api-version), the
version our CRDs serve and store: the v1alpha1 examples as the operator's conversion webhook
stores them. These tests run on a control plane of their own with those CRDs (the session's
serves v1alpha1 to the companion controller's tests); a DGD emitted as v1alpha1 is refused
there, which a test shows.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from support.conformance import (
    EXAMPLES,
    EXPECTED_UNSUPPORTED,
    NEEDS_DRA,
    NEEDS_LWS,
    PASSTHROUGH_ONLY,
)
from support.controlplane import ensure_namespace
from support.paths import CONFORMANCE
from support.rendering import AS_APPLIED, render

from dyn_gitops.errors import RenderError

pytestmark = pytest.mark.realk8s

DGD_KIND = "DynamoGraphDeployment"
V1BETA1 = "nvidia.com/v1beta1"

#: the examples with a v1beta1 DGD (exact: checked against the corpus below)
V1BETA1_EXAMPLES = frozenset(
    {
        "examples__backends__sglang__deploy__v1beta1__disagg.yaml",
        "examples__backends__sglang__deploy__v1beta1__disagg_planner.yaml",
        "examples__backends__trtllm__deploy__v1beta1__disagg-multinode.yaml",
        "examples__backends__vllm__deploy__lora__v1beta1__agg_lora.yaml",
        "examples__backends__vllm__deploy__v1beta1__agg.yaml",
    }
)

#: Known rejections on the component path: renderer findings that are reported and open, each
#: named with its cause. Not a skip: the file's other objects are still checked, any other
#: rejection fails, and an entry that no longer happens fails too (so that it is removed).
#: file -> (cause, {object: what the API server's message must contain}). (On the Grove path
#: the same pod spec sits in a PodCliqueSet, which the minimal free-form CRD accepts.)
KNOWN_REJECTIONS: dict[str, tuple[str, dict[str, str]]] = {
    "docs__pages__kubernetes__autoscaling.md__scaling-adapter-snippet.yaml": (
        "a docs snippet whose services set no image: the renderer (like the operator) emits "
        "Deployments whose main container has no image, which the API server refuses; "
        "dyn-gitops render says so in a warning per service (rules.warn_graph)",
        {
            f"apps/v1 Deployment/sglang-agg-{svc}": "containers[0].image: Required value"
            for svc in ("frontend", "decode")
        },
    ),
}


def _documents(name: str) -> list[dict[str, Any]]:
    text = (CONFORMANCE / name).read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d is not None]


def _params(names: list[str]) -> list[Any]:
    """One param per file; the ones test_conformance.py expects to be refused are expected to
    fail to render (strictly, and only with a RenderError: a rejection is still a failure)."""
    return [
        pytest.param(
            n,
            id=n,
            marks=pytest.mark.xfail(
                raises=RenderError,
                strict=True,
                reason=(
                    f"expected not to render (test_conformance.py): {EXPECTED_UNSUPPORTED[n][0]}"
                ),
            ),
        )
        if n in EXPECTED_UNSUPPORTED
        else pytest.param(n, id=n)
        for n in names
    ]


def _render(name: str, namespace: str, **settings: Any) -> list[dict[str, Any]]:
    """In-process (no DYN_GITOPS_* variables read); a RenderError lists every problem."""
    return render(CONFORMANCE / name, namespace=namespace, **{**AS_APPLIED, **settings})


def _component_settings(name: str) -> dict[str, Any]:
    """The settings test_conformance.py renders with: lws on for the multinode examples,
    dra on for the GPU-memory-service ones (for the others they change nothing)."""
    return {"lws": name in NEEDS_LWS, "dra": name in NEEDS_DRA}


@pytest.fixture
def namespace(kube: Any) -> str:
    """A fresh namespace on this module's control plane."""
    import uuid

    from kubernetes import client as k8s

    name = f"t-{uuid.uuid4().hex[:10]}"
    k8s.CoreV1Api(kube).create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture(scope="module")
def dyn(kube: Any) -> Any:
    """A dynamic client (the ``kube`` fixture installed our CRDs, DynamoModel's included:
    the lora example's DynamoModel is dry-run against the schema we generate)."""
    from kubernetes.dynamic import DynamicClient

    return DynamicClient(kube)


def _reason(exc: Any) -> str:
    try:
        body = json.loads(exc.body)
    except (TypeError, ValueError):
        return f"{exc.status} {exc.body}"
    return f"{exc.status} {body.get('reason', '')}: {body.get('message', exc.body)}"


#: applied first, so that what lives in them or is defined by them can be checked
_FIRST = ("Namespace", "CustomResourceDefinition")


def _dry_run_apply_all(dyn: Any, objects: list[dict[str, Any]], namespace: str) -> list[str]:
    """Server-side apply every object in dry-run; one line per rejected object."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    for ns in {o["metadata"].get("namespace") for o in objects} - {None, namespace}:
        ensure_namespace(dyn.client, ns)  # a dry-run Namespace would not make it exist
    ordered = sorted(objects, key=lambda o: o["kind"] not in _FIRST)  # stable otherwise
    rejected = []
    for obj in ordered:
        what = f"{obj['apiVersion']} {obj['kind']}/{obj['metadata']['name']}"
        try:
            res = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        except ResourceNotFoundError:
            rejected.append(f"{what}: the API server does not serve this kind")
            continue
        # pass-through objects without a namespace land where Argo CD / Flux would put them
        ns = obj["metadata"].get("namespace", namespace) if res.namespaced else None
        try:
            dyn.server_side_apply(
                res,
                body=obj,
                name=obj["metadata"]["name"],
                namespace=ns,
                field_manager="dyn-gitops-test",
                force_conflicts=True,
                dry_run="All",
            )
        except ApiException as exc:
            rejected.append(f"{what}: {_reason(exc)}")
    return rejected


def _assert_accepted(
    dyn: Any,
    name: str,
    objects: list[dict[str, Any]],
    namespace: str,
    known_rejections: dict[str, tuple[str, dict[str, str]]],
) -> None:
    """Zero rejected objects, apart from the file's known rejections (then an xfail)."""
    cause, known = known_rejections.get(name, ("", {}))
    rejected = _dry_run_apply_all(dyn, objects, namespace)
    unexpected = [
        r
        for r in rejected
        if not any(r.startswith(f"{what}: ") and needle in r for what, needle in known.items())
    ]
    assert unexpected == [], (
        f"{name}: {len(unexpected)} of {len(objects)} objects rejected:\n" + "\n".join(unexpected)
    )
    if known:
        gone = [w for w in known if not any(r.startswith(f"{w}: ") for r in rejected)]
        assert not gone, f"{name}: no longer rejected, remove from KNOWN_REJECTIONS: {gone}"
        pytest.xfail(f"known rejection ({cause}):\n" + "\n".join(rejected))


def _served_dgd_versions() -> set[str]:
    from dyn_gitops.crds import crds

    (dgd,) = [c for c in crds() if c["spec"]["names"]["kind"] == DGD_KIND]
    return {v["name"] for v in dgd["spec"]["versions"] if v["served"]}


def _keys(objects: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in objects}


def test_the_v1beta1_list_is_exact() -> None:
    v1beta1_files = {
        n
        for n in EXAMPLES
        if any(d.get("apiVersion") == V1BETA1 and d.get("kind") == DGD_KIND for d in _documents(n))
    }
    assert v1beta1_files == V1BETA1_EXAMPLES


@pytest.mark.parametrize("name", _params(EXAMPLES))
def test_example_output_accepted_by_real_apiserver(dyn: Any, namespace: str, name: str) -> None:
    objects = _render(name, namespace, **_component_settings(name))
    assert objects, "rendered nothing"
    dgds = {o["metadata"]["name"]: o for o in objects if o["kind"] == DGD_KIND}
    assert {d["metadata"]["name"] for d in _documents(name) if d.get("kind") == DGD_KIND} == set(
        dgds
    ), "every source DGD is emitted"
    # v1alpha1 ones converted as the operator's webhook stores them
    assert {d["apiVersion"] for d in dgds.values()} <= {V1BETA1}
    _assert_accepted(dyn, name, objects, namespace, KNOWN_REJECTIONS)


@pytest.mark.parametrize("name", sorted(V1BETA1_EXAMPLES))
def test_v1beta1_source_as_written_is_not_served_by_our_crd(
    dyn: Any, namespace: str, name: str
) -> None:
    """Why source-api-version v1alpha1 needs other CRDs (``dyn-gitops crds --dgd-version
    v1alpha1``, or Dynamo's own): ours serve v1beta1 only (no conversion webhook), so a
    source DGD emitted as v1alpha1 is refused; as written, v1beta1, it is accepted."""
    assert _served_dgd_versions() == {"v1beta1"}
    objects = _render(name, namespace, source_api_version="v1alpha1", **_component_settings(name))
    rejected = _dry_run_apply_all(dyn, [o for o in objects if o["kind"] == DGD_KIND], namespace)
    assert rejected and all("does not serve this kind" in r for r in rejected), rejected
    objects = _render(name, namespace, source_api_version="as-written", **_component_settings(name))
    dgds = [o for o in objects if o["kind"] == DGD_KIND]
    assert {d["apiVersion"] for d in dgds} == {V1BETA1}
    assert _dry_run_apply_all(dyn, dgds, namespace) == []


#: the Grove variant: every example with a DGD (a file without one has no Grove path)
GROVE_EXAMPLES = [n for n in EXAMPLES if n not in PASSTHROUGH_ONLY]


@pytest.mark.parametrize("name", _params(GROVE_EXAMPLES))
def test_example_grove_output_accepted_by_real_apiserver(
    dyn: Any, namespace: str, name: str
) -> None:
    """The component path's settings plus grove (which wins over lws): a PodCliqueSet per
    DGD instead of Deployments and LeaderWorkerSets."""
    objects = _render(name, namespace, **{**_component_settings(name), "grove": True})
    assert objects, "rendered nothing"
    assert any(o["kind"] == "PodCliqueSet" for o in objects)
    _assert_accepted(dyn, name, objects, namespace, {})


def test_a_rejection_is_reported(dyn: Any, namespace: str) -> None:
    """The check can fail, and names kind, name and the API server's reason."""
    bad = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "bad"},
        "spec": {"ports": [{"port": 99999}]},
    }
    (line,) = _dry_run_apply_all(dyn, [bad], namespace)
    assert line.startswith("v1 Service/bad: 422 Invalid:"), line
    assert "spec.ports[0].port" in line, line
