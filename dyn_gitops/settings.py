"""The render settings registry: the only input besides the Git tree.

Every setting is one field of :class:`RenderSettings` with its default and help; its
spellings are derived from its name, so they cannot drift:

=====================  =================================================
CLI flag               ``--discovery-backend``
environment variable   ``DYN_GITOPS_DISCOVERY_BACKEND``
Argo CD plugin env     ``ARGOCD_ENV_DYN_GITOPS_DISCOVERY_BACKEND``
CMP parameter          ``discovery-backend``
``dyn-gitops.yaml``    ``discovery-backend:``
=====================  =================================================

Precedence, lowest first: default < ``dyn-gitops.yaml`` < environment / CMP
parameters < CLI flags.

Trust: the settings of group ``limits`` protect the renderer from its input, so only whoever
runs the tool sets them: CLI flags and the process environment ``DYN_GITOPS_*`` (the
*runner*). Everything that comes with the input (``dyn-gitops.yaml``, a KRM functionConfig,
Argo CD Application parameters and ``ARGOCD_ENV_DYN_GITOPS_*``) may only lower a limit: a
value above the runner's (its *ceiling*) is refused. :data:`RUNNER_SOURCES` is the one place
that says which source is which.

Rules: a field's type says what its value may be (``Annotated[str, NAMESPACE]``, see *value
rules*), what the API server or the operator's Go parser accepts where the value lands; a
value from any source is checked by it, and a problem names where the value was written
(``dyn-gitops.yaml:3``, ``flag --namespace``), what was found and what is expected.
"""

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args, get_origin

from . import goparse
from .display import describe
from .errors import UsageError
from .keys import LABEL_TOPOLOGY_PREFIX
from .objpath import LABEL_MAX, SUBDOMAIN_MAX
from .runtimeversion import parse_origin

SETTINGS_FILE = "dyn-gitops.yaml"
ENV_PREFIX = "DYN_GITOPS_"
#: the companion controller's ceiling of replica counts (its default: max-replicas's)
OPERATOR_MAX_REPLICAS_ENV = "DYN_GITOPS_OPERATOR_MAX_REPLICAS"
#: hydrate's cache key: a secret of whoever runs hydrate (a CI secret), never a render
#: setting and never from the input; it signs each record of .dyn-gitops/cache.json so that
#: a record edited on the branch is not trusted (docs/workflows.md, Incremental hydrate)
HYDRATE_KEY_ENV = "DYN_GITOPS_HYDRATE_KEY"
HYDRATE_KEY_MIN_CHARS = 32  # the MACs are on the branch: a short key could be guessed offline
#: variables with our prefix that are not render settings (debugging, test tooling, secrets,
#: the companion controller's)
RESERVED_ENV = frozenset(
    {
        "DYN_GITOPS_DEBUG",
        "DYN_GITOPS_TEST_BINS",
        "DYN_GITOPS_TEST_BINS_CACHE",
        HYDRATE_KEY_ENV,
        OPERATOR_MAX_REPLICAS_ENV,
    }
)
ARGOCD_ENV_PREFIX = "ARGOCD_ENV_"
#: the Dynamo operator release dyn-gitops renders like (its defaulting webhook stamps it)
REFERENCE_OPERATOR_VERSION = "1.5.1"
#: setting origin-version: stamp nothing, render the DGD as applied (no webhook stamp)
NO_ORIGIN_STAMP = "none"


#: the largest value any limit takes (Kubernetes' int32 range): more is a typo, not a need
LIMIT_MAX = 2**31 - 1
#: the deepest nesting the renderer itself survives under Python's default recursion limit
DEPTH_MAX = 200

# Fixed bounds of what is read beside the manifests: no setting raises them, because the
# settings file and the ignore file are themselves the input they bound.
#: dyn-gitops.yaml (read before any setting applies)
SETTINGS_FILE_MAX_BYTES = 64 * 1024
#: .dyn-gitops-ignore (read.py) and its patterns with ``--exclude`` together (ignore.py)
IGNORE_FILE_MAX_BYTES = 64 * 1024
IGNORE_MAX_PATTERNS = 1_000
IGNORE_MAX_PATTERN_CHARS = 1_024

# The warm render server of the Argo CD plugin (argocd/server.py): its own bounds, set by
# whoever runs the sidecar (not render settings: a request cannot change them).
#: a forked child renders one request; more wait in the queue
WARM_SERVER_MAX_CHILDREN = max(2, (os.cpu_count() or 1) * 2)
#: complete requests waiting for a free child (each holds a connection, two descriptors and
#: its payload); one more is answered "busy" and its client renders in-process
WARM_SERVER_MAX_QUEUED = 64
#: connections still sending their request; more are answered "busy" meanwhile
WARM_SERVER_MAX_PENDING = 128
WARM_SERVER_MAX_REQUEST_BYTES = 16 * 1024 * 1024  # working directory + environment
WARM_SERVER_REQUEST_TIMEOUT_S = 10.0  # a client sends its whole request at once
WARM_SERVER_CHILD_TIMEOUT_S = 300  # a render takes seconds; Argo CD gives up long before
#: out of descriptors on accept(): stop accepting this long, doubling up to the maximum
WARM_SERVER_ACCEPT_BACKOFF_S = (0.05, 1.0)
#: the sidecar's init (argocd/init.py): how long the server has to exit after a stop signal
#: before it is killed. argocd-cmp-server removes its socket on SIGTERM and then never exits
#: (v3.5.3: nothing stops its gRPC server), so the sidecar stops after this long: well
#: within the 2 s a repo-server rollout should wait for it.
SIDECAR_STOP_GRACE_S = 1.0


# ---------------------------------------------------------------------------- value rules
# Each setting's type says what its value may be: what the API server accepts where the value
# lands in the output (a name, a label key, a namespace) or what the operator's own Go parser
# accepts (a duration, a URL, an enum), so that no source (dyn-gitops.yaml, the environment,
# a flag, an Argo CD parameter) renders an object the cluster would refuse. Every source's raw
# value is coerced by its kind first (:func:`_scalar`, :func:`_flag`, :func:`_whole`).
class Refused(ValueError):
    """A setting value refused: what was found and what is expected there (every setting
    problem reads ``found ..., expected ...``)."""

    def __init__(self, found: str, expected: str) -> None:
        super().__init__(f"found {found}, expected {expected}")


def _found(value: Any, *, sensitive: bool = False) -> str:
    """``value`` for a message: bounded, and not shown when it may hold a credential."""
    if isinstance(value, int) and value.bit_length() > 64:  # repr() refuses > 4300 digits
        return "a number too large to show"
    return describe(value, sensitive=sensitive)


def _scalar(raw: Any) -> str:
    """A text setting from a YAML scalar or a string (null is empty)."""
    if isinstance(raw, bool | list | dict):
        raise Refused(_found(raw), "a string")
    return "" if raw is None else str(raw)


def _flag(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise Refused(_found(raw), "true or false")


_WHOLE = re.compile(r"[+-]?[0-9]+")
_WHOLE_DIGITS_MAX = 4000


def _whole(raw: Any) -> int:
    """A whole number: an integer, or its decimal digits (no exponent, no '_')."""
    text = "" if isinstance(raw, bool) else str(raw).strip()
    if isinstance(raw, bool) or not _WHOLE.fullmatch(text):
        raise Refused(_found(raw), "a whole number")
    if len(text) > _WHOLE_DIGITS_MAX:  # beyond what int() converts; far beyond any limit
        raise Refused(_found(raw), f"a whole number of at most {_WHOLE_DIGITS_MAX} digits")
    return int(text)


@dataclass(frozen=True)
class Range:
    """A limit: a whole number from ``low`` to ``high``."""

    low: int
    high: int

    def __call__(self, value: int) -> int:
        if not self.low <= value <= self.high:
            raise Refused(_found(value), f"a limit from {self.low} to {self.high}")
        return value


@dataclass(frozen=True)
class Rule:
    """A value rule in a setting's type (``Annotated[str, NAMESPACE]``): run after the
    value's kind (:meth:`SettingSpec.parse`); it returns the value (normalized)
    or raises :class:`Refused`."""

    check: Callable[[Any], Any]


def _rule(expected: str, ok: Callable[[str], bool], *, optional: bool = False) -> Rule:
    """A text rule: ``ok`` says whether a value is accepted (``optional``: empty is unset)."""

    def check(text: str) -> str:
        if (optional and text == "") or ok(text):
            return text
        raise Refused(_found(text), expected)

    return Rule(check)


_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
#: Helm's own limit and rule for a release name (``chartutil.ValidateReleaseName``)
HELM_RELEASE_MAX = 53
#: a Grove topology level ends a label key ``nvidia.com/dynamo-topology.<level>``, whose
#: name part holds at most 63 characters
TOPOLOGY_LEVEL_MAX = LABEL_MAX - len(LABEL_TOPOLOGY_PREFIX.partition("/")[2])
_TOPOLOGY_LEVEL = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
#: a frontend's host is ``<prefix><DGD name>.<suffix>``, a DNS-1123 subdomain
HOST_SUFFIX_MAX = SUBDOMAIN_MAX - 2


def is_dns_label(text: str) -> bool:
    """A DNS-1123 label (``IsDNS1123Label``): a namespace, a volume name."""
    return len(text) <= LABEL_MAX and _LABEL.fullmatch(text) is not None


def _is_subdomain(text: str, max_len: int = SUBDOMAIN_MAX) -> bool:
    return len(text) <= max_len and _SUBDOMAIN.fullmatch(text) is not None


def _is_dns_name(text: str) -> bool:
    """Dot-separated DNS-1123 labels (a host name part)."""
    return len(text) <= HOST_SUFFIX_MAX and all(is_dns_label(p) for p in text.split("."))


def _is_istio_gateway(text: str) -> bool:
    """Istio's ``validateGatewayNames``: ``<namespace>/<name>``, both DNS-1123 labels, or
    (the legacy form) an FQDN of DNS-1123 labels, at most 255, its last label not a number."""
    namespace, slash, name = text.partition("/")
    if slash:
        return is_dns_label(namespace) and is_dns_label(name)
    labels = text.split(".")
    if labels[-1] == "":  # a trailing dot: an unambiguous FQDN
        labels.pop()
    if len(text) > 255 or (labels and labels[-1].isascii() and labels[-1].isdigit()):
        return False
    return bool(labels) and all(is_dns_label(p) for p in labels)


_LABEL_WORDS = "lower-case letters, digits and '-', starting and ending with a letter or digit"
_SUBDOMAIN_WORDS = (
    "lower-case letters, digits, '-' and '.', each part starting and ending with a letter or digit"
)
NAMESPACE = _rule(f"a namespace name: at most {LABEL_MAX} {_LABEL_WORDS}", is_dns_label)
HELM_RELEASE = _rule(
    f"a Helm release name: at most {HELM_RELEASE_MAX} {_SUBDOMAIN_WORDS} (the ClusterRoles "
    "<release>-dynamo-operator-planner and -epp are named after it)",
    lambda t: _is_subdomain(t, HELM_RELEASE_MAX),
)
SECRET_VOLUME = _rule(
    f"a Secret name that is also a pod volume name: at most {LABEL_MAX} {_LABEL_WORDS}",
    is_dns_label,
)
INGRESS_CLASS = _rule(
    f"an IngressClass name: at most {SUBDOMAIN_MAX} {_SUBDOMAIN_WORDS}",
    _is_subdomain,
    optional=True,
)
SECRET_NAME = _rule(
    f"a Secret name: at most {SUBDOMAIN_MAX} {_SUBDOMAIN_WORDS}", _is_subdomain, optional=True
)
HOST_SUFFIX = _rule(
    f"a DNS name of at most {HOST_SUFFIX_MAX} characters (hosts are <name>.<suffix>): "
    f"dot-separated parts of at most {LABEL_MAX} {_LABEL_WORDS}",
    _is_dns_name,
    optional=True,
)
ISTIO_GATEWAY = _rule(
    f"an Istio gateway: <namespace>/<name>, each at most {LABEL_MAX} {_LABEL_WORDS}, or a DNS name",
    _is_istio_gateway,
    optional=True,
)


def go_duration(text: str) -> str:
    """A Go duration (``time.ParseDuration``: ``15m``, ``1.5h``, ``300ms``) in Go's own
    spelling (``15m0s``), as a ``metav1.Duration`` serializes; ValueError if Go refuses it."""
    return goparse.format_duration(goparse.parse_duration(text.strip()))


def _termination_delay(text: str) -> str:
    """The operator's ``orchestrators.grove.terminationDelay``: a Go duration, not negative
    (its config validation); 0 sets none."""
    try:
        ns = goparse.parse_duration(text.strip())
    except ValueError:
        ns = -1
    if ns < 0:
        raise Refused(
            _found(text),
            "a Go duration such as 15m, 4h or 1h30m (units ns, us, ms, s, m, h) from 0s to "
            f"{goparse.format_duration(goparse.MAX_DURATION_NS)}",
        )
    return goparse.format_duration(ns)


def _origin_version(text: str) -> str:
    """A version the operator's webhook accepts as the origin version, or ``none``."""
    try:
        ok = text == NO_ORIGIN_STAMP or parse_origin(text) is not None
    except ValueError:  # more digits than Python converts
        ok = False
    if not ok:
        raise Refused(_found(text), f"a version such as 1.5.1, or {NO_ORIGIN_STAMP}")
    return text


def _topology_levels(text: str) -> str:
    """Comma-separated levels of a Grove ClusterTopologyBinding: each one a topology domain
    that makes a label key and a downward-API file name, none twice."""
    levels = [d.strip() for d in text.split(",") if d.strip()]
    expected = (
        f"comma-separated levels, each at most {TOPOLOGY_LEVEL_MAX} {_LABEL_WORDS} (the "
        f"label key {LABEL_TOPOLOGY_PREFIX}<level>), each once"
    )
    for i, level in enumerate(levels):
        if len(level) > TOPOLOGY_LEVEL_MAX or not _TOPOLOGY_LEVEL.fullmatch(level):
            raise Refused(f"the level {_found(level)}", expected)
        if level in levels[:i]:
            raise Refused(f"the level {_found(level)} twice", expected)
    return text


def _go_url(text: str) -> str:
    """The operator's ``infrastructure.modelExpressURL``: what Go's ``url.Parse`` accepts
    (its config validation). Never echoed: a URL may carry a password."""
    why = goparse.url_problem(text)
    if why is not None:
        raise Refused(_found(text, sensitive=True), f"a URL that Go's url.Parse accepts ({why})")
    return text


DURATION = Rule(_termination_delay)
ORIGIN_VERSION = Rule(_origin_version)
TOPOLOGY_LEVELS = Rule(_topology_levels)
GO_URL = Rule(_go_url)
LIMIT = Rule(Range(1, LIMIT_MAX))
DEPTH_LIMIT = Rule(Range(1, DEPTH_MAX))


def _setting(default: Any, help: str, *, group: str = "render") -> Any:
    return field(default=default, metadata={"help": help, "group": group})


@dataclass(frozen=True)
class RenderSettings:
    """Resolved render settings (see the module docstring for how each is spelled)."""

    namespace: Annotated[str, NAMESPACE] = _setting(
        "default",
        "Namespace for objects that do not set metadata.namespace "
        "(Argo CD: the Application's destination namespace).",
    )
    discovery_backend: Literal["kubernetes", "etcd"] = _setting(
        "kubernetes",
        "Dynamo discovery backend when a DGD does not set the "
        "nvidia.com/dynamo-discovery-backend annotation (operator config discovery.backend).",
    )
    managed_replicas: bool = _setting(
        True,
        "Leave spec.replicas of worker Deployments to the companion controller: record the "
        "desired count in an annotation and mark them not to be pruned by Argo CD / Flux.",
    )
    emit_source: bool = _setting(
        True, "Emit the source DynamoGraphDeployments beside the expanded objects."
    )
    nvidia_objects: Literal["emit", "omit"] = _setting(
        "emit",
        "nvidia.com objects in the output: emit (the source DGDs, as setting emit-source "
        "says, scaling adapters and nvidia.com objects of the input) or omit (none: for a "
        "namespace where a Dynamo operator would act on them, i.e. a cluster-wide operator "
        "without a live namespace-scope lease there; the DGD is rendered but not emitted, "
        "and a scaling adapter or a nvidia.com object in the input is refused).",
    )
    source_api_version: Literal["v1beta1", "v1alpha1", "as-written"] = _setting(
        "v1beta1",
        "API version of the emitted source DGDs: v1beta1 (what Dynamo 1.5 stores and the "
        "dyn-gitops CRDs serve; a v1alpha1 DGD is converted as the operator's conversion "
        "webhook does, its v1alpha1-only fields in the nvidia.com/dgd-spec annotation), "
        "v1alpha1 (for clusters whose DGD CRD does not serve v1beta1; a v1beta1 DGD is "
        "emitted as the v1alpha1 DGD it renders like), or as-written.",
    )
    runtime_version_admission: Literal["strict", "lenient"] = _setting(
        "strict",
        "Dynamo 1.5 admission of each component's runtime version: strict (as the 1.5 "
        "webhook: every component needs a main-container image whose tag is a semantic "
        "version such as 1.5.1, or a runtimeVersionOverride; a standalone DCD other than an "
        "EPP needs no override, and an object whose nvidia.com/dynamo-operator-origin-version "
        "is older than 1.5.0 is admitted with warnings) or lenient (accept any image, or "
        "none, as for a DGD created before 1.5). A version that does not resolve renders the "
        "legacy profile, every runtime gate off.",
    )
    origin_version: Annotated[str, ORIGIN_VERSION] = _setting(
        REFERENCE_OPERATOR_VERSION,
        "Operator version stamped as nvidia.com/dynamo-operator-origin-version on a DGD that "
        "has none, as the 1.5 defaulting webhook does on create (it gates e.g. vLLM "
        "multinode: multiprocessing from 1.0.0, Ray before); the DGD's own annotation wins. "
        f"'{NO_ORIGIN_STAMP}': no stamp, render the DGD as applied.",
    )
    output_format: Literal["yaml", "json"] = _setting(
        "yaml", "Output format: a YAML stream, or a JSON List.", group="output"
    )
    allow_empty: bool = _setting(
        False,
        "Allow an empty output (refused by default: empty output plus auto-prune "
        "deletes workloads).",
        group="output",
    )
    ingress_class: Annotated[str, INGRESS_CLASS] = _setting(
        "",
        "Ingress controller class for frontends without their own ingress "
        "(operator config ingress.controllerClassName).",
    )
    ingress_tls_secret: Annotated[str, SECRET_NAME] = _setting(
        "", "TLS secret for default ingresses (ingress.controllerTLSSecretName)."
    )
    ingress_host_suffix: Annotated[str, HOST_SUFFIX] = _setting(
        "",
        "Host suffix for ingresses and VirtualServices (ingress.hostSuffix; empty means 'local').",
    )
    istio_gateway: Annotated[str, ISTIO_GATEWAY] = _setting(
        "", "Istio gateway for VirtualServices (ingress.virtualServiceGateway)."
    )
    lws: bool = _setting(
        False, "LeaderWorkerSet (with Volcano) is installed: multinode services use it."
    )
    grove: bool = _setting(
        False, "Grove is enabled: DGDs not annotated nvidia.com/enable-grove=false use it."
    )
    dra: bool = _setting(
        False,
        "Dynamic Resource Allocation (resource.k8s.io/v1, Kubernetes 1.34+) is served: "
        "services with gpuMemoryService get their GPUs through a ResourceClaimTemplate "
        "(the operator refuses gpuMemoryService without it).",
    )
    grove_safe_rollout: bool = _setting(
        True,
        "With managed-replicas and the source DGD emitted: a PodCliqueSet without scaling "
        "groups (no multinode service) and whose DGD sets no nvidia.com/grove-update-strategy "
        "gets updateStrategy OnDelete, so the companion controller replaces its pods with a "
        "surge and a clique never has zero ready pods (Grove's RollingRecreate deletes first). "
        "Off: Grove's default, as the operator renders it.",
    )
    grove_termination_delay: Annotated[str, DURATION] = _setting(
        "15m0s",
        "Grove PodCliqueSet terminationDelay (operator config "
        "orchestrators.grove.terminationDelay; Go duration such as 15m or 4h).",
    )
    kai_scheduler: bool = _setting(
        False,
        "The Kai scheduler is enabled: Grove cliques use it, with the queue from the "
        "DGD annotation nvidia.com/kai-scheduler-queue (default dynamo).",
    )
    grove_topology_domains: Annotated[str, TOPOLOGY_LEVELS] = _setting(
        "",
        "Comma-separated levels (domains, in order) of the Grove ClusterTopologyBinding that "
        "spec.experimental.kvTransferPolicy.clusterTopologyName names; the operator reads "
        "them from the cluster, dyn-gitops from here.",
    )
    volcano_scheduler: bool = _setting(
        False,
        "The Volcano scheduler integration is enabled (operator config "
        "orchestrators.volcanoScheduler.enabled): Grove cliques use the volcano scheduler, "
        "and the DGD annotation nvidia.com/volcano-queue names the PodCliqueSet's queue. "
        "Not together with kai-scheduler.",
    )
    operator_release: Annotated[str, HELM_RELEASE] = _setting(
        "dynamo-platform",
        "Helm release name of the Dynamo platform; names the planner and "
        "EPP ClusterRoles (<release>-dynamo-operator-planner).",
    )
    planner_rbac: bool = _setting(
        True,
        "Emit planner-serviceaccount and its RoleBinding in every DGD namespace, as the "
        "operator does in cluster-wide mode.",
    )
    namespace_shared: Literal["emit", "omit", "only"] = _setting(
        "emit",
        "Objects every graph of a namespace shares (planner-serviceaccount, "
        "epp-serviceaccount and their RoleBindings): emit them (one Argo CD Application per "
        "namespace), omit them (another Application owns them), or emit only them (the "
        "Application that owns them; docs/argocd.md, one owner per namespace).",
    )
    mpi_ssh_secret: Annotated[str, SECRET_VOLUME] = _setting(
        "mpi-run-ssh-secret", "Secret holding the MPI SSH key for multinode TRT-LLM."
    )
    nats_address: str = _setting("", "NATS_SERVER injected into every component, if set.")
    etcd_address: str = _setting("", "ETCD_ENDPOINTS injected into every component, if set.")
    model_express_url: Annotated[str, GO_URL] = _setting("", "MODEL_EXPRESS_URL injected, if set.")
    prometheus_endpoint: str = _setting("", "PROMETHEUS_ENDPOINT injected, if set.")
    # transport TLS certificate paths (operator config infrastructure.*, #13689 in 1.5.0):
    # injected as env into the main container and frontend sidecar of every DGD pod
    nats_tls_ca_path: str = _setting(
        "", "NATS_TLS_CA_CERT_PATH injected, if set (infrastructure.natsTLSCAPath)."
    )
    nats_tls_client_cert_path: str = _setting(
        "", "NATS_TLS_CLIENT_CERT_PATH injected, if set (infrastructure.natsTLSClientCertPath)."
    )
    nats_tls_client_key_path: str = _setting(
        "", "NATS_TLS_CLIENT_KEY_PATH injected, if set (infrastructure.natsTLSClientKeyPath)."
    )
    tcp_tls_cert_path: str = _setting(
        "", "DYN_TCP_TLS_CERT_PATH injected, if set (infrastructure.tcpTLSCertPath)."
    )
    tcp_tls_key_path: str = _setting(
        "", "DYN_TCP_TLS_KEY_PATH injected, if set (infrastructure.tcpTLSKeyPath)."
    )
    tcp_tls_ca_path: str = _setting(
        "", "DYN_TCP_TLS_CA_CERT_PATH injected, if set (infrastructure.tcpTLSCAPath)."
    )
    tcp_tls_client_cert_path: str = _setting(
        "", "DYN_TCP_TLS_CLIENT_CERT_PATH injected, if set (infrastructure.tcpTLSClientCertPath)."
    )
    tcp_tls_client_key_path: str = _setting(
        "", "DYN_TCP_TLS_CLIENT_KEY_PATH injected, if set (infrastructure.tcpTLSClientKeyPath)."
    )
    tcp_tls_client_ca_path: str = _setting(
        "",
        "DYN_TCP_TLS_CLIENT_CA_CERT_PATH injected, if set (infrastructure.tcpTLSClientCAPath).",
    )
    tcp_tls_server_name: str = _setting(
        "", "DYN_TCP_TLS_SERVER_NAME injected, if set (infrastructure.tcpTLSServerName)."
    )
    service_mesh: Literal["", "istio"] = _setting(
        "",
        "Service mesh the operator integrates with (serviceMesh.provider, enabled, and its "
        "DestinationRule API served): istio gives every EPP Service an Istio DestinationRule.",
    )
    istio_tls_mode: Literal["SIMPLE", "DISABLE", "ISTIO_MUTUAL", "MUTUAL"] = _setting(
        "SIMPLE", "TLS mode of the EPP DestinationRules (serviceMesh.istio.tlsMode)."
    )
    istio_insecure_skip_verify: bool = _setting(
        True,
        "EPP DestinationRules skip verifying the EPP's certificate "
        "(serviceMesh.istio.insecureSkipVerify).",
    )
    istio_client_certificate: str = _setting(
        "",
        "Client certificate path in the istio-proxy for MUTUAL TLS "
        "(serviceMesh.istio.clientCertificate).",
    )
    istio_private_key: str = _setting(
        "",
        "Client private key path in the istio-proxy for MUTUAL TLS (serviceMesh.istio.privateKey).",
    )
    istio_ca_certificates: str = _setting(
        "",
        "CA certificates path in the istio-proxy for MUTUAL TLS "
        "(serviceMesh.istio.caCertificates).",
    )
    max_file_bytes: Annotated[int, LIMIT] = _setting(
        8 * 1024 * 1024, "Largest input file accepted, in bytes.", group="limits"
    )
    max_documents: Annotated[int, LIMIT] = _setting(
        20_000, "Most YAML documents accepted in one run.", group="limits"
    )
    max_yaml_nodes: Annotated[int, LIMIT] = _setting(
        200_000, "Most YAML nodes one document may expand to through aliases.", group="limits"
    )
    max_total_yaml_nodes: Annotated[int, LIMIT] = _setting(
        2_000_000,
        "Most YAML nodes all documents of one run may expand to, aliases "
        "included (many small alias bombs add up).",
        group="limits",
    )
    max_depth: Annotated[int, DEPTH_LIMIT] = _setting(
        100,
        "Deepest nesting of mappings and lists accepted in any YAML or JSON input, "
        "checked before the document is built.",
        group="limits",
    )
    max_objects: Annotated[int, LIMIT] = _setting(
        200_000, "Most objects one run may output.", group="limits"
    )
    max_output_bytes: Annotated[int, LIMIT] = _setting(
        256 * 1024 * 1024, "Largest output of one run, in bytes.", group="limits"
    )
    max_replicas: Annotated[int, LIMIT] = _setting(
        10_000,
        "Largest replicas a service may ask for (also its minAvailable, autoscaling "
        "minReplicas/maxReplicas and DYN_DEPLOYMENT_CONFIG workers).",
        group="limits",
    )
    max_node_count: Annotated[int, LIMIT] = _setting(
        1_024, "Largest multinode.nodeCount a service may ask for.", group="limits"
    )

    # -- helpers -------------------------------------------------------------------------------
    @property
    def operator_fullname(self) -> str:
        """Helm fullname of the Dynamo operator, as its chart computes it."""
        rel = self.operator_release
        name = rel if "dynamo-operator" in rel else f"{rel}-dynamo-operator"
        return name[:63].rstrip("-")


#: how a raw value becomes the setting's kind (text for the rest)
_BEFORE: dict[type, Callable[[Any], Any]] = {bool: _flag, int: _whole}


@dataclass(frozen=True)
class SettingSpec:
    """A setting's registry entry, derived from a :class:`RenderSettings` field."""

    attr: str
    default: Any
    help: str
    group: str
    kind: type
    choices: tuple[str, ...] | None
    base: Any = str  # the field's type without its rules (a Literal for a choice)
    rules: tuple[Rule, ...] = ()  # its value rules, in order
    maximum: int | None = None  # limits only: the most even the runner may set

    @property
    def is_limit(self) -> bool:
        """A limit: only the runner may raise it (see the module docstring)."""
        return self.group == "limits"

    @property
    def name(self) -> str:
        return self.attr.replace("_", "-")

    @property
    def cli_flag(self) -> str:
        return f"--{self.name}"

    @property
    def env_var(self) -> str:
        return ENV_PREFIX + self.attr.upper()

    @property
    def argocd_env(self) -> str:
        return ARGOCD_ENV_PREFIX + self.env_var

    @property
    def cmp_parameter(self) -> str:
        return self.name

    @property
    def yaml_key(self) -> str:
        return self.name

    def parse(self, raw: Any) -> Any:
        """The typed value of a raw one (a string from the environment or a flag, a YAML
        scalar), checked against the field's type: its kind (coerced from a string or a
        YAML scalar), its choices (a ``Literal``), then its rules in order; :class:`Refused`
        says what was found and what is expected. (The type's parts are run here rather than
        by a pydantic ``TypeAdapter``, whose building costs a one-shot render its start-up.)"""
        before: Callable[[Any], Any] = _BEFORE.get(self.kind) or _scalar
        value = before(raw)
        if self.choices is not None and value not in self.choices:
            shown = ", ".join(c or '""' for c in self.choices)
            raise Refused(_found(value), f"one of {shown}")
        for rule in self.rules:
            value = rule.check(value)
        return value


def prebuild_validators() -> None:
    """Check every setting's default against its type (a warm server, before it forks its
    renders: a default that its own rules refuse fails there, not in a render)."""
    for spec in REGISTRY:
        spec.parse(spec.default)


def _spec_of(f: dataclasses.Field[Any]) -> SettingSpec:
    # the annotation itself, not its text: this module does not postpone annotations, so
    # that the registry is built without evaluating 32 strings on every start
    base: Any = f.type
    rules: tuple[Rule, ...] = ()
    if get_origin(base) is Annotated:  # its value rules (see "value rules" above)
        base, *rest = get_args(base)
        rules = tuple(r for r in rest if isinstance(r, Rule))
    choices: tuple[str, ...] | None = None
    kind: type
    if get_origin(base) is Literal:
        choices = tuple(str(a) for a in get_args(base))
        kind = str
    elif isinstance(base, type):
        kind = base
    else:  # a string: annotations are postponed again (from __future__ import annotations)
        raise TypeError(f"setting {f.name}: annotation {f.type!r} is not a type")
    ranges = [r.check for r in rules if isinstance(r.check, Range)]
    return SettingSpec(
        attr=f.name,
        default=f.default,
        help=f.metadata["help"],
        group=f.metadata["group"],
        kind=kind,
        choices=choices,
        base=base,
        rules=rules,
        maximum=ranges[0].high if ranges else None,
    )


REGISTRY: tuple[SettingSpec, ...] = tuple(_spec_of(f) for f in dataclasses.fields(RenderSettings))
BY_NAME: dict[str, SettingSpec] = {s.name: s for s in REGISTRY}


class SettingsError(UsageError):
    """A bad setting value or an unknown setting name; carries every problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems), problems)


@dataclass(frozen=True)
class Resolved:
    settings: RenderSettings
    origins: dict[str, str]  # setting name -> where its value came from


#: the sources of setting values, in precedence order (later wins), and whether whoever runs
#: the tool controls them (True: may set any limit) or they come with the input (False: the
#: repository or the Argo CD Application; may only lower a limit). The one place that says so.
RUNNER_SOURCES: dict[str, bool] = {
    SETTINGS_FILE: False,  # file_values: the repository
    ENV_PREFIX: True,  # the runner's process environment (CLI, CI, the Argo CD sidecar)
    ARGOCD_ENV_PREFIX + ENV_PREFIX: False,  # spec.source.plugin.env of the Application
    "functionConfig": False,  # KRM: written beside the input (kustomization, Kptfile)
    "parameter": False,  # Argo CD: spec.source.plugin.parameters of the Application
    "flag": True,  # the command line
}


@dataclass(frozen=True)
class FileValue:
    """A value as written in a ``dyn-gitops.yaml`` (the root's or a subtree's): the file and
    the line of its key, where every problem with it is reported."""

    raw: Any
    file: str = SETTINGS_FILE
    line: int = 0  # 0: not known (a mapping given in code)

    @property
    def at(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class _Value:
    name: str
    raw: Any
    origin: str  # for `dyn-gitops settings`
    source: str  # a key of RUNNER_SOURCES
    where: str  # for a problem: file:line, or the variable, parameter or flag


def _suggest(name: str) -> str:
    import difflib  # only for a typo (its import costs every start ~1 ms)

    close = difflib.get_close_matches(name, list(BY_NAME), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _from_file(file_values: Mapping[str, Any] | None, file_origin: str) -> list[_Value]:
    out = []
    for key, raw in (file_values or {}).items():
        fv = raw if isinstance(raw, FileValue) else FileValue(raw, file_origin)
        out.append(_Value(str(key), fv.raw, f"{fv.file} key {key}", SETTINGS_FILE, fv.at))
    return out


def _values(
    file_values: Mapping[str, Any] | None,
    file_origin: str,
    env: Mapping[str, str] | None,
    env_prefixes: tuple[str, ...],
    function_config: Mapping[str, Any] | None,
    parameters: Mapping[str, str] | None,
    flags: Mapping[str, Any] | None,
) -> list[_Value]:
    """Every raw value given, lowest precedence first, each with its source."""
    out = _from_file(file_values, file_origin)
    for prefix in env_prefixes:
        if prefix not in RUNNER_SOURCES:
            raise ValueError(f"no trust is declared for variables {prefix}*")
        for var, raw in sorted((env or {}).items()):
            if var.startswith(prefix) and var.removeprefix(ARGOCD_ENV_PREFIX) not in RESERVED_ENV:
                name = var[len(prefix) :].lower().replace("_", "-")
                out.append(_Value(name, raw, f"environment {var}", prefix, f"environment {var}"))
    named: list[tuple[Mapping[str, Any] | None, str, str]] = [
        (function_config, "functionConfig", "functionConfig {}"),
        (parameters, "parameter", "parameter {}"),
        (flags, "flag", "flag --{}"),
    ]
    for given, source, spelled in named:
        for key, raw in (given or {}).items():
            if raw is not None or source != "flag":
                where = spelled.format(key)
                out.append(_Value(str(key), raw, where, source, where))
    return out


def _above_ceiling(v: _Value, value: int, ceiling: int, ceiling_origin: str) -> str:
    spec = BY_NAME[v.name]
    by = "the default" if ceiling_origin == "default" else ceiling_origin
    return (
        f"{v.where}: {spec.name}: found {value}, expected at most {ceiling} ({by}): "
        "settings that come with the input (dyn-gitops.yaml, KRM functionConfig, Argo CD "
        "parameters and plugin env) may only lower a limit; whoever runs dyn-gitops "
        f"raises it with {spec.cli_flag} or {spec.env_var} (Argo CD: in the sidecar's "
        "environment)"
    )


def _parsed(values: list[_Value], problems: list[str]) -> list[tuple[_Value, Any]]:
    """Each value of a known setting that passes its rule; a problem for every other."""
    given: list[tuple[_Value, Any]] = []
    for v in values:
        spec = BY_NAME.get(v.name)
        if spec is None:
            problems.append(f"{v.where}: unknown setting {v.name!r}{_suggest(v.name)}")
            continue
        try:
            given.append((v, spec.parse(v.raw)))
        except ValueError as exc:
            problems.append(f"{v.where}: {v.name}: {exc}")
    return given


def resolve(
    *,
    file_values: Mapping[str, Any] | None = None,
    file_origin: str = SETTINGS_FILE,
    env: Mapping[str, str] | None = None,
    env_prefixes: tuple[str, ...] = (ENV_PREFIX,),
    function_config: Mapping[str, Any] | None = None,
    parameters: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Resolved:
    """Resolve every setting from its sources; raise :class:`SettingsError` with all problems.

    ``file_values`` come from ``dyn-gitops.yaml`` (raw, or :class:`FileValue` with their file
    and line; a raw one is reported at ``file_origin``), ``function_config`` from a KRM
    functionConfig, ``parameters`` from Argo CD Application parameters, ``flags`` from the
    command line; all are keyed by setting name (kebab-case). ``env`` is a whole environment;
    only variables with one of ``env_prefixes`` are read. Which of them may raise a limit is
    :data:`RUNNER_SOURCES`; a value from any other above the runner's is a problem.
    """
    problems: list[str] = []
    raw = _values(file_values, file_origin, env, env_prefixes, function_config, parameters, flags)
    given = _parsed(raw, problems)
    values: dict[str, Any] = {s.name: s.default for s in REGISTRY}
    origins: dict[str, str] = {s.name: "default" for s in REGISTRY}
    ceilings: dict[str, tuple[Any, str]] = {s.name: (s.default, "default") for s in REGISTRY}
    for v, parsed in given:
        values[v.name], origins[v.name] = parsed, v.origin
        if RUNNER_SOURCES[v.source]:
            ceilings[v.name] = (parsed, v.origin)
    for v, parsed in given:
        ceiling, ceiling_origin = ceilings[v.name]
        if BY_NAME[v.name].is_limit and not RUNNER_SOURCES[v.source] and parsed > ceiling:
            problems.append(_above_ceiling(v, parsed, ceiling, ceiling_origin))
    settings = RenderSettings(**{s.attr: values[s.name] for s in REGISTRY})
    problems += setting_conflicts(settings)  # of the values that passed: all in one run
    if problems:
        raise SettingsError(problems)
    for v, _ in given:  # show the runner's ceiling beside a limit the input lowered
        spec = BY_NAME[v.name]
        if spec.is_limit and origins[v.name] == v.origin and not RUNNER_SOURCES[v.source]:
            ceiling, ceiling_origin = ceilings[v.name]
            origins[v.name] = f"{v.origin} (at most {ceiling}: {ceiling_origin})"
    return Resolved(settings, origins)


def setting_conflicts(s: RenderSettings) -> list[str]:
    """Combinations the operator refuses to start with (``validateInfrastructure`` and
    ``validateServiceMesh`` of its config validation, 1.5.0 #13689): each would render pods
    whose transport TLS cannot connect, or a DestinationRule Istio rejects."""
    out: list[str] = []

    def both_or_neither(a: str, b: str) -> None:
        if bool(getattr(s, a)) != bool(getattr(s, b)):
            out.append(f"settings {_name(a)} and {_name(b)} must be set together")

    both_or_neither("tcp_tls_client_cert_path", "tcp_tls_client_key_path")
    both_or_neither("nats_tls_client_cert_path", "nats_tls_client_key_path")
    both_or_neither("tcp_tls_cert_path", "tcp_tls_key_path")
    server = bool(s.tcp_tls_cert_path and s.tcp_tls_key_path)
    if server and not s.tcp_tls_ca_path:
        out.append("setting tcp-tls-ca-path is required with tcp-tls-cert-path and key-path")
    client = s.tcp_tls_ca_path or s.tcp_tls_client_cert_path or s.tcp_tls_client_key_path
    if (client or s.tcp_tls_client_ca_path) and not server:
        out.append(
            "settings tcp-tls-cert-path and tcp-tls-key-path are required with any other "
            "tcp-tls setting (every pod is both a TCP client and server)"
        )
    if s.tcp_tls_client_cert_path and not s.tcp_tls_ca_path:
        out.append("setting tcp-tls-client-cert-path requires tcp-tls-ca-path")
    if s.nats_tls_client_cert_path and not s.nats_tls_ca_path:
        out.append("setting nats-tls-client-cert-path requires nats-tls-ca-path")
    if s.tcp_tls_server_name and not s.tcp_tls_ca_path:
        out.append("setting tcp-tls-server-name requires tcp-tls-ca-path")
    nats_tls = s.nats_tls_ca_path or s.nats_tls_client_cert_path or s.nats_tls_client_key_path
    if nats_tls and not s.nats_address.startswith("tls://"):
        out.append("setting nats-address must be a tls:// address when NATS TLS is configured")
    if s.service_mesh == "istio" and s.istio_tls_mode == "MUTUAL":
        for attr in ("istio_client_certificate", "istio_private_key"):
            if not getattr(s, attr):
                out.append(f"setting {_name(attr)} is required when istio-tls-mode is MUTUAL")
    return out


def _name(attr: str) -> str:
    return attr.replace("_", "-")
