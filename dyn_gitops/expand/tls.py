"""Transport TLS env of every DGD pod (1.5.0, #13689).

The operator's ``AddTransportTLSEnvVars``: each certificate path of its
``InfrastructureConfiguration`` that is set becomes one env var of the main container and
of the frontend sidecar, after the user's env ("existing wins", like ``NATS_SERVER``). The
operator injects paths only; mounting the certificates is the DGD's business.
"""

from __future__ import annotations

from typing import Any, Final

from ..settings import RenderSettings

#: setting -> env var, in the operator's order
TRANSPORT_TLS_ENV: Final = (
    ("nats_tls_ca_path", "NATS_TLS_CA_CERT_PATH"),
    ("nats_tls_client_cert_path", "NATS_TLS_CLIENT_CERT_PATH"),
    ("nats_tls_client_key_path", "NATS_TLS_CLIENT_KEY_PATH"),
    ("tcp_tls_cert_path", "DYN_TCP_TLS_CERT_PATH"),
    ("tcp_tls_key_path", "DYN_TCP_TLS_KEY_PATH"),
    ("tcp_tls_ca_path", "DYN_TCP_TLS_CA_CERT_PATH"),
    ("tcp_tls_client_cert_path", "DYN_TCP_TLS_CLIENT_CERT_PATH"),
    ("tcp_tls_client_key_path", "DYN_TCP_TLS_CLIENT_KEY_PATH"),
    ("tcp_tls_client_ca_path", "DYN_TCP_TLS_CLIENT_CA_CERT_PATH"),
    ("tcp_tls_server_name", "DYN_TCP_TLS_SERVER_NAME"),
)


def transport_env(settings: RenderSettings) -> list[dict[str, Any]]:
    """The env entries for the TLS settings that are set."""
    out = []
    for attr, name in TRANSPORT_TLS_ENV:
        value = getattr(settings, attr)
        if value:
            out.append({"name": name, "value": value})
    return out
