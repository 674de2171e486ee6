"""``dyn-gitops-operator`` / ``python -m dyn_gitops_operator``."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from typing import Any

from dyn_gitops_operator import __version__
from dyn_gitops_operator.settings import (
    MAX_REPLICAS_ENV,
    LeaderSettings,
    ModelSettings,
    OperatorSettings,
    ScopeSettings,
    limit_from_env,
)

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: a fixed message plus lower-case key/value pairs."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class PlainFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{k}={v}" for k, v in record.__dict__.items() if k not in _STANDARD)
        line = f"{record.levelname[0]} {record.name}: {record.getMessage()} {extra}".rstrip()
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dyn-gitops-operator", description="dyn-gitops companion controller"
    )
    d = OperatorSettings(identity="x")
    p.add_argument("--version", action="version", version=__version__)
    p.add_argument(
        "--mode",
        choices=("cluster", "namespace"),
        default=d.mode,
        help="cluster-wide (default) or one namespace",
    )
    p.add_argument("--namespace", default="", help="the namespace watched in namespace mode")
    p.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: in-cluster, then ~/.kube/config)",
    )
    p.add_argument(
        "--identity",
        default=None,
        help="leader identity (default: the pod name, POD_NAME; else host_random)",
    )
    p.add_argument("--workers", type=int, default=d.workers)
    p.add_argument("--resync-period", type=float, default=d.resync_period, metavar="SECONDS")
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
    p.add_argument(
        "--leader-elect", action=argparse.BooleanOptionalAction, default=d.leader.enabled
    )
    p.add_argument("--leader-election-id", default=d.leader.lease_name)
    p.add_argument("--leader-election-namespace", default="")
    p.add_argument("--leader-lease-duration", type=float, default=d.leader.lease_duration)
    p.add_argument("--leader-renew-deadline", type=float, default=d.leader.renew_deadline)
    p.add_argument("--leader-retry-period", type=float, default=d.leader.retry_period)
    p.add_argument(
        "--scope-lease",
        action=argparse.BooleanOptionalAction,
        default=d.scope.enabled,
        help="namespace mode: hold the Dynamo scope lease; cluster mode: skip "
        "namespaces whose scope lease someone else holds",
    )
    p.add_argument("--scope-lease-duration", type=int, default=d.scope.lease_duration)
    p.add_argument("--scope-lease-renew-interval", type=float, default=d.scope.renew_interval)
    _model_flags(p, d.models)
    p.add_argument("--log-format", choices=("json", "plain"), default="json")
    p.add_argument("--log-level", default="info")
    return p


def _model_flags(p: argparse.ArgumentParser, m: ModelSettings) -> None:
    """The DynamoModel loop's flags."""
    p.add_argument(
        "--dynamo-models",
        action=argparse.BooleanOptionalAction,
        default=m.enabled,
        help="load DynamoModels' LoRA adapters into their base model's workers",
    )
    p.add_argument("--model-port", type=int, default=m.port, help="the workers' system port")
    p.add_argument("--model-concurrency", type=int, default=m.concurrency)
    p.add_argument("--model-workers", type=int, default=m.workers)
    p.add_argument("--model-request-timeout", type=float, default=m.request_timeout)
    p.add_argument("--model-total-timeout", type=float, default=m.total_timeout)
    p.add_argument("--model-retry-base", type=float, default=m.retry_base, metavar="SECONDS")
    p.add_argument("--model-retry-max", type=float, default=m.retry_max, metavar="SECONDS")


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
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if args.log_format == "json" else PlainFormatter())
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler], force=True)
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
