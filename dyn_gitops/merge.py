"""mergo ``Merge(dst, src, WithOverride)`` semantics on JSON-shaped values, and env merging.

The operator merges the user's partial main container and pod spec over its defaults
with these rules (``spec/dynamo-pod-spec.md`` 5.2): a zero scalar never overrides, a
non-empty list replaces, maps and structs merge key by key with the source winning.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")


def data_copy(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars), several times faster than
    ``copy.deepcopy`` (no memo: parsed documents hold no shared or cyclic references)."""
    if isinstance(value, dict):  # a call per collection, not per scalar
        return {k: data_copy(v) if isinstance(v, dict | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [data_copy(v) if isinstance(v, dict | list) else v for v in value]
    return value


def is_zero(value: Any) -> bool:
    return (
        value is None
        or value == ""
        or value is False
        or (value == 0 and not isinstance(value, bool))
        or value == []
        or value == {}
    )


def merge_override(dst: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    """Return ``dst`` updated from ``src`` (both left untouched)."""
    out = dict(dst)
    for key, value in src.items():
        if isinstance(value, dict):
            current = out.get(key)
            if isinstance(current, dict):
                out[key] = merge_override(current, value)
            elif value or current is None:
                out[key] = data_copy(value)
        elif not is_zero(value):
            out[key] = data_copy(value)
    return out


def merge_probe(default: dict[str, Any] | None, user: dict[str, Any]) -> dict[str, Any]:
    """Field-merge a user probe over a default one (v1alpha1-era mainContainer probes).

    A probe has exactly one handler, so a user handler of another kind replaces the
    default handler instead of being merged beside it (which the API server rejects).
    """
    if default is None:
        return dict(data_copy(user))
    base = dict(default)
    if any(h in user for h in PROBE_HANDLERS):
        for h in PROBE_HANDLERS:
            if h not in user:
                base.pop(h, None)
    return merge_override(base, user)


def merge_envs(*layers: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``MergeEnvs``: later layers win by name; the result is sorted by name."""
    merged: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for env in layer:
            merged[env["name"]] = env
    return [merged[name] for name in sorted(merged)]


def add_missing_envs(
    env: list[dict[str, Any]], extra: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Add ``extra`` entries whose name is not present ("existing wins"), keeping order sorted."""
    have = {e["name"] for e in env}
    added = [e for e in extra if e["name"] not in have]
    return merge_envs(env, added) if added else env


def omit_empty_values(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Env as Go encodes ``corev1.EnvVar``: an empty ``value`` is left out (``omitempty``),
    e.g. ``DYN_COMPONENT`` of a component without a type (operator-output @ 2a6da14c8)."""
    return [
        {k: v for k, v in e.items() if k != "value"} if e.get("value") == "" else dict(e)
        for e in env
    ]


def order_keys(obj: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """Canonical key order (Go struct order); unknown keys follow, sorted."""
    out = {k: obj[k] for k in order if k in obj}
    for k in sorted(obj):
        if k not in out:
            out[k] = obj[k]
    return out


CONTAINER_ORDER = (
    "name",
    "image",
    "command",
    "args",
    "workingDir",
    "ports",
    "envFrom",
    "env",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "restartPolicyRules",
    "volumeMounts",
    "volumeDevices",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
    "securityContext",
    "stdin",
    "stdinOnce",
    "tty",
)

POD_SPEC_ORDER = (
    "volumes",
    "initContainers",
    "containers",
    "ephemeralContainers",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "dnsPolicy",
    "nodeSelector",
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
    "nodeName",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "securityContext",
    "imagePullSecrets",
    "hostname",
    "hostnameOverride",
    "subdomain",
    "affinity",
    "schedulerName",
    "tolerations",
    "hostAliases",
    "priorityClassName",
    "priority",
    "dnsConfig",
    "readinessGates",
    "runtimeClassName",
    "enableServiceLinks",
    "preemptionPolicy",
    "overhead",
    "topologySpreadConstraints",
    "setHostnameAsFQDN",
    "os",
    "hostUsers",
    "schedulingGates",
    "resourceClaims",
    "resources",
)
