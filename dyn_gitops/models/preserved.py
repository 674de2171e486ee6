"""What a v1alpha1 DGD says that v1beta1 has no field for and the renderer still reads:
a graph's ``spec.pvcs`` and a service's ``ingress``. The operator keeps both in its
conversion annotation ``nvidia.com/dgd-spec`` when it stores the DGD in v1beta1
(``ConvertTo`` @ 2a6da14c8; :func:`dyn_gitops.to_v1beta1.preserved_spec`), typed as the
v1alpha1 API types they come from; the v1alpha1 model (:mod:`.v1alpha1`) uses these types
for those fields, the expansion reads them beside its v1beta1 model
(``expand/components.py``)."""

import json
from collections.abc import Mapping
from typing import Any

from .. import keys
from .k8s import Quantity, Strict


class IngressTLS(Strict):
    secretName: str | None = None


class Ingress(Strict):
    """A service's ``ingress`` (v1alpha1 ``IngressSpec``)."""

    enabled: bool = False
    host: str | None = None
    useVirtualService: bool = False
    virtualServiceGateway: str | None = None
    hostPrefix: str | None = None
    hostSuffix: str | None = None
    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    tls: IngressTLS | None = None
    ingressControllerClassName: str | None = None


class PVC(Strict):
    """An entry of a graph's ``spec.pvcs``."""

    create: bool = False
    name: str | None = None
    storageClass: str | None = None
    size: Quantity | None = None
    volumeAccessMode: str | None = None


def alpha_spec(annotations: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The sparse v1alpha1 spec the operator's conversion kept in ``nvidia.com/dgd-spec``
    (``{"version":1,"spec":{...}}``) of a v1beta1 DGD's ``annotations``; None without one.
    :class:`ValueError` when the annotation is no such payload."""
    text = (annotations or {}).get(keys.ANN_DGD_SPEC)
    if text is None:
        return None
    try:
        payload = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        payload = None
    if not isinstance(payload, dict) or payload.get("version") != 1:
        raise ValueError('is not the conversion payload {"version":1,"spec":{...}}')
    spec = payload.get("spec") or {}
    services = spec.get("services") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(services or {}, dict):
        raise ValueError("its spec is not a v1alpha1 DGD spec")
    return spec


def alpha_service(spec: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    """Service ``name`` of :func:`alpha_spec` (``{}``: nothing kept for it)."""
    services = (spec or {}).get("services") or {}
    service = services.get(name)
    return service if isinstance(service, dict) else {}
