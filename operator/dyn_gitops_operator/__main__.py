"""``dyn-gitops-operator`` / ``python -m dyn_gitops_operator``."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any

from dyn_gitops_operator import __version__, logs
from dyn_gitops_operator.logs import FORMATS, log_format
from dyn_gitops_operator.settings import (
    MAX_REPLICAS_ENV,
    LeaderSettings,
    ModelSettings,
    OperatorSettings,
    RenderedArtifactSettings,
    ScopeSettings,
    limit_from_env,
)

#: where the flags are described at length
DOCS_URL = "https://github.com/dyn-gitops/dyn-gitops/blob/main/docs/operator.md"


class _Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Every flag's default shown (a help that names its default itself is kept as is);
    the description and the epilog as written (a URL is never wrapped)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower():
            return text
        return super()._get_help_string(action) or text


def version_text(prog: str = "dyn-gitops-operator") -> str:
    """``--version``: the format of ``dyn-gitops --version``, the package's version."""
    return f"{prog}, version {__version__}"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dyn-gitops-operator",
        description="dyn-gitops companion controller: DGD status, scaling adapters, managed\n"
        "rolling updates, restarts, the Dynamo scope lease and DynamoModel adapters.",
        epilog=f"Flags, metrics and logs:\n  {DOCS_URL}#running-it",
        formatter_class=_Help,
    )
    d = OperatorSettings(identity="x")
    p.add_argument("--version", action="version", version=version_text())
    _run_flags(p.add_argument_group("what to watch, how"), d)
    _leader_flags(p.add_argument_group("leader election and the Dynamo scope lease"), d)
    _model_flags(p.add_argument_group("DynamoModel (LoRA adapters)"), d.models)
    _artifact_flags(
        p.add_argument_group("in-cluster rendering for Flux (ExternalArtifact)"), d.artifacts
    )
    _log_flags(p.add_argument_group("logging"))
    return p


Group = argparse._ArgumentGroup


def _run_flags(p: Group, d: OperatorSettings) -> None:
    p.add_argument(
        "--mode",
        choices=("cluster", "namespace"),
        default=d.mode,
        help="cluster-wide, or one namespace",
    )
    p.add_argument(
        "--namespace",
        default="",
        help="the namespace watched in namespace mode (default: none; needed there)",
    )
    p.add_argument(
        "--kubeconfig",
        default=None,
        metavar="FILE",
        help="kubeconfig file (default: in-cluster, then ~/.kube/config)",
    )
    p.add_argument("--workers", type=int, default=d.workers, metavar="N", help="reconcile threads")
    p.add_argument(
        "--resync-period",
        type=float,
        default=d.resync_period,
        metavar="SECONDS",
        help="how often every graph is reconciled again (drift correction)",
    )
    p.add_argument(
        "--optional-api-recheck",
        type=float,
        default=d.optional_api_recheck,
        metavar="SECONDS",
        help="how often an optional API (LeaderWorkerSet, Grove, DynamoModel) found not served "
        "or forbidden is checked again",
    )
    p.add_argument(
        "--http-address",
        default=d.http_address,
        metavar="HOST:PORT",
        help="host:port for /metrics, /healthz, /readyz ('' disables)",
    )
    p.add_argument(
        "--max-replicas",
        type=int,
        default=None,
        metavar="N",
        help="the most replicas applied from any count read from Git (an annotation, a DGD's "
        "or a scaling adapter's replicas); above it, negative or not an integer is refused "
        f"(env {MAX_REPLICAS_ENV}; default {d.max_replicas}, the renderer's max-replicas)",
    )


def _leader_flags(p: Group, d: OperatorSettings) -> None:
    """Leader election (controller-runtime's flags and defaults) and the scope lease."""
    p.add_argument(
        "--identity",
        default=None,
        metavar="NAME",
        help="leader identity (default: the pod name, POD_NAME; else host_random)",
    )
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=d.leader.enabled,
        help="only the replica holding the leader Lease writes",
    )
    p.add_argument(
        "--leader-election-id", default=d.leader.lease_name, metavar="NAME", help="the Lease's name"
    )
    p.add_argument(
        "--leader-election-namespace",
        default="",
        metavar="NAMESPACE",
        help="the Lease's namespace (default: POD_NAMESPACE; in namespace mode the watched one)",
    )
    for flag, value, what in (
        ("--leader-lease-duration", d.leader.lease_duration, "a standby waits before taking over"),
        ("--leader-renew-deadline", d.leader.renew_deadline, "the leader acts without renewing"),
        ("--leader-retry-period", d.leader.retry_period, "between acquire or renew attempts"),
    ):
        p.add_argument(flag, type=float, default=value, metavar="SECONDS", help=f"seconds {what}")
    p.add_argument(
        "--scope-lease",
        action=argparse.BooleanOptionalAction,
        default=d.scope.enabled,
        help="namespace mode: hold the Dynamo scope lease; cluster mode: skip "
        "namespaces whose scope lease someone else holds",
    )
    p.add_argument(
        "--scope-lease-duration",
        type=int,
        default=d.scope.lease_duration,
        metavar="SECONDS",
        help="the scope lease's leaseDurationSeconds",
    )
    p.add_argument(
        "--scope-lease-renew-interval",
        type=float,
        default=d.scope.renew_interval,
        metavar="SECONDS",
        help="seconds between renewals of the scope lease",
    )


def _model_flags(p: Group, m: ModelSettings) -> None:
    """The DynamoModel loop's flags."""
    p.add_argument(
        "--dynamo-models",
        action=argparse.BooleanOptionalAction,
        default=m.enabled,
        help="load DynamoModels' LoRA adapters into their base model's workers",
    )
    p.add_argument(
        "--model-port", type=int, default=m.port, metavar="PORT", help="the workers' system port"
    )
    p.add_argument(
        "--model-concurrency",
        type=int,
        default=m.concurrency,
        metavar="N",
        help="load / unload calls in flight at once per model",
    )
    p.add_argument(
        "--model-workers",
        type=int,
        default=m.workers,
        metavar="N",
        help="threads reconciling DynamoModels",
    )
    for flag, value, what in (
        ("--model-request-timeout", m.request_timeout, "for one call, whole"),
        ("--model-total-timeout", m.total_timeout, "for a model's batch of unload calls"),
        ("--model-retry-base", m.retry_base, "before a failed worker is called again"),
        ("--model-retry-max", m.retry_max, "at most between calls to a failing worker"),
    ):
        p.add_argument(flag, type=float, default=value, metavar="SECONDS", help=f"seconds {what}")


def _artifact_flags(p: Group, a: RenderedArtifactSettings) -> None:
    """The in-cluster rendering loop's flags (docs/flux.md, *In-cluster rendering*)."""
    p.add_argument(
        "--render-artifacts",
        action=argparse.BooleanOptionalAction,
        default=a.enabled,
        help="render Flux sources annotated dyn-gitops.io/render-path into ExternalArtifacts "
        "and serve them (Flux >= 2.7)",
    )
    p.add_argument(
        "--artifact-address", default=a.address, metavar="HOST:PORT", help="artifact server"
    )
    p.add_argument(
        "--artifact-url",
        default=a.advertised_url,
        metavar="URL",
        help="base of the artifact URLs, as kustomize-controller reaches the server "
        "(default: http://<artifact address>)",
    )
    p.add_argument(
        "--artifact-storage", default=a.storage_dir, metavar="DIR", help="where artifacts are kept"
    )
    p.add_argument(
        "--artifact-max-size",
        type=int,
        default=a.max_size,
        metavar="BYTES",
        help="largest source artifact downloaded or unpacked, largest rendered artifact",
    )
    p.add_argument(
        "--artifact-keep",
        type=int,
        default=a.keep,
        metavar="N",
        help="rendered artifacts kept per ExternalArtifact (older ones are deleted)",
    )
    p.add_argument(
        "--render-timeout",
        type=float,
        default=a.render_timeout,
        metavar="SECONDS",
        help="seconds one render may take",
    )
    p.add_argument(
        "--render-workers", type=int, default=a.workers, metavar="N", help="renders at once"
    )


def _log_flags(p: Group) -> None:
    p.add_argument(
        "--log-format",
        type=log_format,
        choices=FORMATS,
        default=FORMATS[0],
        help="text: one line per record; json: one JSON object per line (both on stderr, "
        "with an RFC 3339 timestamp, level, logger, message and fields)",
    )
    p.add_argument(
        "--log-level",
        type=str.lower,
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="the least severe level logged",
    )


def settings_from(args: argparse.Namespace) -> OperatorSettings:
    extra: dict[str, Any] = {"identity": args.identity} if args.identity else {}
    ceiling = args.max_replicas
    if ceiling is None:
        ceiling = limit_from_env(MAX_REPLICAS_ENV)  # the flag wins over the environment
    if ceiling is not None:
        extra["max_replicas"] = ceiling
    return OperatorSettings(
        mode=args.mode,
        namespace=args.namespace,
        kubeconfig=args.kubeconfig,
        workers=args.workers,
        resync_period=args.resync_period,
        optional_api_recheck=args.optional_api_recheck,
        http_address=args.http_address,
        leader=LeaderSettings(
            enabled=args.leader_elect,
            lease_name=args.leader_election_id,
            namespace=args.leader_election_namespace,
            lease_duration=args.leader_lease_duration,
            renew_deadline=args.leader_renew_deadline,
            retry_period=args.leader_retry_period,
        ),
        scope=ScopeSettings(
            enabled=args.scope_lease,
            lease_duration=args.scope_lease_duration,
            renew_interval=args.scope_lease_renew_interval,
        ),
        models=ModelSettings(
            enabled=args.dynamo_models,
            port=args.model_port,
            concurrency=args.model_concurrency,
            workers=args.model_workers,
            request_timeout=args.model_request_timeout,
            total_timeout=args.model_total_timeout,
            retry_base=args.model_retry_base,
            retry_max=args.model_retry_max,
        ),
        artifacts=RenderedArtifactSettings(
            enabled=args.render_artifacts,
            address=args.artifact_address,
            advertised_url=args.artifact_url,
            storage_dir=args.artifact_storage,
            max_size=args.artifact_max_size,
            keep=args.artifact_keep,
            render_timeout=args.render_timeout,
            workers=args.render_workers,
        ),
        **extra,
    )


#: what the ``operator`` extra of the package installs (pyproject.toml)
EXTRA_MODULES = ("kubernetes", "prometheus_client")


def _missing_extra() -> str | None:
    """The first module of the ``operator`` extra that cannot be imported, if any."""
    import importlib

    for name in EXTRA_MODULES:
        try:
            importlib.import_module(name)  # imported by the controller right after anyway
        except ImportError:
            return name
    return None


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logs.setup(args.log_format, args.log_level)
    try:
        settings = settings_from(args)
    except ValueError as exc:
        print(f"dyn-gitops-operator: {exc}", file=sys.stderr)
        return 2
    missing = _missing_extra()
    if missing:
        print(
            f"dyn-gitops-operator: the controller needs the 'operator' extra (module {missing!r} "
            "is not installed): pip install 'dyn-gitops[operator]'",
            file=sys.stderr,
        )
        return 2
    from dyn_gitops_operator.errors import StartupError
    from dyn_gitops_operator.manager import Manager  # after logging: imports are slow

    try:
        manager = Manager(settings)
    except StartupError as exc:
        print(f"dyn-gitops-operator: {exc}", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: manager.stop())
    code = manager.run()
    logging.getLogger(__name__).info(
        "controller stopped", extra={"exit_code": code, "reason": manager.failure}
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
