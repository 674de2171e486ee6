"""The Dynamo 1.5 defaulting webhook's stamps on a new DGD, made before it is validated and
expanded (``webhook/defaulting/dynamographdeployment_handler.go`` @ 2a6da14c8):

* ``nvidia.com/workload-provider``: ``grove`` or ``component``, the provider the DGD is
  rendered with (#12942, 73a3fd26f); immutable once set, so a value in Git that contradicts it
  is refused by :func:`dyn_gitops.rules.workload_provider_checks`;
* ``nvidia.com/dynamo-operator-origin-version``: the operator version (setting
  origin-version), unless the DGD carries one; the operator propagates it into every
  component, where it gates behaviour such as the vLLM multinode launch (ERRATA 4).

Emitting both on the source DGD keeps a later apply from removing what the webhook wrote.
The webhook runs on the v1beta1 object; what it reads and writes is the DGD's metadata,
which every served version holds alike, so :func:`stamp` takes either model (the
expansion's v1alpha1 one, or the v1beta1 form of :class:`.rules.Graph`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from . import keys, naming
from .models.k8s import ObjectMeta
from .settings import NO_ORIGIN_STAMP, RenderSettings

#: a DGD model of either version (its ``metadata`` an :class:`ObjectMeta`)
DGD = TypeVar("DGD", bound=BaseModel)

#: the annotations :func:`stamp` may add, in the order they are written
STAMPED = (keys.ANN_WORKLOAD_PROVIDER, keys.ANN_OPERATOR_ORIGIN_VERSION)


def stamps(meta: ObjectMeta, settings: RenderSettings) -> dict[str, str]:
    """The annotations the webhook would add to a DGD whose metadata is ``meta`` (none it
    already has)."""
    ann = meta.annotations or {}
    out: dict[str, str] = {}
    if keys.ANN_WORKLOAD_PROVIDER not in ann:
        out[keys.ANN_WORKLOAD_PROVIDER] = naming.workload_provider(ann, settings.grove)
    if keys.ANN_OPERATOR_ORIGIN_VERSION not in ann and settings.origin_version != NO_ORIGIN_STAMP:
        out[keys.ANN_OPERATOR_ORIGIN_VERSION] = settings.origin_version
    return out


def _metadata(dgd: BaseModel) -> ObjectMeta:
    meta = getattr(dgd, "metadata", None)
    assert isinstance(meta, ObjectMeta), f"{type(dgd).__name__} has no DGD metadata"
    return meta


def stamp(dgd: DGD, settings: RenderSettings) -> DGD:
    """``dgd`` (a DGD model of either version) as admitted: with :func:`stamps` added to its
    annotations."""
    metadata = _metadata(dgd)
    added = stamps(metadata, settings)
    if not added:
        return dgd
    meta = metadata.model_copy(update={"annotations": {**(metadata.annotations or {}), **added}})
    return dgd.model_copy(update={"metadata": meta})


def admitted_document(data: dict[str, Any], dgd: BaseModel) -> dict[str, Any]:
    """The DGD document ``data`` as the API server stores it once ``dgd`` (its model, passed
    through :func:`stamp`) was admitted: with the stamps among its annotations. The worker
    hash reads it (the origin version reaches the worker DCDs), the source DGD is emitted
    from it. ``data`` itself is not changed."""
    written = (data.get("metadata") or {}).get("annotations") or {}
    admitted = _metadata(dgd).annotations or {}
    added = {k: admitted[k] for k in STAMPED if k in admitted and k not in written}
    if not added:
        return data
    meta = dict(data.get("metadata") or {})
    meta["annotations"] = {**written, **added}
    return {**data, "metadata": meta}
