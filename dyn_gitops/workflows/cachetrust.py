"""Which records of hydrate's cache a run may trust: those signed with the runner's key.

Threat model (docs/workflows.md, *Incremental hydrate*): whoever may push to the hydrated
branch controls its outputs and ``.dyn-gitops/cache.json`` alike, so any digest kept there
can be edited to match an edited output. What they do not hold is the key of whoever runs
hydrate (a CI secret, ``DYN_GITOPS_HYDRATE_KEY``): each record (its input files' blob ids,
its outputs with the SHA-256 of their bytes) is signed with HMAC-SHA256 under it, bound to
the cache format, the renderer version and the settings. A record is a true statement
("these inputs render to these bytes") wherever it is copied, so binding it to more
(branch, commit) would only cost reuse. Without a key no record is trusted.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

_KEY_ID_LABEL = b"dyn-gitops hydrate cache key id"


def content_digest(data: bytes) -> str:
    """SHA-256 of an output file's bytes, as its cache record keeps it."""
    return hashlib.sha256(data).hexdigest()


def key_id(key: bytes) -> str:
    """Names the key in the cache (which key signed it) without revealing it."""
    return hmac.new(key, _KEY_ID_LABEL, hashlib.sha256).hexdigest()[:16]


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(key: bytes, head: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """The MAC of ``record`` (without its ``mac``) under ``head`` (format, version, settings)."""
    return hmac.new(key, _canonical([head, record]), hashlib.sha256).hexdigest()


def signed(key: bytes | None, head: Mapping[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    return record if key is None else {**record, "mac": sign(key, head, record)}


def verifies(key: bytes, head: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    """Whether ``record``, read back from the branch, carries our MAC (constant-time)."""
    mac = record.get("mac")
    body = {k: v for k, v in record.items() if k != "mac"}
    return isinstance(mac, str) and hmac.compare_digest(mac, sign(key, head, body))
