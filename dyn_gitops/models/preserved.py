"""What a v1alpha1 DGD says that v1beta1 has no field for and the renderer still reads:
a graph's ``spec.pvcs`` and a service's ``ingress``. The operator keeps both in its
conversion annotation ``nvidia.com/dgd-spec`` when it stores the DGD in v1beta1
(``ConvertTo`` @ 2a6da14c8; :func:`dyn_gitops.to_v1beta1.preserved_spec`), typed as the
v1alpha1 API types they come from; the v1alpha1 model (:mod:`.v1alpha1`) uses these types
for those fields, the expansion reads them beside its v1beta1 model
(``expand/components.py``; the payload itself is read by :mod:`.dgdspec`)."""

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
