"""``spec.experimental.kvTransferPolicy``: topology-aware KV transfer (#9768, #9792/#9879,
#10041; ``applyKvTransferPolicyToWorkerComponent`` and ``TopologyLabelVolume`` in the
operator's ``internal/dynamo/graph.go`` and ``component_worker.go`` @ 2a6da14c8).

Each worker gets the policy as env, a Downward-API volume ``topology-labels`` that projects
its topology pod labels into files under ``/etc/dynamo/topology``, and annotations telling
the operator's topology-label controller which node labels to copy onto the pod once it is
scheduled (the copied labels themselves are runtime state, never rendered).
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any, Final, Protocol

from . import keys, naming
from .models.v1beta1 import KVTransferPolicy

ENV_DOMAIN: Final = "DYN_KV_TRANSFER_DOMAIN"
ENV_ENFORCEMENT: Final = "DYN_KV_TRANSFER_ENFORCEMENT"
ENV_PREFERRED_WEIGHT: Final = "DYN_KV_TRANSFER_PREFERRED_WEIGHT"
ENV_TOPOLOGY_ENABLED: Final = "DYN_TOPOLOGY_ENABLED"
ENV_TOPOLOGY_MOUNT_PATH: Final = "DYN_TOPOLOGY_MOUNT_PATH"
POLICY_ENV: Final = frozenset(
    {
        ENV_DOMAIN,
        ENV_ENFORCEMENT,
        ENV_PREFERRED_WEIGHT,
        ENV_TOPOLOGY_ENABLED,
        ENV_TOPOLOGY_MOUNT_PATH,
    }
)
VOLUME: Final = "topology-labels"
MOUNT_PATH: Final = "/etc/dynamo/topology"
DEFAULT_ENFORCEMENT: Final = "required"


class _Experimental(Protocol):
    @property
    def kvTransferPolicy(self) -> KVTransferPolicy | None: ...


class _GraphSpec(Protocol):
    @property
    def experimental(self) -> _Experimental | None: ...


class _Graph(Protocol):
    @property
    def spec(self) -> _GraphSpec: ...


def policy(dgd: _Graph) -> KVTransferPolicy | None:
    """The graph's policy when it names a topology source (else the operator ignores it):
    ``spec.experimental.kvTransferPolicy`` of a DGD model of either version (the field and
    its type are the same in v1beta1, where the operator reads it, and in v1alpha1)."""
    return graph_policy(dgd.spec.experimental)


def graph_policy(exp: _Experimental | None) -> KVTransferPolicy | None:
    """:func:`policy` of a graph spec's ``experimental`` (``expand/components.Graph``)."""
    kvt = exp.kvTransferPolicy if exp is not None else None
    if kvt is None or not (kvt.labelKey or kvt.clusterTopologyName):
        return None
    return kvt


def go_float32(value: float) -> str:
    """``strconv.FormatFloat(float64(f32), 'f', -1, 32)``: the shortest decimal that reads
    back as the same float32, without an exponent."""
    f32: float = struct.unpack("f", struct.pack("f", value))[0]
    text = repr(f32)
    for digits in range(1, 10):
        candidate = f"{f32:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(candidate)))[0] == f32:
            text = candidate
            break
    return format(Decimal(text), "f")


def worker_env(kvt: KVTransferPolicy) -> list[dict[str, Any]]:
    """The policy env; it replaces any value of these names the user set."""
    env = [
        {"name": ENV_DOMAIN, "value": kvt.domain or ""},
        {"name": ENV_ENFORCEMENT, "value": kvt.enforcement or DEFAULT_ENFORCEMENT},
        {"name": ENV_TOPOLOGY_ENABLED, "value": "true"},
        {"name": ENV_TOPOLOGY_MOUNT_PATH, "value": MOUNT_PATH},
    ]
    if kvt.preferredWeight is not None:
        env.append({"name": ENV_PREFERRED_WEIGHT, "value": go_float32(kvt.preferredWeight)})
    return env


def volume_mount() -> dict[str, Any]:
    return {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}


def with_mount(mounts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``appendTopologyLabelVolumeMount``: last, replacing a mount of its name or path."""
    kept = [m for m in mounts if m.get("name") != VOLUME and m.get("mountPath") != MOUNT_PATH]
    return [*kept, volume_mount()]


def volume(kvt: KVTransferPolicy, domains: tuple[str, ...]) -> dict[str, Any]:
    """The Downward-API volume: one file per domain, named after it. With ``labelKey`` the
    file is the policy's domain read from that label; with ``clusterTopologyName`` one file
    per level of the ClusterTopologyBinding (``domains``), read from the Dynamo-owned label
    ``nvidia.com/dynamo-topology.<domain>`` the controller copies the node's level onto."""
    if kvt.labelKey:
        items = [_item(kvt.domain or "", kvt.labelKey)]
    else:
        items = [_item(d, keys.LABEL_TOPOLOGY_PREFIX + d) for d in domains]
    source: dict[str, Any] = {"items": items} if items else {}
    return {"name": VOLUME, "downwardAPI": source}


def _item(path: str, label: str) -> dict[str, Any]:
    return {"path": path, "fieldRef": {"fieldPath": f"metadata.labels['{label}']"}}


def with_volume(volumes: list[dict[str, Any]], vol: dict[str, Any]) -> list[dict[str, Any]]:
    """``appendTopologyLabelVolume``: last, replacing a volume of its name."""
    return [*(v for v in volumes if v.get("name") != VOLUME), vol]


def source_annotations(
    annotations: dict[str, str], kvt: KVTransferPolicy | None, component_type: str
) -> dict[str, str]:
    """The topology-label controller's annotations: never the user's, a worker's from the
    policy (``applyKvTransferPolicyTopologyAnnotations``)."""
    out = {k: v for k, v in annotations.items() if k not in keys.TOPOLOGY_SOURCE_ANNOTATIONS}
    if kvt is not None and naming.is_worker(component_type):
        if kvt.labelKey:
            out[keys.ANN_TOPOLOGY_LABEL_KEY] = kvt.labelKey
        if kvt.clusterTopologyName:
            out[keys.ANN_TOPOLOGY_CLUSTER_TOPOLOGY_NAME] = kvt.clusterTopologyName
    return out
