"""The rules of the validate stage: the Dynamo admission webhook's stateless rules
(``spec/dynamo-runtime.md`` 7.1), the name checks that the expansion needs (derived names
must be valid Kubernetes names), the runner's limits, the shape every object must have, and
what renders but is reported as a warning.

The Dynamo 1.5 webhooks validate a DGD in ``nvidia.com/v1beta1`` (the hub and storage
version; ``internal/webhook/validation/shared_v1beta1.go`` @ 2a6da14c8), and so do these
rules: they read the DGD's one typed form, :class:`.hubform.Graph` (v1beta1, whichever
version it is written in: a v1alpha1 DGD converted **up** as the operator's conversion
does). What a v1alpha1 DGD says that v1beta1 has no field for (a
service's ``ingress``, ``annotations``, ``autoscaling``, the graph's ``pvcs``, ...) is
checked on the v1alpha1 document as written (:func:`alpha_checks`): the API server checks
it against the served v1alpha1 schema, the conversion keeps it aside.

Each rule yields a :class:`~dyn_gitops.errors.Problem` whose path is that of the field in
the form (:meth:`.hubform.Graph.written_path` maps it to the field the user wrote, as it
does the expansion's); :func:`alpha_checks` yields v1alpha1 paths as written. Nothing here
raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from . import display, gates, gpus, keys, naming, objpath
from .errors import FieldPath, Problem
from .hubform import Graph, main_index
from .models import v1beta1
from .models.k8s import NamedContainer, ObjectMeta
from .models.v1alpha1 import MODEL_SOURCE_SCHEMES, DynamoGraphDeployment, DynamoModel
from .models.v1alpha1 import GraphSpec as AlphaSpec
from .models.v1beta1 import KVTransferPolicy
from .runtimeversion import (
    RuntimeVersionError,
    Version,
    parse_image_version,
    parse_origin,
    resolve,
)
from .workerhash import hub

#: the CRD's pattern of runtimeVersionOverride (api/v1alpha1 and v1beta1 @ 2a6da14c8)
_RUNTIME_VERSION_OVERRIDE = re.compile(
    r"(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})"
)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_TOPOLOGY_DOMAIN = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_WORKER_HASH_LEN = 9  # "-" + 8 hex
#: a label key (optional DNS-subdomain prefix and "/", then a name of at most 63)
_LABEL_KEY = naming.QUALIFIED_NAME
MAIN = "main"

Component = v1beta1.Component


def main_container(c: Component) -> tuple[int, NamedContainer | None]:
    """The index of the component's container ``main`` and the container (where it would
    be, and None, when it has none)."""
    pod = c.podTemplate.spec if c.podTemplate is not None else None
    containers = (pod.containers if pod is not None else None) or []
    k = main_index(c)
    return k, containers[k] if k < len(containers) else None


def _main_field(loc: FieldPath, c: Component, field: str) -> FieldPath:
    return (*loc, "podTemplate", "spec", "containers", main_container(c)[0], field)


def _gms(c: Component) -> dict[str, Any] | None:
    """``experimental.gpuMemoryService`` (present: enabled)."""
    return c.experimental.gpuMemoryService if c.experimental is not None else None


def _failover(c: Component) -> dict[str, Any] | None:
    return c.experimental.failover if c.experimental is not None else None


def _force_scaling_group(c: Component) -> bool:
    grove = c.experimental.grove if c.experimental is not None else None
    return bool(grove and grove.get("forceScalingGroup") is True)


def _node_count(c: Component) -> int:
    return c.multinode.nodeCount if c.multinode is not None else 1


# --------------------------------------------------------------------------- rules
def validate_graph(g: Graph) -> Iterator[Problem]:
    components = g.components.located()
    ann = g.metadata.annotations or {}

    if not components:
        yield Problem.at(("spec", "components"), "spec.services must have at least one service")
    if len(components) > naming.MAX_SERVICES:
        yield Problem.at(
            ("spec", "components"),
            f"at most {naming.MAX_SERVICES} services are allowed, found {len(components)}",
        )
    yield from _name_checks(g)
    yield from _metadata_checks(g)
    yield from _annotation_checks(ann, ("metadata", "annotations"))
    yield from _restart_checks(g)

    # checked whenever Grove may be used, installed or not (as the webhook does); a long
    # DGD name is cut to fit (PCSNameForDGD), so only a long service name can fail
    grove_possible = ann.get(keys.ANN_ENABLE_GROVE, "").lower() != "false"
    if grove_possible:
        budgets = {
            loc: naming.grove_clique_budget(c.name, _node_count(c) > 1, _force_scaling_group(c))
            for loc, c in components
        }
        pcs = naming.pcs_name(g.metadata.name, list(budgets.values()))
        for loc in budgets:
            if len(pcs) + budgets[loc] > naming.GROVE_NAME_BUDGET:
                yield Problem.at(
                    loc,
                    f"service name too long for Grove: PodCliqueSet {pcs!r} plus the "
                    f"service's scaling-group and clique names is "
                    f"{len(pcs) + budgets[loc]} characters, at most "
                    f"{naming.GROVE_NAME_BUDGET}; shorten it or annotate the DGD "
                    f'{keys.ANN_ENABLE_GROVE}: "false"',
                )

    topo_any = g.spec.topologyConstraint is not None or any(
        c.topologyConstraint is not None for _, c in components
    )
    if topo_any:
        yield from _topology_checks(g)

    exp = g.spec.experimental
    if exp is not None and exp.kvTransferPolicy is not None:
        yield from _kv_transfer_checks(exp.kvTransferPolicy)

    for loc, c in components:
        yield from _service_checks(loc, c)
        yield from _role_checks(loc, c)
    if any(_failover(c) is not None for _, c in components) and (
        ann.get(keys.ANN_KUBE_DISCOVERY_MODE) != "container"
    ):
        yield Problem.at(
            ("metadata", "annotations"),
            f"failover needs the DGD annotation {keys.ANN_KUBE_DISCOVERY_MODE}: container",
        )


def pathway_checks(g: Graph, *, grove_pathway: bool) -> Iterator[Problem]:
    """The 1.5 webhook's rules on the v1beta1 form that depend on the workload provider
    (``validateDynamoComponentDeploymentSharedSpec`` in
    ``internal/webhook/validation/shared_v1beta1.go`` @ 2a6da14c8, #10532): a component's
    ``minAvailable`` only on the Grove pathway (a standalone DCD is never on it)."""
    if grove_pathway:
        return
    for loc, c in g.components.located():
        if c.minAvailable is not None:
            yield Problem.at(
                (*loc, "minAvailable"),
                "is currently supported only for Grove-backed DynamoGraphDeployment "
                f'components (setting grove true and no {keys.ANN_ENABLE_GROVE}: "false"; '
                "a standalone DynamoComponentDeployment never is)",
            )


def _negative_quantity(value: str) -> bool:
    """A Kubernetes quantity below zero (``-0`` is zero)."""
    text = value.strip()
    return text.startswith("-") and any(ch in "123456789" for ch in text)


def alpha_checks(dgd: DynamoGraphDeployment) -> Iterator[Problem]:
    """What a v1alpha1 DGD says that its v1beta1 form has no field for, or cannot say
    wrongly, checked as written (v1alpha1 paths): the graph's ``pvcs``; a service's
    ``replicas`` (v1beta1: at least 0 by its schema), ``ingress``, ``volumeMounts``,
    ``sharedMemory``, ``frontendSidecar``, ``annotations``, an empty
    ``runtimeVersionOverride`` (which the conversion drops) and an empty name."""
    for i, p in enumerate(dgd.spec.pvcs or []):
        if not p.name:
            yield Problem.at(("spec", "pvcs", i, "name"), f"spec.pvcs[{i}].name is required")
        if p.create:
            for field in ("storageClass", "size", "volumeAccessMode"):
                if not getattr(p, field):
                    yield Problem.at(("spec", "pvcs", i, field), "required when create is true")
    for name, svc in sorted((dgd.spec.services or {}).items()):
        loc: FieldPath = ("spec", "services", name)
        if not name:  # no v1beta1 component name (the other names: _name_checks)
            yield Problem.at(loc, _bad_name(name))
        if svc.runtimeVersionOverride == "":
            yield Problem.at((*loc, "runtimeVersionOverride"), _override_message(""))
        if svc.replicas is not None and svc.replicas < 0:
            yield Problem.at((*loc, "replicas"), f"must be >= 0, found {svc.replicas}")
        if svc.ingress is not None and svc.ingress.enabled and not svc.ingress.host:
            yield Problem.at(
                (*loc, "ingress", "host"), "ingress.host is required when ingress is enabled"
            )
        for i, vm in enumerate(svc.volumeMounts or []):
            if not vm.name:
                yield Problem.at((*loc, "volumeMounts", i, "name"), "name is required")
            if not vm.mountPoint and not vm.useAsCompilationCache:
                yield Problem.at(
                    (*loc, "volumeMounts", i, "mountPoint"),
                    "mountPoint is required unless useAsCompilationCache is true",
                )
        shm = svc.sharedMemory
        if shm is not None:
            if shm.disabled and shm.size:
                yield Problem.at((*loc, "sharedMemory"), "size cannot be set when disabled is true")
            if not shm.disabled and not shm.size:
                yield Problem.at(
                    (*loc, "sharedMemory", "size"), "size is required unless disabled is true"
                )
        eps = svc.extraPodSpec
        if svc.frontendSidecar is not None and eps is not None:
            for i, ctr in enumerate(eps.containers or []):
                if ctr.name == hub.FRONTEND_SIDECAR:
                    yield Problem.at(
                        (*loc, "extraPodSpec", "containers", i, "name"),
                        "a container named sidecar-frontend already exists; frontendSidecar "
                        "adds it",
                    )
        yield from _annotation_checks(
            svc.annotations or {}, (*loc, "annotations"), service_level=True
        )
    for path, why in preserved_problems(dgd.spec):
        yield Problem.at(("spec", *path), why)


def beta_checks(dgd: v1beta1.DynamoGraphDeployment) -> Iterator[Problem]:
    """What a DGD written in ``nvidia.com/v1beta1`` may not say, before its other rules
    (v1beta1 paths; a v1alpha1 DGD's v1beta1 form never says it):

    * two component names equal case-insensitively: their objects would share a name
      (the CRD's list map refuses only an exact duplicate);
    * ``extraPodSpecMergeStrategy: strategic``: not yet supported;
    * ``experimental.grove`` keys other than a boolean ``forceScalingGroup`` (``GroveSpec``,
      ``api/v1beta1/common.go`` @ 2a6da14c8, has no other field);
    * a ``frontendSidecar`` naming no podTemplate container (``shared_v1beta1.go`` @
      2a6da14c8), or naming one without an image (its pod would be refused), or with fields
      other than ``image``, ``args``, ``env`` and ``envFrom`` (the operator merges the whole
      container over the frontend's defaults, ``mergeFrontendSidecarDefaults``,
      ``internal/dynamo/graph.go`` @ 2a6da14c8; only those fields are ported). Its
      ``envFrom`` is rendered as written, whatever it holds (a v1alpha1 DGD can say only one
      ``secretRef``: emitting such a DGD in v1alpha1 is refused).
    """
    seen: dict[str, int] = {}
    for i, c in enumerate(dgd.spec.components or []):
        loc: FieldPath = ("spec", "components", i)
        if c.name.lower() in seen:
            yield Problem.at(
                (*loc, "name"),
                f"component name {c.name!r} is also used by spec.components"
                f"[{seen[c.name.lower()]}] (names are unique case-insensitively)",
            )
            continue
        seen[c.name.lower()] = i
        found = list(_beta_component_checks(loc, c))
        yield from found if found else _beta_sidecar_checks(loc, c)


def kept_alpha_checks(meta: ObjectMeta) -> Iterator[Problem]:
    """The ``nvidia.com/dgd-spec`` annotation of a v1beta1 DGD (``kubectl get`` from an
    operator cluster, or a v1alpha1 DGD as emitted): the sparse v1alpha1 spec the
    operator's conversion keeps there, read for what v1beta1 cannot hold
    (:func:`.dgdspec.read`, whose own problems :func:`.hubform.of_v1beta1` reports):
    :func:`preserved_problems`, at the annotation, the path inside the payload first."""
    if keys.ANN_DGD_SPEC not in (meta.annotations or {}):
        return
    from .models import dgdspec  # its models cost start-up: imported for a payload only

    kept = dgdspec.read(meta.annotations)  # memoized: the hub form's read (its problems there)
    if kept.spec is not None:
        for path, why in preserved_problems(kept.spec):
            yield dgdspec.problem(("spec", *path), why)


def preserved_problems(spec: AlphaSpec) -> Iterator[tuple[FieldPath, str]]:
    """What the API server would refuse once the fields a v1alpha1 spec keeps beside its
    v1beta1 form are rendered (paths from the spec; nothing quoted): the labels and
    annotations of a service and its ingress, ``dynamoNamespace`` and
    ``subComponentType`` (label values of its pods), a PVC's name (a volume name). For the
    payload and for a v1alpha1 DGD as written alike."""
    for i, pvc in enumerate(spec.pvcs or []):
        if pvc.name and objpath.dns_label(pvc.name):
            yield ("pvcs", i, "name"), _NOT_A_DNS_LABEL
    for name, svc in (spec.services or {}).items():
        loc: FieldPath = ("services", name)
        for path, why in objpath.metadata_problems(svc.labels, svc.annotations):
            yield (*loc, *path), why
        for field, value in (
            ("dynamoNamespace", svc.dynamoNamespace),
            ("subComponentType", svc.subComponentType),
        ):
            bad = objpath.label_value_problem(value) if value else None
            if bad:
                yield (*loc, field), f"becomes a label value of its pods: {bad}"
        ingress = svc.ingress
        if ingress is not None:
            for path, why in objpath.metadata_problems(ingress.labels, ingress.annotations):
                yield (*loc, "ingress", *path), why


_NOT_A_DNS_LABEL = (
    f"not a DNS-1123 label (a volume name): at most {objpath.LABEL_MAX} lower-case letters, "
    "digits and '-', starting and ending with a letter or digit"
)


def _beta_component_checks(loc: FieldPath, c: Component) -> Iterator[Problem]:
    if c.extraPodSpecMergeStrategy == "strategic":
        yield Problem.at(
            (*loc, "extraPodSpecMergeStrategy"),
            "the strategic extraPodSpec merge is not yet supported",
        )
    grove = c.experimental.grove if c.experimental is not None else None
    if grove is None:
        return
    unknown = sorted(set(grove) - {"forceScalingGroup"})
    if unknown:
        yield Problem.at(
            (*loc, "experimental", "grove", unknown[0]),
            "only experimental.grove.forceScalingGroup is supported",
        )
    elif not isinstance(grove.get("forceScalingGroup", False), bool):
        yield Problem.at(
            (*loc, "experimental", "grove", "forceScalingGroup"), "must be true or false"
        )


def _beta_sidecar_checks(loc: FieldPath, c: Component) -> Iterator[Problem]:
    """The first problem of the container ``c.frontendSidecar`` names."""
    if not c.frontendSidecar:
        return
    pod = c.podTemplate.spec if c.podTemplate is not None else None
    containers = (pod.containers if pod is not None else None) or []
    k = next(
        (k for k, x in enumerate(containers) if x.name == c.frontendSidecar and x.name != MAIN),
        None,
    )
    if k is None:
        yield Problem.at(
            (*loc, "frontendSidecar"),
            f"no podTemplate container is named {c.frontendSidecar!r}",
        )
        return
    where: FieldPath = (*loc, "podTemplate", "spec", "containers", k)
    container = containers[k].model_dump(exclude_none=True)
    extra = sorted(set(container) - {"name", "image", "args", "env", "envFrom"})
    if extra:
        yield Problem.at(
            where,
            f"a frontendSidecar container with {', '.join(extra)} is not yet supported "
            "(only image, args, env and envFrom)",
        )
    elif not container.get("image"):
        yield Problem.at(where, "the frontendSidecar container needs an image")


def limit_checks(g: Graph, *, max_replicas: int, max_node_count: int) -> Iterator[Problem]:
    """The runner's ceilings (settings max-replicas, max-node-count), checked before anything
    is expanded: pod addresses are written per node (a replica count costs nothing to expand
    since one LeaderWorkerSet scales natively, #9612, but stays a bound on what is asked);
    ``minAvailable`` (a count of replicas, Grove's int32) is bounded like ``replicas``; the
    legacy ``DYN_DEPLOYMENT_CONFIG`` workers by ``legacyconfig.checks``."""
    for loc, c in g.components.located():
        for field, value in (("replicas", c.replicas), ("minAvailable", c.minAvailable)):
            if value is not None and value > max_replicas:
                yield Problem.at(
                    (*loc, field),
                    f"{value} is more than the {max_replicas} replicas "
                    "allowed (setting max-replicas)",
                )
        nodes = c.multinode.nodeCount if c.multinode is not None else None
        if nodes is not None and nodes > max_node_count:
            yield Problem.at(
                (*loc, "multinode", "nodeCount"),
                f"{nodes} is more than the {max_node_count} nodes allowed (setting max-node-count)",
            )


def alpha_limit_checks(dgd: DynamoGraphDeployment, *, max_replicas: int) -> Iterator[Problem]:
    """The runner's replica ceiling on a v1alpha1 service's ``autoscaling`` (no v1beta1
    field)."""
    for name, svc in sorted((dgd.spec.services or {}).items()):
        if not isinstance(svc.autoscaling, dict):
            continue
        for key in ("minReplicas", "maxReplicas"):
            value = svc.autoscaling.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > max_replicas:
                yield Problem.at(
                    ("spec", "services", name, "autoscaling", key),
                    f"{value} is more than the {max_replicas} replicas "
                    "allowed (setting max-replicas)",
                )


def _bad_name(name: str) -> str:
    return (
        f"service name {name!r} does not make a valid Kubernetes name (letters, digits, '-' "
        "and '.')"
    )


def _name_checks(g: Graph) -> Iterator[Problem]:
    name = g.metadata.name
    if not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
        yield Problem.at(
            ("metadata", "name"), f"must be a lowercase DNS-1123 subdomain, found {name!r}"
        )
        return
    seen: dict[str, str] = {}
    for loc, c in sorted(g.components.located(), key=lambda lc: lc[1].name):
        svc_name = c.name
        lower = svc_name.lower()
        if lower in seen:
            yield Problem.at(
                loc,
                f"service names {seen[lower]!r} and {svc_name!r} collide: "
                f"both become {naming.base_name(name, svc_name)!r}",
            )
            continue
        seen[lower] = svc_name
        if not _DNS_SUBDOMAIN.match(lower):
            yield Problem.at(loc, _bad_name(svc_name))
            continue
        worker = naming.is_worker(c.type)
        service_name = naming.normalize(naming.base_name(name, svc_name))
        if worker:
            service_name += "-" + "0" * (_WORKER_HASH_LEN - 1)
        if len(service_name) > 63:
            yield Problem.at(
                loc,
                f"the component Service name would be {len(service_name)} characters "
                f"('{naming.base_name(name, svc_name)}"
                f"{'-<hash8>' if worker else ''}'), "
                "over the 63-character limit; shorten the DGD or service name",
            )


def _metadata_checks(g: Graph) -> Iterator[Problem]:
    """The labels and annotations the DGD gives its children (the graph's, each pod
    template's): what the API server would refuse on them
    (:func:`.objpath.metadata_problems`; the DGD's own metadata: :func:`object_shape`)."""
    sources: list[tuple[FieldPath, Any, Any]] = [(("spec",), g.spec.labels, g.spec.annotations)]
    for loc, c in g.components.located():
        meta = c.podTemplate.metadata if c.podTemplate is not None else None
        if meta is not None:
            sources.append(((*loc, "podTemplate", "metadata"), meta.labels, meta.annotations))
    for where, labels, notes in sources:
        for path, why in objpath.metadata_problems(labels, notes):
            yield Problem.at((*where, *path), why)


def _annotation_checks(
    ann: dict[str, str], loc: FieldPath, service_level: bool = False
) -> Iterator[Problem]:
    v = ann.get(keys.ANN_OPERATOR_ORIGIN_VERSION)
    if v is not None and not service_level and parse_origin(v) is None:
        yield Problem.at(
            (*loc, keys.ANN_OPERATOR_ORIGIN_VERSION),
            "must be a semantic version such as 1.5.1, found "
            + display.describe(v, sensitive=False),
        )
    v = ann.get(keys.ANN_VLLM_EXECUTOR_BACKEND)
    if v is not None and v.lower() not in ("mp", "ray"):
        yield Problem.at(
            (*loc, keys.ANN_VLLM_EXECUTOR_BACKEND), f"must be 'mp' or 'ray', found {v!r}"
        )
    v = ann.get(keys.ANN_KUBE_DISCOVERY_MODE)
    if v is not None and not service_level and v not in ("pod", "container"):
        yield Problem.at(
            (*loc, keys.ANN_KUBE_DISCOVERY_MODE), f"must be 'pod' or 'container', found {v!r}"
        )
    v = ann.get(keys.ANN_DISCOVERY_BACKEND)
    if v and v not in ("kubernetes", "etcd"):  # empty means unset, as for the operator
        yield Problem.at(
            (*loc, keys.ANN_DISCOVERY_BACKEND), f"must be 'kubernetes' or 'etcd', found {v!r}"
        )
    v = ann.get(keys.ANN_WORKLOAD_PROVIDER)
    if v is not None and not service_level and v not in keys.WORKLOAD_PROVIDERS:
        yield Problem.at(
            (*loc, keys.ANN_WORKLOAD_PROVIDER),
            f"must be {' or '.join(map(repr, keys.WORKLOAD_PROVIDERS))}, found {v!r}",
        )
    v = ann.get(keys.ANN_GROVE_UPDATE_STRATEGY)
    if v is not None and not service_level and v not in naming.GROVE_UPDATE_STRATEGIES:
        yield Problem.at(
            (*loc, keys.ANN_GROVE_UPDATE_STRATEGY),
            f"must be one of {', '.join(naming.GROVE_UPDATE_STRATEGIES)}, found {v!r}",
        )


def _restart_checks(g: Graph) -> Iterator[Problem]:
    restart = g.spec.restart
    if restart is None:
        return
    loc = ("spec", "restart")
    if not restart.id:
        yield Problem.at((*loc, "id"), "spec.restart.id is required")
    strategy = restart.strategy
    if strategy is None or strategy.order is None:
        return
    order = strategy.order
    if strategy.type == "Parallel":
        yield Problem.at(
            (*loc, "strategy", "order"), "order is not allowed with the Parallel strategy"
        )
        return
    names = {c.name for _, c in g.components.located()}
    if len(set(order)) != len(order):
        yield Problem.at((*loc, "strategy", "order"), "order must not repeat a service")
    for i, s in enumerate(order):
        if s not in names:
            yield Problem.at((*loc, "strategy", "order", i), f"contains unknown service: {s}")
    if len(set(order)) != len(names):
        yield Problem.at(
            (*loc, "strategy", "order"),
            f"must list every service once ({len(names)} services, {len(set(order))} listed)",
        )


def _kv_transfer_checks(kvt: KVTransferPolicy) -> Iterator[Problem]:
    """The CRD's rules for ``spec.experimental.kvTransferPolicy`` (``KvTransferPolicy`` in
    ``api/v1beta1/common.go`` @ 2a6da14c8, #9768/#10041)."""
    where: FieldPath = ("spec", "experimental", "kvTransferPolicy")
    if bool(kvt.labelKey) == bool(kvt.clusterTopologyName):
        yield Problem.at(where, "exactly one of labelKey or clusterTopologyName is required")
    if not kvt.domain:
        yield Problem.at((*where, "domain"), "domain is required")
    elif not _TOPOLOGY_DOMAIN.match(kvt.domain):
        yield Problem.at(
            (*where, "domain"), f"must match {_TOPOLOGY_DOMAIN.pattern}, found {kvt.domain!r}"
        )
    if kvt.labelKey and not _LABEL_KEY.match(kvt.labelKey):
        yield Problem.at((*where, "labelKey"), f"not a label key: {kvt.labelKey!r}")
    if kvt.enforcement == "preferred" and kvt.preferredWeight is None:
        yield Problem.at(
            (*where, "preferredWeight"), "preferredWeight is required when enforcement is preferred"
        )
    if kvt.preferredWeight is not None:
        if kvt.enforcement != "preferred":
            yield Problem.at(
                (*where, "preferredWeight"),
                "preferredWeight may only be set when enforcement is preferred",
            )
        elif not 0 <= kvt.preferredWeight <= 1:
            yield Problem.at(
                (*where, "preferredWeight"), f"must be from 0 to 1, found {kvt.preferredWeight}"
            )


_ROLES = ("leader", "worker")


def _role_checks(where: FieldPath, c: Component) -> Iterator[Problem]:
    """``validateComponentRoles`` (#14419, v1.5.0): explicit roles only on a multinode
    component, exactly ``leader`` and ``worker``, their cardinality that of nodeCount, no
    role-specific pod template yet."""
    roles = c.roles
    if roles is None:
        return
    loc = (*where, "roles")
    if c.multinode is None:
        yield Problem.at(
            loc,
            "roles are supported only for component shapes that define a role schema; this "
            "release supports multinode components",
        )
        return
    seen: set[str] = set()
    for i, role in enumerate(roles):
        if role.name not in _ROLES:
            yield Problem.at(
                (*loc, i, "name"), f"unsupported value {role.name!r}: must be leader or worker"
            )
            continue
        if role.name in seen:
            yield Problem.at((*loc, i, "name"), f"duplicate role {role.name!r}")
        seen.add(role.name)
        want = 1 if role.name == "leader" else c.multinode.nodeCount - 1
        if role.replicas is not None and role.replicas != want:
            yield Problem.at(
                (*loc, i, "replicas"), f"must equal {want} for multinode role {role.name!r}"
            )
        if role.podTemplate is not None:
            yield Problem.at((*loc, i, "podTemplate"), "is not supported for this component role")
    for required in _ROLES:
        if required not in seen:
            yield Problem.at(loc, f"must contain the {required!r} role")


def _topology_checks(g: Graph) -> Iterator[Problem]:
    tc = g.spec.topologyConstraint
    if tc is None or not (tc.topologyProfile or tc.clusterTopologyName):
        yield Problem.at(
            ("spec", "topologyConstraint"),
            "topologyProfile is required when any topology constraint is set",
        )
    components = g.components.located()
    # #12448 (26b83a991, v1.4.0): component-scoped topology needs no deployment pack domain;
    # the webhook wants one only when no component is constrained
    constrained = any(c.topologyConstraint is not None for _, c in components)
    if tc is not None and not tc.packDomain and not constrained:
        yield Problem.at(
            ("spec", "topologyConstraint", "packDomain"),
            "is required when no service has a topologyConstraint",
        )
    for loc, c in components:
        if c.topologyConstraint is not None and not c.topologyConstraint.packDomain:
            yield Problem.at((*loc, "topologyConstraint", "packDomain"), "packDomain is required")
    for where, t in [(("spec", "topologyConstraint"), tc)] + [
        ((*loc, "topologyConstraint"), c.topologyConstraint) for loc, c in components
    ]:
        if t is not None and t.packDomain and not _TOPOLOGY_DOMAIN.match(t.packDomain):
            yield Problem.at(
                (*where, "packDomain"),
                f"must match {_TOPOLOGY_DOMAIN.pattern}, found {t.packDomain!r}",
            )


def _runtime(c: Component) -> Version | None:
    """The component's runtime version, None when it does not resolve."""
    main = main_container(c)[1]
    try:
        return resolve((main.image if main else None) or "", c.runtimeVersionOverride)
    except RuntimeVersionError:
        return None


def _override_message(override: str) -> str:
    return (
        "must be the Dynamo runtime version as MAJOR.MINOR.PATCH, such as 1.5.1 (each part "
        f"at most 4 digits, no leading zero), found {override!r}"
    )


def _gpu_count(c: Component) -> int:
    """Container ``main``'s GPUs, as the 1.5 operator counts them (:func:`.gpus.count`)."""
    main = main_container(c)[1]
    return gpus.count(main.resources if main is not None else None)


def _service_checks(loc: FieldPath, c: Component) -> Iterator[Problem]:
    """A component's own fields, then its EPP contract, its GPU memory service and its
    failover (in that order)."""
    yield from _field_checks(loc, c)
    if c.type == naming.EPP:
        yield from _epp_checks(loc, c)
    yield from _gms_checks(loc, c)
    yield from _failover_checks(loc, c)


def _field_checks(loc: FieldPath, c: Component) -> Iterator[Problem]:
    override = c.runtimeVersionOverride
    if override is not None and not _RUNTIME_VERSION_OVERRIDE.fullmatch(override):
        yield Problem.at((*loc, "runtimeVersionOverride"), _override_message(override))
    if c.minAvailable is not None and c.minAvailable < 0:
        yield Problem.at((*loc, "minAvailable"), f"must be >= 0, found {c.minAvailable}")
    if c.sharedMemorySize == "":
        yield Problem.at((*loc, "sharedMemorySize"), "size is required unless disabled is true")
    elif c.sharedMemorySize is not None and _negative_quantity(c.sharedMemorySize):
        # shared_v1beta1.go @ 2a6da14c8 (SharedMemorySize.Sign() < 0)
        yield Problem.at(
            (*loc, "sharedMemorySize"), f"must be non-negative, found {c.sharedMemorySize!r}"
        )
    if c.frontendSidecar == "":  # shared_v1beta1.go @ 2a6da14c8
        yield Problem.at((*loc, "frontendSidecar"), "must not be empty")
    cp = c.experimental.checkpoint if c.experimental is not None else None
    if cp is not None and cp.get("job") is not None and cp.get("checkpointRef"):
        # CEL on ComponentCheckpointConfig (api/v1beta1/common.go)
        yield Problem.at(
            (*loc, "experimental", "checkpoint", "job"),
            "cannot be set when checkpointRef is specified",
        )


def _epp_checks(loc: FieldPath, c: Component) -> Iterator[Problem]:
    """An EPP component: single-node; 1.5 (#11355): without eppConfig the Rust EPP runs,
    which replicates its state across replicas; the deprecated eppConfig keeps the
    single-replica Go EPP."""
    if c.multinode is not None and c.multinode.nodeCount > 1:
        yield Problem.at((*loc, "multinode"), "an EPP service cannot be multinode")
    cfg = c.eppConfig
    if cfg is not None and c.replicas is not None and c.replicas != 1:
        yield Problem.at(
            (*loc, "replicas"),
            f"an EPP service with eppConfig (the Go EPP) must have exactly 1 replica, "
            f"found {c.replicas}",
        )
    runtime = _runtime(c)
    rust = gates.NATIVE_RUST_EPP.enabled(runtime)
    if rust and cfg is not None:
        # the native Rust EPP takes no config (shared_helpers.go in the 1.5 release, #11355)
        yield Problem.at(
            (*loc, "eppConfig"),
            "must be omitted for native Rust EPP images with runtime version "
            f"{gates.NATIVE_RUST_EPP.min_runtime} or later",
        )
    elif cfg is None:
        if runtime is not None and not rust:
            yield Problem.at(
                (*loc, "eppConfig"),
                "eppConfig is required for an EPP service with a Go EPP image (runtime "
                f"version earlier than {gates.NATIVE_RUST_EPP.min_runtime})",
            )
    elif (cfg.configMapRef is None) == (cfg.config is None):
        yield Problem.at((*loc, "eppConfig"), "set exactly one of configMapRef and config")
    elif cfg.configMapRef is not None and not cfg.configMapRef.name:
        yield Problem.at((*loc, "eppConfig", "configMapRef", "name"), "name is required")


def _gms_checks(loc: FieldPath, c: Component) -> Iterator[Problem]:
    gms = _gms(c)
    if gms is None:
        return
    gms_where = (*loc, "experimental", "gpuMemoryService")
    if not naming.is_worker(c.type):
        yield Problem.at(
            gms_where, "the GPU memory service is only for worker, prefill and decode services"
        )
    if _gpu_count(c) < 1:
        yield Problem.at(
            gms_where,
            "the GPU memory service needs a GPU count >= 1 "
            "(resources.limits.gpu, else resources.requests.gpu)",
        )
    if str(gms.get("mode") or "").lower() == "interpod":
        yield Problem.at((*gms_where, "mode"), "interPod mode is not supported")


def _failover_checks(loc: FieldPath, c: Component) -> Iterator[Problem]:
    fo = _failover(c)
    if fo is None:
        return
    gms = _gms(c)
    fo_where = (*loc, "experimental", "failover")
    fo_mode = str(fo.get("mode") or "intraPod").lower()
    if gms is None:
        yield Problem.at(fo_where, "failover requires gpuMemoryService.enabled")
    elif fo_mode != str(gms.get("mode") or "intraPod").lower():
        yield Problem.at((*fo_where, "mode"), "failover and gpuMemoryService modes must match")
    if fo_mode == "interpod":
        yield Problem.at((*fo_where, "mode"), "interPod mode is not supported")


def runtime_version_admission(g: Graph, *, standalone: bool = False) -> Iterator[Problem]:
    """The Dynamo 1.5 webhook's runtime-version rules (setting runtime-version-admission:
    strict): every component has a main-container image, and one whose tag is no semantic
    version declares its runtime version (``shared_v1alpha1.go`` / ``shared_v1beta1.go`` @
    2a6da14c8, #10494 in the v1.5.0 ledger). A standalone DCD needs no declaration
    (``allowMissingRuntimeVersionOverride``, ``dynamocomponentdeployment.go``) unless it is an
    EPP, whose eppConfig contract needs its version (``toleratesMissingRuntimeVersionOverride``
    in the 1.5 release's ``shared_helpers.go``).

    A DGD or DCD whose origin stamp predates 1.5.0 gets warnings instead of errors: the 1.5
    webhook keeps admitting, on update, an image and override unchanged since before 1.5
    (the old/new ratchet of ``validateDynamoComponentDeploymentSharedSpecUpdate``); a
    stateless render cannot compare, the stamp written in Git stands for the old object."""
    ann = g.metadata.annotations or {}
    origin = ann.get(keys.ANN_OPERATOR_ORIGIN_VERSION, "")
    legacy = gates.predates(ann, gates.RUNTIME_VERSION_ADMISSION)
    for loc, c in g.components.located():
        tolerated = standalone and c.type != naming.EPP
        for where, why in _admission_gaps(c, tolerate_override=tolerated):
            field_path = _main_field(loc, c, "image") if where == "image" else (*loc, where)
            if legacy:
                yield Problem.at(
                    field_path, _admitted_legacy(why, where, origin), severity="warning"
                )
            else:
                yield Problem.at(field_path, _refused(why, where))


def _admission_gaps(c: Component, *, tolerate_override: bool) -> Iterator[tuple[str, str]]:
    """What the 1.5 admission misses on a component: (the field, why)."""
    main = main_container(c)[1]
    image = (main.image if main else None) or ""
    if not image:
        yield "image", "no main-container image"
    elif not c.runtimeVersionOverride and not tolerate_override:
        try:
            parse_image_version(image)
        except RuntimeVersionError as exc:
            yield (
                "runtimeVersionOverride",
                f"the main container image has no semantic-version tag ({exc})",
            )


#: how a user admits what the 1.5 admission refuses (named in its messages)
_ESCAPES = (
    "setting runtime-version-admission: lenient, or an annotation "
    f"{keys.ANN_OPERATOR_ORIGIN_VERSION} older than {gates.RUNTIME_VERSION_ADMISSION} on an "
    "object created before 1.5,"
)


def _refused(why: str, where: str) -> str:
    if where == "image":
        return (
            "is required: Dynamo 1.5 admission needs a main-container image on every "
            f"component ({_ESCAPES} accepts one without, as created before 1.5)"
        )
    return (
        f"is required when {why}: set it to the Dynamo runtime version of the image, such "
        f'as "1.5.1" (Dynamo 1.5 admission; {_ESCAPES} renders it with the legacy profile, '
        "every runtime gate off)"
    )


def _admitted_legacy(why: str, where: str, origin: str) -> str:
    refused = "; the API server refuses a workload without one" if where == "image" else ""
    return (
        f"{why}: admitted because {keys.ANN_OPERATOR_ORIGIN_VERSION} is "
        f"{display.describe(origin, sensitive=False)}, older than "
        f"{gates.RUNTIME_VERSION_ADMISSION}: the Dynamo 1.5 webhook keeps admitting it only "
        "while the image and runtimeVersionOverride stay as they were before 1.5; rendered "
        f"with the legacy profile, every runtime gate off{refused}"
    )


def workload_provider_checks(meta: ObjectMeta, grove_enabled: bool) -> Iterator[Problem]:
    """``nvidia.com/workload-provider`` written in Git must be the provider the DGD renders
    with: the 1.5 webhook writes that one on create and refuses any change later, and the
    operator never falls back from Grove to components (#12942, 73a3fd26f)."""
    ann = meta.annotations or {}
    written = ann.get(keys.ANN_WORKLOAD_PROVIDER)
    rendered = naming.workload_provider(ann, grove_enabled)
    if written not in keys.WORKLOAD_PROVIDERS or written == rendered:
        return  # absent (stamped), or not a provider (refused by _annotation_checks)
    if written == keys.WORKLOAD_PROVIDER_GROVE:
        why = (
            f'the DGD opts out with {keys.ANN_ENABLE_GROVE}: "false"'
            if grove_enabled
            else "the setting grove is false"
        )
        fix = "remove the annotation or render with Grove"
    else:
        why = "Grove is enabled (setting grove) and the DGD does not opt out"
        fix = f'annotate {keys.ANN_ENABLE_GROVE}: "false" or remove the annotation'
    yield Problem.at(
        ("metadata", "annotations", keys.ANN_WORKLOAD_PROVIDER),
        f"says {written!r} but the DGD renders with the {rendered!r} provider ({why}); the "
        f"operator keeps the provider a DGD was created with and refuses to change it: {fix}",
    )


def warn_graph(g: Graph, *, image_required: bool = False) -> Iterator[Problem]:
    """What renders (the operator would create it too) but the API server will refuse or
    the workload cannot run, or what the operator silently reads otherwise than written:
    reported as warnings, output unchanged (``image_required``: a missing image is an error
    already)."""
    yield from _deployment_strategy_warnings(("spec", "annotations"), g.spec.annotations)
    for loc, c in g.components.located():
        main = main_container(c)[1]
        if (main is None or not main.image) and not image_required:
            yield Problem.at(
                _main_field(loc, c, "image"),
                "no image: the operator has no default image, and the API server "
                "refuses a workload whose main container has none",
                severity="warning",
            )
        meta = c.podTemplate.metadata if c.podTemplate is not None else None
        yield from _deployment_strategy_warnings(
            (*loc, "podTemplate", "metadata", "annotations"), meta.annotations if meta else None
        )


def alpha_warnings(dgd: DynamoGraphDeployment) -> Iterator[Problem]:
    """:func:`warn_graph` for a v1alpha1 service's own ``annotations`` (no v1beta1 field)."""
    for name, svc in sorted((dgd.spec.services or {}).items()):
        yield from _deployment_strategy_warnings(
            ("spec", "services", name, "annotations"), svc.annotations
        )


def _deployment_strategy_warnings(
    loc: FieldPath, annotations: dict[str, str] | None
) -> Iterator[Problem]:
    """``nvidia.com/deployment-strategy`` other than exactly ``Recreate`` is a rolling update
    to the operator (``deployment_strategy.go`` @ 2a6da14c8, #11909): likely a typo."""
    value = (annotations or {}).get(keys.ANN_DEPLOYMENT_STRATEGY)
    if value is not None and value != keys.DEPLOYMENT_STRATEGY_RECREATE:
        yield Problem.at(
            (*loc, keys.ANN_DEPLOYMENT_STRATEGY),
            f"{value!r} is not {keys.DEPLOYMENT_STRATEGY_RECREATE!r}: the operator rolls the "
            "component's pods (RollingUpdate); only the exact value Recreate stops the old "
            "ones first",
            severity="warning",
        )


def object_shape(data: dict[str, Any]) -> Iterator[Problem]:
    """What every object must be shaped like before anything reads it (pass-through ones
    included): apiVersion and kind strings, metadata a mapping whose name and namespace are
    strings and whose labels and annotations map strings to strings."""
    for key in ("apiVersion", "kind"):
        if not isinstance(data.get(key), str):
            yield Problem.at((key,), "expected a string")
    meta = data.get("metadata")
    if meta is None:
        return
    if not isinstance(meta, dict):
        yield Problem.at(("metadata",), "expected a mapping")
        return
    for key in ("name", "namespace", "generateName"):
        if key in meta and not isinstance(meta[key], str):
            yield Problem.at(("metadata", key), "expected a string")
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            yield Problem.at(("metadata", key), "expected a mapping of strings to strings")
            continue
        for k, v in value.items():
            if not isinstance(v, str):
                yield Problem.at(("metadata", key, k), "expected a string: quote it")
    for path, why in objpath.metadata_problems(meta.get("labels"), meta.get("annotations")):
        yield Problem.at(("metadata", *path), why)


#: Dynamo kinds that dyn-gitops refuses on purpose: kind -> what happens to one in a cluster
#: managed by dyn-gitops, and the GitOps workflow to use instead (docs/reference-behaviour.md,
#: "Dynamo kinds not rendered")
REFUSED_KINDS = {
    "DynamoCheckpoint": (
        "DynamoCheckpoint was removed in Dynamo 1.5 (#14076): a checkpoint is a PodSnapshot "
        "of the standalone Snapshot operator, named by a service's checkpoint.checkpointRef; "
        "no CRD serves this kind, so applying it would fail. Remove it from Git (restore from "
        "a checkpoint is not rendered either: the pods start cold)"
    ),
    "DynamoGraphDeploymentRequest": (
        "a DynamoGraphDeploymentRequest asks the Dynamo operator to profile a model and then "
        "create a DynamoGraphDeployment in the cluster: in a cluster managed by dyn-gitops "
        "nothing profiles it, and the graph it would create would not be in Git. Not "
        "rendered: profile with a DGDR elsewhere (a scratch namespace or cluster with the "
        "Dynamo operator, autoApply: false), take the DGD it proposes (its status), commit "
        "that DGD here and render it"
    ),
    "DynamoComponent": (
        "DynamoComponent is a kind of the old Dynamo API (an image-build request of the early "
        "operator) that the Dynamo 1.5 operator does not serve, so applying it would fail. "
        "Not rendered: describe the service in a DynamoGraphDeployment (spec.services, with "
        "its image in extraPodSpec.mainContainer.image) and commit that"
    ),
}


#: what a missing DynamoModel field is for (its error says so)
MODEL_FIELD_HINTS = {
    "modelName": "the name the adapter is served under (the lora_name of the load call)",
    "baseModelName": (
        "the base model whose workers serve it: the modelRef.name of a DynamoGraphDeployment "
        "component (the workers are found by its hash label)"
    ),
    "uri": "where the adapter is loaded from: s3://bucket/path or hf://org/model@revision",
}


def validate_model(model: DynamoModel) -> Iterator[Problem]:
    """The DynamoModel webhook's rules (``validation/dynamomodel.go``): a ``lora`` model
    needs a source whose URI is ``s3://`` or ``hf://``."""
    spec = model.spec
    if spec.modelType != "lora":
        return
    if spec.source is None:
        yield Problem.at(
            ("spec", "source"),
            "a lora DynamoModel needs spec.source.uri (s3://bucket/path or "
            "hf://org/model@revision): the workers load the adapter from there",
        )
    elif not spec.source.uri.startswith(MODEL_SOURCE_SCHEMES):
        yield Problem.at(
            ("spec", "source", "uri"),
            f"source URI must start with s3:// or hf:// (found {spec.source.uri[:80]!r})",
        )


def removed_kind(data: dict[str, Any]) -> Iterator[Problem]:
    """An object of a Dynamo kind dyn-gitops refuses on purpose (:data:`REFUSED_KINDS`):
    no CRD of the target operator serves it, or it asks the in-cluster operator to create
    what would not be in Git."""
    api, kind = str(data.get("apiVersion")), str(data.get("kind"))
    if api.startswith("nvidia.com/") and kind in REFUSED_KINDS:
        yield Problem.at(("kind",), REFUSED_KINDS[kind])
