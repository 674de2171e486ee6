"""Istio objects for EPP components (``GenerateEPPDestinationRule``, #8270; the operator
config ``serviceMesh``, #10773).

With the service mesh on, the operator gives each EPP Service a DestinationRule telling the
caller's sidecar how to reach the EPP's own TLS on its gRPC port, so a STRICT-mTLS mesh does
not wrap it in a second TLS layer.
"""

from __future__ import annotations

from typing import Any, Final

from ..settings import RenderSettings
from .objects import meta

DESTINATION_RULE_API: Final = "networking.istio.io/v1beta1"


def mesh_enabled(settings: RenderSettings) -> bool:
    return settings.service_mesh == "istio"


def destination_rule(service_name: str, namespace: str, settings: RenderSettings) -> dict[str, Any]:
    """The DestinationRule of the EPP Service ``service_name`` (already normalized)."""
    tls: dict[str, Any] = {}
    # the operator writes Istio's protobuf JSON: the zero enum (DISABLE) is left out
    if settings.istio_tls_mode != "DISABLE":
        tls["mode"] = settings.istio_tls_mode
    if settings.istio_tls_mode == "MUTUAL":  # Istio rejects these fields in other modes
        for key, value in (
            ("clientCertificate", settings.istio_client_certificate),
            ("privateKey", settings.istio_private_key),
            ("caCertificates", settings.istio_ca_certificates),
        ):
            if value:
                tls[key] = value
    tls["insecureSkipVerify"] = settings.istio_insecure_skip_verify
    return {
        "apiVersion": DESTINATION_RULE_API,
        "kind": "DestinationRule",
        "metadata": meta(service_name, namespace),
        "spec": {
            "host": f"{service_name}.{namespace}.svc.cluster.local",
            "trafficPolicy": {"tls": tls},
        },
    }
