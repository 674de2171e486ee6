"""Lease helpers shared by leader election and the namespace-scope lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dyn_gitops_operator.resources import LEASES

Obj = dict[str, Any]


def micro_time(t: datetime) -> str:
    """metav1.MicroTime."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def expired(lease: Obj, now: datetime) -> bool:
    """``now > renewTime + leaseDurationSeconds``; a lease missing either field is expired
    (the operator's rule, runtime spec 4.2)."""
    spec = lease.get("spec") or {}
    renew = parse_time(spec.get("renewTime"))
    duration = spec.get("leaseDurationSeconds")
    if renew is None or not duration:
        return True
    return now > renew + timedelta(seconds=float(duration))


def expires_at(lease: Obj) -> datetime | None:
    spec = lease.get("spec") or {}
    renew = parse_time(spec.get("renewTime"))
    duration = spec.get("leaseDurationSeconds")
    if renew is None or not duration:
        return None
    return renew + timedelta(seconds=float(duration))


def holder(lease: Obj) -> str:
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def lease_body(
    namespace: str,
    name: str,
    spec: Obj,
    *,
    resource_version: str | None = None,
    uid: str | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace}
    if resource_version:
        meta["resourceVersion"] = resource_version
    if uid:
        meta["uid"] = uid
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": LEASES.api_version, "kind": LEASES.kind, "metadata": meta, "spec": spec}
