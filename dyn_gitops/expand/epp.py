"""The EPP's launch contract in 1.5 (#11355, v1.5.0 release notes).

The Go EPP is gone; the default EPP is the Rust one shipped in the Frontend image, set up
through ``DYN_*`` env and fixed ports: no arguments, no config file, ``HOME`` pinned to the
Frontend image's ``/home/dynamo`` with the model-config cache mounted under it. A service
that still sets the deprecated ``eppConfig`` keeps the Go EPP launch contract of 1.4 (flags,
the config ConfigMap volume), so a DGD pinned to a 1.4 Go EPP image keeps working, but
without the model-config cache volume: ``eppConfig`` selects the contract, not the image,
so no cache path fits every image it may run (``component_epp.go`` of the 1.5 line, which
rolls legacy EPP pods once on the upgrade for it). Best-evidenced form:
``docs/reference-behaviour.md`` ("EPP in 1.5").
"""

from __future__ import annotations

from typing import Any, Final

from ..models import v1beta1
from . import defaults

#: HOME of the Frontend image, where the Rust EPP ships
NATIVE_HOME: Final = "/home/dynamo"
CACHE_VOLUME: Final = "hf-cache"


def is_legacy(component: v1beta1.Component) -> bool:
    """``eppConfig`` present (even empty): the 1.4 Go EPP contract."""
    return component.eppConfig is not None


def to_native(container: dict[str, Any]) -> None:
    """Turn the Go EPP's default container into the Rust EPP's, in place: no config
    file, the cache mounted under the pinned ``HOME``."""
    container.pop("args", None)  # the image's entrypoint runs; user args still apply
    container["env"] = [*container["env"], {"name": "HOME", "value": NATIVE_HOME}]
    mounts = container.get("volumeMounts") or []
    container["volumeMounts"] = [
        *(m for m in mounts if m["name"] != defaults.EPP_CONFIG_VOLUME),
        {"name": CACHE_VOLUME, "mountPath": f"{NATIVE_HOME}/.cache"},
    ]


def native_volumes() -> list[dict[str, Any]]:
    return [{"name": CACHE_VOLUME, "emptyDir": {}}]
