"""Every rendered object of a built-in Kubernetes kind validates against the Kubernetes
OpenAPI schema (``kubernetes-validate``, strict: unknown fields are errors).

Objects of custom kinds have no schema in that package; they are counted and listed, and a
custom API group nobody expected fails the run instead of being skipped quietly.
"""

from __future__ import annotations

import copy
import functools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import kubernetes_validate.utils
import pytest
from support.conformance import NEEDS_DRA, NOT_RENDERED_BY_DEFAULT, PASSTHROUGH_ONLY
from support.paths import CONFORMANCE, SAMPLES
from support.rendering import AS_APPLIED, render
from support.schemas import K8S_VERSION

#: Grove variant: files with no DGD have no PodCliqueSet; GMS files need DRA as elsewhere
NOT_ON_GROVE = PASSTHROUGH_ONLY
GROVE_EXTRA: dict[str, dict[str, Any]] = {name: {"dra": True} for name in NEEDS_DRA}

#: API groups served by kube-apiserver itself ("" is the core group)
BUILTIN_GROUPS = {
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apps",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
}
#: CRD groups the renderer is expected to emit (Dynamo, Istio, Gateway API inference extension)
CUSTOM_GROUPS = {
    "nvidia.com",
    "networking.istio.io",
    "inference.networking.k8s.io",
    "leaderworkerset.x-k8s.io",
    "scheduling.volcano.sh",
    "grove.io",
}


def group_of(obj: dict[str, Any]) -> str:
    return str(obj.get("apiVersion", "")).rpartition("/")[0]


def inputs() -> list[Path]:
    """Every renderable conformance example (test_conformance pins which are not) and every
    sample input directory."""
    return sorted(
        p for p in CONFORMANCE.glob("*.yaml") if p.name not in NOT_RENDERED_BY_DEFAULT
    ) + sorted(p for p in SAMPLES.glob("*/input") if p.is_dir())


@pytest.fixture(scope="module", autouse=True)
def cached_schemas() -> Iterator[None]:
    """kubernetes-validate re-reads its schema files (megabytes of JSON) on every call;
    caching them makes the check about ten times faster and changes nothing else."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            kubernetes_validate.utils,
            "schema_contents",
            functools.lru_cache(maxsize=None)(kubernetes_validate.utils.schema_contents),
        )
        yield


@pytest.fixture(scope="module")
def all_objects() -> dict[str, list[dict[str, Any]]]:
    return {label(path): render(path, **AS_APPLIED) for path in inputs()}


def label(path: Path) -> str:
    return path.name if path.parent == CONFORMANCE else f"samples/{path.parent.name}"


def schema_errors(obj: dict[str, Any]) -> Iterator[str]:
    meta = obj.get("metadata") or {}
    ident = (
        f"{obj.get('apiVersion')} {obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name')}"
    )
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        yield f"{ident}: no schema for a built-in kind in Kubernetes {K8S_VERSION}"
    except kubernetes_validate.ValidationError as exc:
        where = "/".join(str(p) for p in exc.path)
        yield f"{ident}: {where}: {exc.message}"


def test_the_schema_version_is_shipped() -> None:
    from kubernetes_validate.utils import all_versions

    assert K8S_VERSION in all_versions()


def _as_pod(meta: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", **meta}, "spec": spec}


def all_errors(objs: list[dict[str, Any]]) -> list[str]:
    """Schema problems of built-in objects and of the pod specs inside custom workloads."""
    errors: list[str] = []
    for obj in objs:
        group = group_of(obj)
        if group in BUILTIN_GROUPS:
            errors.extend(schema_errors(obj))
        elif obj["kind"] == "LeaderWorkerSet":  # its pod templates are core/v1 pod specs
            for role, tmpl in obj["spec"]["leaderWorkerTemplate"].items():
                if role.endswith("Template"):
                    errors.extend(schema_errors(_as_pod(tmpl["metadata"], tmpl["spec"])))
        elif obj["kind"] == "PodCliqueSet":  # so are Grove clique pod specs
            for clique in obj["spec"]["template"]["cliques"]:
                meta = {k: clique[k] for k in ("labels", "annotations") if k in clique}
                errors.extend(
                    f"clique {clique['name']}: {e}"
                    for e in schema_errors(_as_pod(meta, clique["spec"]["podSpec"]))
                )
        elif group not in CUSTOM_GROUPS:
            errors.append(
                f"{obj.get('apiVersion')} {obj.get('kind')}: neither a built-in "
                "kind nor an expected custom resource; add a schema check for it"
            )
    return errors


@pytest.mark.parametrize("path", inputs(), ids=label)
def test_builtin_objects_validate(path: Path, all_objects: dict[str, list[dict[str, Any]]]) -> None:
    objs = all_objects[label(path)]
    assert objs, "nothing rendered"
    errors = all_errors(objs)
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize(
    "path", sorted(p for p in CONFORMANCE.glob("*.yaml") if p.name not in NOT_ON_GROVE), ids=label
)
def test_grove_objects_validate(path: Path) -> None:
    # the Grove path of every example: its Services and every clique's pod spec
    objs = render(path, grove=True, **AS_APPLIED, **GROVE_EXTRA.get(path.name, {}))
    assert any(o["kind"] == "PodCliqueSet" for o in objs)
    errors = all_errors(objs)
    assert not errors, "\n".join(errors)


def test_custom_kinds_are_counted_and_listed(
    all_objects: dict[str, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    counts: Counter[str] = Counter()
    builtin = 0
    for objs in all_objects.values():
        for obj in objs:
            if group_of(obj) in BUILTIN_GROUPS:
                builtin += 1
            else:
                counts[f"{obj['apiVersion']} {obj['kind']}"] += 1
    assert builtin > 100, f"only {builtin} built-in objects checked: did rendering change?"
    assert counts, "no custom objects at all: the source DGDs should be among them"
    unexpected = sorted(
        k for k in counts if k.split(" ")[0].rpartition("/")[0] not in CUSTOM_GROUPS
    )
    assert not unexpected, f"custom kinds of unexpected groups: {unexpected}"
    with capsys.disabled():
        print(
            f"\nschema: {builtin} built-in objects validated against Kubernetes "
            f"{K8S_VERSION}; custom objects not schema-checked:"
        )
        for kind, n in sorted(counts.items()):
            print(f"  {n:4d}  {kind}")


def test_the_check_fails_on_a_bad_deployment(all_objects: dict[str, list[dict[str, Any]]]) -> None:
    deployment = next(o for objs in all_objects.values() for o in objs if o["kind"] == "Deployment")
    assert list(schema_errors(deployment)) == []

    unknown_field = copy.deepcopy(deployment)
    unknown_field["spec"]["template"]["spec"]["containers"][0]["imagePullPolice"] = "Always"
    assert any("imagePullPolice" in e for e in schema_errors(unknown_field))

    wrong_type = copy.deepcopy(deployment)
    wrong_type["spec"]["replicas"] = "two"
    assert list(schema_errors(wrong_type))

    missing = copy.deepcopy(deployment)
    del missing["spec"]["selector"]
    assert list(schema_errors(missing))


def test_the_check_fails_on_an_unknown_builtin_kind() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "Deploymint", "metadata": {"name": "x"}}
    assert any("no schema" in e for e in schema_errors(obj))
