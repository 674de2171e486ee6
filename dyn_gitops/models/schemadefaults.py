"""Structural-schema defaulting, as the API server applies the DGD CRD's ``default:`` values
to a stored DynamoGraphDeployment before the operator reads it (and copies its
``podTemplate``, its graph ``env`` ... into what it creates): a default is set where its
field is absent (or null: the field is not nullable, the API server prunes the null first),
in every object the schema reaches, list items and map values included.

The defaults are the CRD's own (:mod:`.crddefaults`, generated from it), so the class
is covered, not a list of examples: ``protocol: TCP`` on a container port, ``service: ""``
on a gRPC probe, ``optional: false`` on a ``fileKeyRef``, the volume sources' defaults,
``multinode.nodeCount`` and the experimental blocks'. Pure: a copy along the paths that
get a default, everything else shared with the input (read only); bounded by the schema's
depth and the input's size."""

from __future__ import annotations

from typing import Any

from .crddefaults import GRAPH_SPEC

Node = dict[str, Any]
#: a v1beta1 component (of a DGD, or a standalone DCD's spec: the same defaults)
COMPONENT: Node = GRAPH_SPEC["properties"]["components"]["items"]


def applied(value: Any, node: Node) -> Any:
    """``value`` with the defaults of the schema skeleton ``node``."""
    if isinstance(value, list):
        items = node.get("items")
        return [applied(v, items) for v in value] if items else value
    if not isinstance(value, dict):
        return value  # a wrong type is the validation's to report
    out = dict(value)
    for key, default in (node.get("defaults") or {}).items():
        if out.get(key) is None:
            out[key] = default  # scalars only (generated): nothing shared to mutate
    for key, child in (node.get("properties") or {}).items():
        if key in out:
            out[key] = applied(out[key], child)
    values = node.get("additionalProperties")
    if values:
        known = node.get("properties") or {}
        for key in out:
            if key not in known:
                out[key] = applied(out[key], values)
    return out


def graph_spec(spec: Any) -> Any:
    """A v1beta1 DGD ``spec`` (its components included) as the API server stores it."""
    return applied(spec, GRAPH_SPEC)


def component(spec: Any) -> Any:
    """A v1beta1 component as the API server stores it."""
    return applied(spec, COMPONENT)
