"""Provider-native overrides (#13273 df7deed0d; role scope moved to ``roles[]`` by #14419,
v1.5.0): sparse Grove fragments at the DGD, component and role level, written into the
rendered PodCliqueSet after everything else (``internal/provideroverride`` and the
admission rules of ``webhook/validation/shared_v1beta1.go`` / ``dynamographdeployment.go``
@ 2a6da14c8).

Grove only, ``apiVersion: grove.io/v1alpha1``, and only the ``topologyConstraint`` subtree:

* ``spec.providerOverride`` -> PodCliqueSet ``spec.template.topologyConstraint``;
* ``components[].providerOverride`` -> its PodCliqueTemplateSpec (one clique) or, for a
  component in a scaling group (multinode or ``forceScalingGroup``), its
  PodCliqueScalingGroupConfig;
* ``components[].roles[name].providerOverride`` -> the ``<component>-ldr`` / ``-wkr``
  PodCliqueTemplateSpec.

Admission resolves an omitted ``target`` from that location and persists it in the stored
DGD; the renderer resolves it the same way (the live DGD then carries a ``target`` Git does
not). A written ``target`` must be the resolved one. Off Grove every override is refused.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .. import naming
from ..errors import FieldPath, Problem, RenderError
from ..models import v1beta1
from ..models.v1beta1 import ProviderOverride
from .components import GraphComponents, force_scaling_group, node_count

Obj = dict[str, Any]

GROVE_API_VERSION = "grove.io/v1alpha1"
PCS = "PodCliqueSet"
CLIQUE = "PodCliqueTemplateSpec"
SCALING_GROUP = "PodCliqueScalingGroupConfig"
LEADER = "leader"
WORKER = "worker"
ROLE_SUFFIX = {LEADER: naming.GROVE_LEADER_SUFFIX, WORKER: naming.GROVE_WORKER_SUFFIX}
TOPOLOGY = "topologyConstraint"
#: fields of Grove's TopologyConstraint this release knows (others stay opaque)
_KNOWN_TOPOLOGY_STRINGS = ("packDomain", "topologyName")
_OWNED = "is Dynamo-owned or not enabled for provider override"


@dataclass(frozen=True)
class Located:
    """One override and where it is written."""

    loc: FieldPath
    override: ProviderOverride
    target: str  # the target its location resolves to
    service: str | None = None  # None: the DGD root
    role: str | None = None


@dataclass(frozen=True)
class Root:
    """What the DGD spec says at graph level: its ``providerOverride``, and whether it sets
    the typed ``topologyConstraint``."""

    override: ProviderOverride | None = None
    typed_topology: bool = False


def _is_multinode(component: v1beta1.Component) -> bool:
    return node_count(component) > 1


def _uses_scaling_group(component: v1beta1.Component) -> bool:
    return _is_multinode(component) or force_scaling_group(component)


def overrides(root: Root, graph: GraphComponents) -> Iterator[Located]:
    """Every override of the DGD (``root``: its graph-level one; ``graph``: its v1beta1
    components) with its location (in the DGD's form) and resolved target."""
    if root.override is not None:
        yield Located(("spec", "providerOverride"), root.override, PCS)
    for component in sorted(graph.components, key=lambda c: c.name):
        name = component.name
        base = graph.path(name)
        if component.providerOverride is not None:
            target = SCALING_GROUP if _uses_scaling_group(component) else CLIQUE
            yield Located((*base, "providerOverride"), component.providerOverride, target, name)
        for i, role in enumerate(component.roles or ()):
            if role.providerOverride is not None and role.name in ROLE_SUFFIX:
                loc = (*base, "roles", i, "providerOverride")
                yield Located(loc, role.providerOverride, CLIQUE, name, role.name)


def _topology_value(target: str, value: Obj) -> tuple[Obj | None, list[tuple[FieldPath, str]]]:
    """(the topologyConstraint the value sets, what is wrong with the value: path in the
    value, message) for the target's ownership policy (``ValidateValue``)."""
    errors: list[tuple[FieldPath, str]] = []
    node: Any = value
    path: FieldPath = ()
    steps = ("spec", "template", TOPOLOGY) if target == PCS else (TOPOLOGY,)
    for step in steps:
        errors += [((*path, k), _OWNED) for k in sorted(node) if k != step]
        if step not in node:
            return None, [*errors, ((*path, step), "is required")]
        node, path = node[step], (*path, step)
        if not isinstance(node, dict):
            return None, [*errors, (path, "must be an object")]
    for key in _KNOWN_TOPOLOGY_STRINGS:
        if key in node and not isinstance(node[key], str):
            errors.append(((*path, key), "must be a string (the Grove schema's type)"))
    return node, errors


def _writes_topology(found: Located) -> bool:
    node: Any = found.override.value
    steps = ("spec", "template", TOPOLOGY) if found.target == PCS else (TOPOLOGY,)
    for step in steps:
        if not isinstance(node, dict) or step not in node:
            return False
        node = node[step]
    return True


def problems(root: Root, graph: GraphComponents, on_grove: bool) -> list[Problem]:
    """What admission refuses in the DGD's overrides, for the graph's workload provider."""
    out: list[Problem] = []
    found = list(overrides(root, graph))
    for f in found:
        if not on_grove:
            out.append(
                Problem.at(
                    f.loc,
                    'provider overrides require the workload provider "grove" (the setting '
                    "grove true and the DGD not opting out); the component provider refuses them",
                )
            )
            continue
        ov = f.override
        if ov.apiVersion != GROVE_API_VERSION:
            out.append(
                Problem.at(
                    (*f.loc, "apiVersion"),
                    f"unsupported value {ov.apiVersion!r}: "
                    f"supported value is {GROVE_API_VERSION!r}",
                )
            )
            continue
        component = graph.get(str(f.service))
        if f.role is not None and not (component is not None and _is_multinode(component)):
            out.append(Problem.at(f.loc, "a role override requires a multinode component"))
            continue
        if ov.target is not None and ov.target != f.target:
            out.append(
                Problem.at(
                    (*f.loc, "target"),
                    f"{ov.target!r} must match the provider-context target {f.target!r}",
                )
            )
            continue
        _, errors = _topology_value(f.target, ov.value)
        out.extend(Problem.at((*f.loc, "value", *p), m) for p, m in errors)
    typed = root.typed_topology or any(c.topologyConstraint is not None for c in graph.components)
    if on_grove and typed:
        out.extend(
            Problem.at(
                (*f.loc, "value"),
                "cannot be combined with spec.topologyConstraint or a service "
                "topologyConstraint; use either the typed topology API or provider-native "
                "Grove topology overrides",
            )
            for f in found
            if f.override.apiVersion == GROVE_API_VERSION and _writes_topology(f)
        )
    return out


def _set_before(entry: Obj, key: str, value: Any, before: str | None) -> Obj:
    """``entry`` with ``key`` set: in place if present, else ahead of ``before``."""
    if key in entry or before not in entry:
        entry[key] = value
        return entry
    out: Obj = {}
    for k, v in entry.items():
        if k == before:
            out[key] = value
        out[k] = v
    return out


def _set_named(items: list[Obj], name: str, value: Obj, before: str | None, loc: FieldPath) -> None:
    for i, item in enumerate(items):
        if item.get("name") == name:
            items[i] = _set_before(item, TOPOLOGY, copy.deepcopy(value), before)
            return
    raise RenderError([Problem.at(loc, f"no generated Grove destination named {name!r}")])


def apply(root: Root, graph: GraphComponents, pcs: Obj) -> Obj:
    """The PodCliqueSet with every override's topologyConstraint set (replaced, not merged:
    ``ComposeGroveOverrides``), the root first; ``problems`` has been checked."""
    template: Obj = pcs["spec"]["template"]
    for f in overrides(root, graph):
        value, _ = _topology_value(f.target, f.override.value)
        if value is None:  # pragma: no cover - refused by problems()
            continue
        if f.service is None:  # where grove.pod_clique_set puts a typed one
            after = next(
                (k for k in ("terminationDelay", "podCliqueScalingGroups") if k in template), None
            )
            pcs["spec"]["template"] = template = _set_before(
                template, TOPOLOGY, copy.deepcopy(value), after
            )
        elif f.target == SCALING_GROUP:
            groups = template.get("podCliqueScalingGroups") or []
            _set_named(groups, f.service.lower(), value, None, f.loc)
        else:
            name = f.service.lower()
            if f.role is not None:
                name = f"{name}-{ROLE_SUFFIX[f.role]}"
            _set_named(template["cliques"], name, value, "spec", f.loc)
    return pcs
