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
"""

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin

from .errors import UsageError
from .objpath import dns_label
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


def _setting(default: Any, help: str, *, group: str = "render", maximum: int | None = None) -> Any:
    meta: dict[str, Any] = {"help": help, "group": group}
    if group == "limits":
        meta["maximum"] = LIMIT_MAX if maximum is None else maximum
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class RenderSettings:
    """Resolved render settings (see the module docstring for how each is spelled)."""

    namespace: str = _setting(
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
        "version such as 1.5.1, or a runtimeVersionOverride) or lenient (accept any image, or "
        "none, as for a DGD created before 1.5; a version that does not resolve renders the "
        "legacy profile, every runtime gate off).",
    )
    origin_version: str = _setting(
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
    ingress_class: str = _setting(
        "",
        "Ingress controller class for frontends without their own ingress "
        "(operator config ingress.controllerClassName).",
    )
    ingress_tls_secret: str = _setting(
        "", "TLS secret for default ingresses (ingress.controllerTLSSecretName)."
    )
    ingress_host_suffix: str = _setting(
        "",
        "Host suffix for ingresses and VirtualServices (ingress.hostSuffix; empty means 'local').",
    )
    istio_gateway: str = _setting(
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
    grove_termination_delay: str = _setting(
        "15m0s",
        "Grove PodCliqueSet terminationDelay (operator config "
        "orchestrators.grove.terminationDelay; Go duration such as 15m or 4h).",
    )
    kai_scheduler: bool = _setting(
        False,
        "The Kai scheduler is enabled: Grove cliques use it, with the queue from the "
        "DGD annotation nvidia.com/kai-scheduler-queue (default dynamo).",
    )
    grove_topology_domains: str = _setting(
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
    operator_release: str = _setting(
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
    mpi_ssh_secret: str = _setting(
        "mpi-run-ssh-secret", "Secret holding the MPI SSH key for multinode TRT-LLM."
    )
    nats_address: str = _setting("", "NATS_SERVER injected into every component, if set.")
    etcd_address: str = _setting("", "ETCD_ENDPOINTS injected into every component, if set.")
    model_express_url: str = _setting("", "MODEL_EXPRESS_URL injected, if set.")
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
    max_file_bytes: int = _setting(
        8 * 1024 * 1024, "Largest input file accepted, in bytes.", group="limits"
    )
    max_documents: int = _setting(
        20_000, "Most YAML documents accepted in one run.", group="limits"
    )
    max_yaml_nodes: int = _setting(
        200_000, "Most YAML nodes one document may expand to through aliases.", group="limits"
    )
    max_total_yaml_nodes: int = _setting(
        2_000_000,
        "Most YAML nodes all documents of one run may expand to, aliases "
        "included (many small alias bombs add up).",
        group="limits",
    )
    max_depth: int = _setting(
        100,
        "Deepest nesting of mappings and lists accepted in any YAML or JSON input, "
        "checked before the document is built.",
        group="limits",
        maximum=DEPTH_MAX,
    )
    max_objects: int = _setting(200_000, "Most objects one run may output.", group="limits")
    max_output_bytes: int = _setting(
        256 * 1024 * 1024, "Largest output of one run, in bytes.", group="limits"
    )
    max_replicas: int = _setting(
        10_000,
        "Largest replicas a service may ask for (also its minAvailable, autoscaling "
        "minReplicas/maxReplicas and DYN_DEPLOYMENT_CONFIG workers).",
        group="limits",
    )
    max_node_count: int = _setting(
        1_024, "Largest multinode.nodeCount a service may ask for.", group="limits"
    )

    # -- helpers -------------------------------------------------------------------------------
    @property
    def operator_fullname(self) -> str:
        """Helm fullname of the Dynamo operator, as its chart computes it."""
        rel = self.operator_release
        name = rel if "dynamo-operator" in rel else f"{rel}-dynamo-operator"
        return name[:63].rstrip("-")


@dataclass(frozen=True)
class SettingSpec:
    """A setting's registry entry, derived from a :class:`RenderSettings` field."""

    attr: str
    default: Any
    help: str
    group: str
    kind: type
    choices: tuple[str, ...] | None
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
        """Turn a raw value (string from env/flags, or a YAML scalar) into the typed value."""
        if self.kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("true", "yes", "on", "1"):
                return True
            if text in ("false", "no", "off", "0"):
                return False
            raise ValueError(f"expected true or false, found {raw!r}")
        if self.kind is int:
            if isinstance(raw, bool):
                raise ValueError(f"expected a whole number, found {raw!r}")
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise ValueError(f"expected a whole number, found {raw!r}") from None
            if value < 0:
                raise ValueError(f"expected a number >= 0, found {value}")
            if self.maximum is not None and not 1 <= value <= self.maximum:
                raise ValueError(f"expected a limit from 1 to {self.maximum}, found {value}")
            return value
        if isinstance(raw, bool | list | dict):
            raise ValueError(f"expected a string, found {raw!r}")
        text = "" if raw is None else str(raw)
        if self.choices is not None and text not in self.choices:
            raise ValueError(f"expected one of {', '.join(self.choices)}, found {text!r}")
        normalize = _NORMALIZERS.get(self.attr)
        return normalize(text) if normalize is not None else text


_DURATION_PART = re.compile(r"(\d+)(h|m|s)")


def go_duration(text: str) -> str:
    """A whole-second Go duration (``15m``, ``4h``, ``1h30m``) in Go's own spelling
    (``15m0s``), as a ``metav1.Duration`` serializes."""
    t = text.strip()
    parts = _DURATION_PART.findall(t)
    if not t or "".join(n + u for n, u in parts) != t:
        raise ValueError(f"expected a duration such as 15m, 4h or 1h30m, found {text!r}")
    total = sum(int(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    h, rest = divmod(total, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m}m{sec}s"
    return f"{m}m{sec}s" if m else f"{sec}s"


def namespace_name(text: str) -> str:
    """A namespace as the API server accepts it (a DNS-1123 label); it names output
    directories too, so it is checked whatever the source."""
    why = dns_label(text)
    if why:
        raise ValueError(f"not a valid namespace: {why}")
    return text


def origin_version(text: str) -> str:
    """A version the operator's webhook accepts as the origin version, or ``none``."""
    if text != NO_ORIGIN_STAMP and parse_origin(text) is None:
        raise ValueError(f"expected a version such as 1.5.1, or {NO_ORIGIN_STAMP}, found {text!r}")
    return text


_NORMALIZERS = {
    "grove_termination_delay": go_duration,
    "namespace": namespace_name,
    "origin_version": origin_version,
}


def _spec_of(f: dataclasses.Field[Any]) -> SettingSpec:
    # the annotation itself, not its text: this module does not postpone annotations, so
    # that the registry is built without evaluating 32 strings on every start
    annotation = f.type
    choices: tuple[str, ...] | None = None
    kind: type
    if get_origin(annotation) is Literal:
        choices = tuple(str(a) for a in get_args(annotation))
        kind = str
    elif isinstance(annotation, type):
        kind = annotation
    else:  # a string: annotations are postponed again (from __future__ import annotations)
        raise TypeError(f"setting {f.name}: annotation {annotation!r} is not a type")
    return SettingSpec(
        attr=f.name,
        default=f.default,
        help=f.metadata["help"],
        group=f.metadata["group"],
        kind=kind,
        choices=choices,
        maximum=f.metadata.get("maximum"),
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
class _Value:
    name: str
    raw: Any
    origin: str  # for messages and `dyn-gitops settings`
    source: str  # a key of RUNNER_SOURCES


def _suggest(name: str) -> str:
    import difflib  # only for a typo (its import costs every start ~1 ms)

    close = difflib.get_close_matches(name, list(BY_NAME), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


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
    out = [
        _Value(str(k), raw, f"{file_origin} key {k}", SETTINGS_FILE)
        for k, raw in (file_values or {}).items()
    ]
    for prefix in env_prefixes:
        if prefix not in RUNNER_SOURCES:
            raise ValueError(f"no trust is declared for variables {prefix}*")
        for var, raw in sorted((env or {}).items()):
            if var.startswith(prefix) and var.removeprefix(ARGOCD_ENV_PREFIX) not in RESERVED_ENV:
                name = var[len(prefix) :].lower().replace("_", "-")
                out.append(_Value(name, raw, f"environment {var}", prefix))
    out += [
        _Value(str(k), raw, f"functionConfig {k}", "functionConfig")
        for k, raw in (function_config or {}).items()
    ]
    out += [
        _Value(name, raw, f"parameter {name}", "parameter")
        for name, raw in (parameters or {}).items()
    ]
    out += [
        _Value(name, raw, f"flag --{name}", "flag")
        for name, raw in (flags or {}).items()
        if raw is not None
    ]
    return out


def _above_ceiling(
    spec: SettingSpec, value: int, origin: str, ceiling: int, ceiling_origin: str
) -> str:
    by = "the default" if ceiling_origin == "default" else ceiling_origin
    return (
        f"{origin}: setting {spec.name}: {value} is above the limit {ceiling} ({by}); "
        "settings that come with the input (dyn-gitops.yaml, KRM functionConfig, Argo CD "
        "parameters and plugin env) may only lower a limit; whoever runs dyn-gitops "
        f"raises it with {spec.cli_flag} or {spec.env_var} (Argo CD: in the sidecar's "
        "environment)"
    )


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

    ``file_values`` come from ``dyn-gitops.yaml``, ``function_config`` from a KRM
    functionConfig, ``parameters`` from Argo CD Application parameters, ``flags`` from the
    command line; all are keyed by setting name (kebab-case). ``env`` is a whole environment;
    only variables with one of ``env_prefixes`` are read. Which of them may raise a limit is
    :data:`RUNNER_SOURCES`; a value from any other above the runner's is a problem.
    """
    values: dict[str, Any] = {s.name: s.default for s in REGISTRY}
    origins: dict[str, str] = {s.name: "default" for s in REGISTRY}
    ceilings: dict[str, tuple[Any, str]] = {s.name: (s.default, "default") for s in REGISTRY}
    problems: list[str] = []
    given: list[tuple[_Value, Any]] = []
    for v in _values(
        file_values, file_origin, env, env_prefixes, function_config, parameters, flags
    ):
        spec = BY_NAME.get(v.name)
        if spec is None:
            problems.append(f"{v.origin}: unknown setting {v.name!r}{_suggest(v.name)}")
            continue
        try:
            parsed = spec.parse(v.raw)
        except ValueError as exc:
            problems.append(f"{v.origin}: setting {v.name}: {exc}")
            continue
        values[v.name], origins[v.name] = parsed, v.origin
        if RUNNER_SOURCES[v.source]:
            ceilings[v.name] = (parsed, v.origin)
        given.append((v, parsed))
    for v, parsed in given:
        spec = BY_NAME[v.name]
        ceiling, ceiling_origin = ceilings[v.name]
        if spec.is_limit and not RUNNER_SOURCES[v.source] and parsed > ceiling:
            problems.append(_above_ceiling(spec, parsed, v.origin, ceiling, ceiling_origin))
    if problems:
        raise SettingsError(problems)
    for v, _ in given:  # show the runner's ceiling beside a limit the input lowered
        if (
            BY_NAME[v.name].is_limit
            and origins[v.name] == v.origin
            and not RUNNER_SOURCES[v.source]
        ):
            ceiling, ceiling_origin = ceilings[v.name]
            origins[v.name] = f"{v.origin} (at most {ceiling}: {ceiling_origin})"
    settings = RenderSettings(**{s.attr: values[s.name] for s in REGISTRY})
    conflicts = setting_conflicts(settings)
    if conflicts:
        raise SettingsError(conflicts)
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
