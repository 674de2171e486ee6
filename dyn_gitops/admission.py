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
which every served version holds alike: :func:`stamp` takes and gives an
:class:`ObjectMeta` (that of :class:`.hubform.Graph`, the DGD's one typed form).
"""

from __future__ import annotations

from typing import Any

from . import keys, naming
from .models.k8s import ObjectMeta
from .settings import NO_ORIGIN_STAMP, RenderSettings

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


def stamp(meta: ObjectMeta, settings: RenderSettings) -> ObjectMeta:
    """A DGD's metadata ``meta`` as admitted: with :func:`stamps` added to its annotations."""
    added = stamps(meta, settings)
    if not added:
        return meta
    return meta.model_copy(update={"annotations": {**(meta.annotations or {}), **added}})


def admitted_document(data: dict[str, Any], meta: ObjectMeta) -> dict[str, Any]:
    """The DGD document ``data`` as the API server stores it once admitted with the metadata
    ``meta`` (its own, passed through :func:`stamp`): with the stamps among its
    annotations. The worker hash reads it (the origin version reaches the worker DCDs), the
    source DGD is emitted from it. ``data`` itself is not changed."""
    written = (data.get("metadata") or {}).get("annotations") or {}
    admitted = meta.annotations or {}
    added = {k: admitted[k] for k in STAMPED if k in admitted and k not in written}
    if not added:
        return data
    stored = dict(data.get("metadata") or {})
    stored["annotations"] = {**written, **added}
    return {**data, "metadata": stored}
