"""How many GPUs a component asks for, as the Dynamo 1.5 operator counts them: one function
for the GMS admission rule (:mod:`dyn_gitops.rules`, ``validateGPUMemoryServiceSpec`` in
``internal/webhook/validation/shared_v1beta1.go``) and the GMS rendering
(:mod:`dyn_gitops.expand.gms`, the claim template and its check), which both call
``dra.ExtractGPUCountFromResourceRequirements`` on ``dynamo.GetMainContainerResources`` @
2a6da14c8: the resources of container ``main`` (a v1alpha1 service's ``resources`` convert
into it, ``mainContainer.resources`` winning key by key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import naming
from .workerhash.quantity import QuantityError, value_of


def is_gpu_resource(name: str) -> bool:
    """``isGPUResourceName``: ``nvidia.com/gpu``, ``gpu``, ``*/gpu``, a MIG shape
    (``*/mig-*``), ``gpu.*``."""
    lower = name.lower()
    return (
        lower in (naming.GPU_RESOURCE, "gpu")
        or lower.endswith("/gpu")
        or "/mig-" in lower
        or lower.startswith("gpu.")
    )


def gpu_names(resources: Mapping[str, Any]) -> list[str]:
    """``gpuResourceNames``: the GPU resource names of a resource list, sorted."""
    return sorted(name for name in resources if is_gpu_resource(name))


def count(resources: Mapping[str, Any] | None) -> int:
    """The GPUs of container ``main`` whose ``resources`` (core/v1 ResourceRequirements, as
    written) are given: the first GPU resource name (sorted) of its ``limits``, else of its
    ``requests``; 0 if none, or if that quantity is no whole number (the operator's
    error)."""
    for side in ("limits", "requests"):
        values = (resources or {}).get(side) or {}
        names = gpu_names(values)
        if names:
            return _whole(str(values[names[0]]))
    return 0


def _whole(text: str) -> int:
    """``gpuCountFromQuantity``: the quantity's value if it is a whole number, else 0."""
    try:
        value = value_of(text)
    except QuantityError:
        return 0
    return int(value) if value == value.to_integral_value() else 0
