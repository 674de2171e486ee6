"""The one rule that maps an object to its output file, and the name rules it relies on.

``render --out-dir`` and ``hydrate`` (branch and directory) write each object to
``<namespace|_cluster>/<kind>[.<group>]_<name>.yaml``. Every component comes from the input,
so each is checked first, the way the API server checks it (it would refuse the object
anyway), and the checked form is what makes the path safe: no ``/``, no ``..``, no NUL, no
absolute path, bounded length. Two objects never share a file, also when compared without
case (a case-insensitive file system would merge them).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from .errors import DynGitopsError, FieldPath, Problem

CLUSTER_DIR = "_cluster"  # not a DNS label (underscore), so no namespace can collide with it
SUFFIX = ".yaml"
MAX_FILE_NAME = 255  # bytes; NAME_MAX of every common file system

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_KIND = re.compile(r"[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

LABEL_MAX = 63
SUBDOMAIN_MAX = 253

# Name rules of the API server, by (group, kind). Kinds not listed are checked as DNS-1123
# subdomains in the groups below (built-in APIs, and the CRDs we emit or read: custom
# resources get the subdomain rule), and elsewhere (an aggregated API may be laxer) by the
# rule every resource path needs: a path segment.
_DNS1035 = frozenset({("", "Service")})
_LABEL_KINDS = frozenset({("", "Namespace")})
_SEGMENT_KINDS = frozenset(
    ("rbac.authorization.k8s.io", k)
    for k in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
)
_SUBDOMAIN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "policy",
        "autoscaling",
        "networking.k8s.io",
        "storage.k8s.io",
        "apiextensions.k8s.io",
        "scheduling.k8s.io",
        "resource.k8s.io",
        "coordination.k8s.io",
        "admissionregistration.k8s.io",
        "rbac.authorization.k8s.io",
        "discovery.k8s.io",
        "node.k8s.io",
        "certificates.k8s.io",
        "inference.networking.k8s.io",
        "inference.networking.x-k8s.io",
        "nvidia.com",
        "grove.io",
        "leaderworkerset.x-k8s.io",
        "scheduling.volcano.sh",
        "networking.istio.io",
        "monitoring.coreos.com",
    }
)


class PathError(DynGitopsError):
    """An object cannot be written to a file (bad component, or two objects on one file)."""


# ---------------------------------------------------------------------------- name rules
def dns_label(value: str, max_len: int = LABEL_MAX) -> str | None:
    """Why ``value`` is not a DNS-1123 label (a namespace), or None."""
    if not value:
        return "must not be empty"
    if len(value) > max_len:
        return f"must be at most {max_len} characters (found {len(value)})"
    if not _LABEL.fullmatch(value):
        return (
            f"{value!r} is not a DNS-1123 label: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return None


def _dns1035(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > LABEL_MAX:
        return f"must be at most {LABEL_MAX} characters (found {len(value)})"
    if not _LABEL_1035.fullmatch(value):
        return (
            f"{value!r} is not a DNS-1035 label: lower-case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit"
        )
    return None


def _subdomain(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > SUBDOMAIN_MAX:
        return f"must be at most {SUBDOMAIN_MAX} characters (found {len(value)})"
    if not _SUBDOMAIN.fullmatch(value):
        return (
            f"{value!r} is not a DNS-1123 subdomain: lower-case letters, digits, '-' and "
            "'.', starting and ending with a letter or digit"
        )
    return None


def ingress_host_problem(host: str) -> str | None:
    """What the API server refuses in an Ingress rule's ``host`` (``ValidateIngressSpec``):
    a DNS-1123 subdomain, at most one leading ``*.`` wildcard, never an IP address."""
    name = host[2:] if host.startswith("*.") else host
    if _IPV4.fullmatch(name) or ":" in name:
        return f"{host!r} is an IP address; an Ingress host must be a DNS name"
    return _subdomain(name)


_IPV4 = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}")


def _segment(value: str, max_len: int = SUBDOMAIN_MAX) -> str | None:
    """The API server's path-segment rule, plus a length bound and no control characters
    (they would reach file names and terminals)."""
    if not value:
        return "must not be empty"
    if len(value) > max_len:  # first: the messages below quote the value
        return f"must be at most {max_len} characters (found {len(value)})"
    if value in (".", ".."):
        return f"may not be {value!r}"
    if "/" in value or "%" in value:
        return f"{value!r} may not contain '/' or '%'"
    if _CONTROL.search(value):
        return f"{value!r} may not contain control characters"
    return None


def name_problem(group: str, kind: str, name: str) -> str | None:
    """Why the API server would refuse ``name`` for ``kind`` in ``group``, or None."""
    if (group, kind) in _DNS1035:
        return _dns1035(name)
    if (group, kind) in _LABEL_KINDS:
        return dns_label(name)
    if (group, kind) in _SEGMENT_KINDS or group not in _SUBDOMAIN_GROUPS:
        return _segment(name)
    return _subdomain(name)


# ---------------------------------------------------------------------- labels, annotations
#: the name part of a qualified name, and a label value (apimachinery ``validation.go``)
_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
#: ``TotalAnnotationSizeLimitB``: the bytes of every annotation key and value of an object
ANNOTATIONS_MAX_BYTES = 256 * 1024
_NAME_RULE = (
    f"at most {LABEL_MAX} letters, digits, '-', '_' and '.', starting and ending with a "
    "letter or digit"
)


@lru_cache(maxsize=4096)  # pure; the keys of a repository repeat
def key_problem(key: str) -> str | None:
    """Why the API server refuses ``key`` as a label or annotation key (``IsQualifiedName``:
    an optional DNS-1123 subdomain and ``/``, then a name), or None. The key is not quoted:
    the caller's path names it."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > SUBDOMAIN_MAX or not _SUBDOMAIN.fullmatch(prefix)):
        return (
            "not a label or annotation key: the prefix before '/' must be a DNS-1123 "
            f"subdomain (at most {SUBDOMAIN_MAX} lower-case letters, digits, '-' and '.')"
        )
    if len(name) > LABEL_MAX or not _NAME_PART.fullmatch(name):
        return f"not a label or annotation key: the name after any prefix must be {_NAME_RULE}"
    return None


@lru_cache(maxsize=4096)  # pure; the values of a repository repeat
def label_value_problem(value: str) -> str | None:
    """Why the API server refuses ``value`` as a label value (``IsValidLabelValue``), or
    None; the value is not quoted (it may come from where secrets are)."""
    if value and (len(value) > LABEL_MAX or not _NAME_PART.fullmatch(value)):
        return f"not a label value: {_NAME_RULE} (or empty)"
    return None


def metadata_problems(labels: Any, annotations: Any) -> Iterable[tuple[FieldPath, str]]:
    """What the API server refuses in ``labels`` and ``annotations`` of an object or a pod
    template (``ValidateLabels``, ``ValidateAnnotations``): (path from the metadata, why).
    Nothing is quoted; a value that is no string is the caller's to report."""
    for k, v in labels.items() if isinstance(labels, dict) else ():
        why = key_problem(k) if type(k) is str else None
        why = why or (label_value_problem(v) if type(v) is str else None)
        if why:
            yield ("labels", k), why
    size = 0
    for k, v in annotations.items() if isinstance(annotations, dict) else ():
        why = key_problem(k) if type(k) is str else None
        if why:
            yield ("annotations", k), why
        size += len(str(k).encode(errors="replace"))
        size += len(v.encode(errors="replace")) if type(v) is str else 0
    if size > ANNOTATIONS_MAX_BYTES:
        yield (
            ("annotations",),
            (
                f"the annotations total {size} bytes, more than the {ANNOTATIONS_MAX_BYTES} the "
                "API server accepts"
            ),
        )


@lru_cache(maxsize=1024)  # pure; a render asks for a handful of types, per object
def type_problem(api_version: str, kind: str) -> Problem | None:
    """What is wrong when apiVersion or kind cannot be a Kubernetes type, or None."""
    if len(kind) > LABEL_MAX or not _KIND.fullmatch(kind):
        return Problem.at(
            ("kind",),
            f"{kind[:80]!r} is not a kind: letters, digits and '-', "
            f"starting with a letter, at most {LABEL_MAX} characters",
        )
    group, _, version = api_version.rpartition("/")
    bad = (_dns1035(version) if "/" not in group else "has more than one '/'") or (
        _subdomain(group) if group or "/" in api_version else None
    )
    if bad:
        return Problem.at(("apiVersion",), f"{api_version[:80]!r} is not a group/version: {bad}")
    return None


def object_problems(obj: dict[str, Any]) -> list[Problem]:
    """Every part of ``obj``'s identity the API server would refuse (paths from the object):
    apiVersion, kind, metadata.namespace (a DNS-1123 label, when set) and metadata.name (the
    kind's rule; an object with only generateName is left alone: it can be streamed, not
    written to a file)."""
    api, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str):
        return [
            Problem.at(("kind",) if isinstance(api, str) else ("apiVersion",), "must be a string")
        ]
    bad_type = type_problem(api, kind)
    if bad_type:
        return [bad_type]
    meta = obj.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        return [Problem.at(("metadata",), "must be a mapping")]
    out: list[Problem] = []
    ns = meta.get("namespace")
    if ns not in (None, ""):  # empty: unset, as kubectl and the API server take it
        why = dns_label(ns) if isinstance(ns, str) else "must be a string"
        if why:
            out.append(Problem.at(("metadata", "namespace"), why))
    name = meta.get("name")
    if name is None and meta.get("generateName") is None:
        out.append(Problem.at(("metadata", "name"), "required field is missing"))
    elif name is not None:
        why = (
            name_problem(api.rpartition("/")[0], kind, name)
            if isinstance(name, str)
            else "must be a string"
        )
        if why:
            out.append(Problem.at(("metadata", "name"), why))
    return out


# ---------------------------------------------------------------------------- paths
def relpath(obj: dict[str, Any], *, checked: bool = False) -> str:
    """``<namespace|_cluster>/<kind>[.<group>]_<name>.yaml``; raises :class:`PathError`
    unless every component is valid (``checked``: :func:`object_problems` found nothing
    already). A file name longer than the file system allows keeps a readable prefix and
    ends in a digest of the whole name (still unique and stable)."""
    found = [] if checked else object_problems(obj)
    meta = obj.get("metadata") or {}
    if not found and meta.get("name") is None:
        found = [
            Problem.at(("metadata", "name"), "an object with only generateName has no file name")
        ]
    if found:
        what = f"{obj.get('kind')}/{meta.get('name') or meta.get('generateName')}"
        raise PathError(f"{what}: " + "; ".join(f"{p.field}: {p.message}" for p in found))
    group = str(obj["apiVersion"]).rpartition("/")[0]
    stem = str(obj["kind"]).lower() + (f".{group}" if group else "") + f"_{meta['name']}"
    if len((stem + SUFFIX).encode()) > MAX_FILE_NAME:
        digest = hashlib.sha256(stem.encode()).hexdigest()[:16]
        stem = stem.encode()[: MAX_FILE_NAME - len(SUFFIX) - 17].decode(errors="ignore")
        stem = f"{stem}~{digest}"
    return f"{meta.get('namespace') or CLUSTER_DIR}/{stem}{SUFFIX}"


def fold(rel: str) -> str:
    """The form two paths share when a case-insensitive (and Unicode-normalizing, as on
    macOS) file system would store them as one file."""
    if rel.isascii():  # NFKC leaves ASCII as it is
        return rel.casefold()
    return unicodedata.normalize("NFKC", rel).casefold()


def is_object_path(rel: str) -> bool:
    """Whether ``rel`` has the shape :func:`relpath` produces (for paths read back from a
    cache that people can edit): one safe directory, one safe file name."""
    parts = rel.split("/")
    return (
        len(parts) == 2
        and (parts[0] == CLUSTER_DIR or dns_label(parts[0]) is None)
        and parts[1].endswith(SUFFIX)
        and _segment(parts[1], MAX_FILE_NAME) is None
        and len(parts[1].encode()) <= MAX_FILE_NAME
    )


def assign(objects: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every object by its output path; raises :class:`PathError` if a path is invalid or
    two objects would land in one file (compared as a case-insensitive file system would)."""
    out: dict[str, dict[str, Any]] = {}
    seen: dict[str, str] = {}
    for obj in objects:
        rel = relpath(obj)
        first = seen.setdefault(fold(rel), rel)
        if first != rel or rel in out:
            raise PathError(
                f"two objects map to the same output file {rel}"
                + (f" (and {first}, on a case-insensitive file system)" if first != rel else "")
            )
        out[rel] = obj
    return out
