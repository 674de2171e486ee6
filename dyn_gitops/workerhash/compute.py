"""Worker hash v2: the 8 hex characters that name a worker generation, byte-identical to the
operator's (``internal/dynamo/hash.go`` ``ComputeDGDWorkersSpecHash`` and ``worker-hash.md``
at the reference release).

The operator generates the DGD's DynamoComponentDeployments with the placeholder
``worker-hash-placeholder`` as the hash, keeps the worker ones, and hashes, per component
name, ``{labels, annotations, runtimeVersion, spec}`` with ``replicas``, ``minAvailable``,
``scalingAdapter`` and ``runtimeVersionOverride`` cleared from the spec: SHA-256 over Go's
``json.Marshal`` bytes (:mod:`dyn_gitops.gojson`), first 8 hex characters. The runtime
version enters only from 1.5.0 on, so older runtimes keep their hashes.

Same DGD, same names as the operator: a cluster moving between the operator and dyn-gitops
keeps its worker Deployments without a rollout.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .. import gates, keys, kvtransfer, naming
from ..merge import data_copy
from ..models.v1alpha1 import KVTransferPolicy
from ..runtimeversion import RuntimeVersionError, Version, resolve
from .gojson import GoTypeError, encode, string
from .hub import MAIN, HubComponent, HubGraph

Obj = dict[str, Any]
PLACEHOLDER = "worker-hash-placeholder"
_SPEC = "struct:api/v1beta1.DynamoComponentDeploymentSpec"


def _runtime_version(component: Obj) -> Version | None:
    """``runtimeversion.Resolve`` of the main container image or the override (None: does
    not resolve, which the hash leaves out like a version before 1.5.0)."""
    try:
        return resolve(_main_image(component), component.get("runtimeVersionOverride") or "")
    except RuntimeVersionError:
        return None


def _main_image(component: Obj) -> str:
    for c in ((component.get("podTemplate") or {}).get("spec") or {}).get("containers") or []:
        if isinstance(c, dict) and c.get("name") == MAIN:
            return str(c.get("image") or "")
    return ""


def _pod_template(spec: Obj) -> Obj:
    """``ensurePodTemplate``: the template with label and annotation maps."""
    tpl: Obj = spec.setdefault("podTemplate", {})
    meta = tpl.setdefault("metadata", {})
    meta.setdefault("labels", {})
    meta.setdefault("annotations", {})
    return tpl


def _main(tpl: Obj) -> Obj:
    """``ensureMainContainer``: a missing ``main`` is put first."""
    pod = tpl.setdefault("spec", {})
    containers = pod.setdefault("containers", [])
    for c in containers:
        if c.get("name") == MAIN:
            return c  # type: ignore[no-any-return]
    main: Obj = {"name": MAIN}
    containers.insert(0, main)
    return main


def _sorted_env_merge(common: list[Obj], specific: list[Obj]) -> list[Obj]:
    """``MergeEnvs``: by name, the specific side winning, sorted by name."""
    merged = {e.get("name"): e for e in common}
    merged.update({e.get("name"): e for e in specific})
    return [merged[n] for n in sorted(merged, key=lambda n: str(n))]


def _dynamo_namespace(g: HubGraph, c: HubComponent) -> str:
    return naming.dynamo_namespace(bool(c.spec.get("globalDynamoNamespace")), g.namespace, g.name)


def backend_framework(g: HubGraph) -> str | None:
    """``backendFrameworkForGeneratedDCDs``: the DGD's, else the one the workers' main
    containers run (``python -m dynamo.<backend>``)."""
    if g.spec.get("backendFramework"):
        return str(g.spec["backendFramework"])
    for c in g.components:
        if naming.is_worker(c.type):
            main = next(
                (
                    x
                    for x in ((c.spec.get("podTemplate") or {}).get("spec") or {}).get("containers")
                    or []
                    if isinstance(x, dict) and x.get("name") == MAIN
                ),
                {},
            )
            found = naming.backends_in_command(main)
            if len(found) == 1:
                return found.pop()
    return None


def _worker_dcd(
    g: HubGraph, c: HubComponent, has_epp: bool, backend: str | None
) -> tuple[Obj, Obj, Obj]:
    """(DCD labels, DCD annotations, DCD spec) as ``generateSingleDCD`` makes them."""
    spec: Obj = data_copy(c.spec)
    if backend:
        spec["backendFramework"] = backend
    tpl_labels = ((spec.get("podTemplate") or {}).get("metadata") or {}).get("labels") or {}
    labels: Obj = dict(tpl_labels)
    labels[keys.LABEL_COMPONENT] = c.name
    labels[keys.LABEL_DYNAMO_NAMESPACE] = _dynamo_namespace(g, c)
    labels[keys.LABEL_GRAPH_NAME] = g.name
    labels[keys.LABEL_WORKER_HASH] = PLACEHOLDER
    tpl = _pod_template(spec)
    tpl["metadata"]["labels"][keys.LABEL_WORKER_HASH] = PLACEHOLDER
    if has_epp:
        labels[keys.LABEL_COMPONENT_CLASS] = naming.WORKER
        tpl["metadata"]["labels"][keys.LABEL_COMPONENT_CLASS] = naming.WORKER
    # applyDGDTemplateDefaults
    if g.spec.get("env"):
        main = _main(tpl)
        main["env"] = _sorted_env_merge(g.spec["env"], main.get("env") or [])
    dcd_annotations: Obj = {}
    kvt = (g.spec.get("experimental") or {}).get("kvTransferPolicy")
    if kvt and (kvt.get("labelKey") or kvt.get("clusterTopologyName")):
        # applyKvTransferPolicyToWorkerComponent: the policy env, volume and mount, baked into
        # the worker DCD (no Grove topology domains on the DCD path)
        policy = KVTransferPolicy.model_validate(kvt)
        main = _main(tpl)
        kept = [e for e in main.get("env") or [] if e.get("name") not in kvtransfer.POLICY_ENV]
        main["env"] = _sorted_env_merge(kept, kvtransfer.worker_env(policy))
        main["volumeMounts"] = kvtransfer.with_mount(main.get("volumeMounts") or [])
        pod = tpl.setdefault("spec", {})
        pod["volumes"] = kvtransfer.with_volume(
            pod.get("volumes") or [], kvtransfer.volume(policy, ())
        )
        dcd_annotations = kvtransfer.source_annotations({}, policy, c.type)
    # propagateDGDSpecMetadata, then propagateDGDAnnotations (1.5, #14855): the v1alpha1
    # service's metadata over the graph's, under the pod template's; then the DGD's own
    tpl_ann = tpl["metadata"]["annotations"]
    for key, value in {**(g.spec.get("annotations") or {}), **c.alpha_annotations}.items():
        tpl_ann.setdefault(key, value)
    for key, value in {**(g.spec.get("labels") or {}), **c.alpha_labels}.items():
        tpl["metadata"]["labels"].setdefault(key, value)
    for key in keys.PROPAGATED_DGD_ANNOTATIONS:
        if key in g.annotations and key not in tpl_ann:
            tpl_ann[key] = g.annotations[key]
    return labels, dcd_annotations, spec


def _kube_labels(c: HubComponent, dcd_labels: Obj, spec: Obj, dyn_ns: str) -> Obj:
    """``GetDCDKubeLabels``."""
    out: Obj = dict(dcd_labels)
    out.update(c.alpha_labels)
    out.update(((spec.get("podTemplate") or {}).get("metadata") or {}).get("labels") or {})
    model = (spec.get("modelRef") or {}).get("name")
    if model:
        out[keys.LABEL_BASE_MODEL_HASH] = naming.model_hash(model)
    if c.sub_component_type:
        out[keys.LABEL_SUB_COMPONENT_TYPE] = c.sub_component_type
    out[keys.LABEL_COMPONENT] = c.name
    out[keys.LABEL_DYNAMO_NAMESPACE] = c.dynamo_namespace or dcd_labels.get(
        keys.LABEL_DYNAMO_NAMESPACE, dyn_ns
    )
    for key in (
        keys.LABEL_COMPONENT,
        keys.LABEL_DYNAMO_NAMESPACE,
        keys.LABEL_GRAPH_NAME,
        keys.LABEL_WORKER_HASH,
        keys.LABEL_COMPONENT_CLASS,
    ):
        if dcd_labels.get(key):
            out[key] = dcd_labels[key]
    return out


def _kube_annotations(c: HubComponent, dcd_annotations: Obj, spec: Obj) -> Obj:
    """``GetDCDKubeAnnotations``."""
    out: Obj = dict(c.alpha_annotations)
    out.update(((spec.get("podTemplate") or {}).get("metadata") or {}).get("annotations") or {})
    model = (spec.get("modelRef") or {}).get("name")
    if model:
        out[keys.ANN_BASE_MODEL] = model
    out.pop(keys.ANN_OPERATOR_ORIGIN_VERSION, None)
    for key in keys.TOPOLOGY_SOURCE_ANNOTATIONS:
        out.pop(key, None)
        if dcd_annotations.get(key):
            out[key] = dcd_annotations[key]
    return out


def hash_input(g: HubGraph) -> str:
    """The exact bytes (as text) the operator hashes (``{}`` without workers)."""
    has_epp = any(c.type == naming.EPP for c in g.components)
    backend = backend_framework(g)
    parts: dict[str, str] = {}
    for c in g.components:
        if not naming.is_worker(c.type):
            continue
        labels, annotations, spec = _worker_dcd(g, c, has_epp, backend)
        kube_labels = _kube_labels(c, labels, spec, labels[keys.LABEL_DYNAMO_NAMESPACE])
        kube_annotations = _kube_annotations(c, annotations, spec)
        version = _runtime_version(spec)
        for cleared in ("replicas", "minAvailable", "scalingAdapter", "runtimeVersionOverride"):
            spec.pop(cleared, None)
        fields = []
        if kube_labels:
            fields.append(f'"labels":{encode("map:string", kube_labels)}')
        if kube_annotations:
            fields.append(f'"annotations":{encode("map:string", kube_annotations)}')
        if version is not None and version >= gates.MIN_HASHED_RUNTIME:
            fields.append(f'"runtimeVersion":{string(str(version))}')
        try:
            fields.append(f'"spec":{encode(_SPEC, spec)}')
        except GoTypeError as exc:  # where, in the component as the operator holds it
            raise GoTypeError(exc.reason, ("components", c.name, *exc.path)) from None
        parts[c.name] = "{" + ",".join(fields) + "}"
    return "{" + ",".join(f"{string(n)}:{parts[n]}" for n in sorted(parts)) + "}"


def worker_hash(g: HubGraph) -> str:
    return hashlib.sha256(hash_input(g).encode()).hexdigest()[:8]
