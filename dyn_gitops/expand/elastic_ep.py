"""vLLM elastic expert parallelism on a single pod (#12943 865afbb14, #13178 7d2c1483e;
``internal/dynamo/backend_vllm.go`` and ``graph.go`` @ 2a6da14c8).

A vLLM container that asks for the elastic-EP Ray topology (``--enable-elastic-ep`` with
``--data-parallel-backend ray`` or ``-dpb ray``) and renders as one pod starts a Ray head
before the engine, so that follower pods created later have a cluster to join: the command
becomes ``/bin/sh -c``, the Ray head binds the pod IP, and the engine is ``exec``'d. The
pod IP reaches both from the downward API (``POD_IP``, ``VLLM_DP_MASTER_IP``). On the Grove
path, a single-replica leader also gets a headless Service ``<component service>-ray``
(the DGD controller's stable resources; the component path has no such Service upstream).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from .. import naming
from ..errors import Problem
from ..hubform import main_path
from ..models import v1beta1
from . import defaults
from .components import GraphComponents
from .context import main_container

Obj = dict[str, Any]

ENABLE_FLAG = "--enable-elastic-ep"
DP_BACKEND_FLAGS = ("--data-parallel-backend", "-dpb")
RAY = "ray"
RAY_GCS_PORT = 6379
RAY_GCS_PORT_NAME = "ray-gcs"
#: bounded wait for the Ray head's port: 150 x 2 s
HEAD_WAIT_TRIES = 150
POD_IP_ENV = "POD_IP"
DP_MASTER_IP_ENV = "VLLM_DP_MASTER_IP"
VLLM = "vllm"

# shellQuotePOSIX: tokens of only these characters pass unquoted
_SHELL_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def _tokens(container: Obj) -> list[str]:
    """Command and args, each split on whitespace (``getExpandedCommandLine``)."""
    line = [*(container.get("command") or []), *(container.get("args") or [])]
    return [t for part in line for t in str(part).split()]


def _has_arg(tokens: list[str], flag: str, value: str) -> bool:
    """``hasArg``: ``flag value`` as two tokens, or ``flag=value`` / ``flag value`` inside
    one token (a substring match, as upstream)."""
    joined, equals = f"{flag} {value}", f"{flag}={value}"
    for i, tok in enumerate(tokens):
        if joined in tok or equals in tok:
            return True
        if tok == flag and i + 1 < len(tokens) and tokens[i + 1] == value:
            return True
    return False


def is_ray_launch(container: Obj) -> bool:
    """``IsElasticEPRayLaunch``: both the elastic-EP flag and the Ray DP backend."""
    tokens = _tokens(container)
    return ENABLE_FLAG in tokens and any(_has_arg(tokens, f, RAY) for f in DP_BACKEND_FLAGS)


def _quote(token: str) -> str:
    """``shellQuotePOSIX``: one argv token that survives ``sh -c`` unchanged."""
    if _SHELL_SAFE.match(token):
        return token
    return "'" + token.replace("'", "'\\''") + "'"


def _pod_ip_env(name: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def apply_single_pod(container: Obj, env: list[Obj]) -> bool:
    """Front the engine with a Ray head (RoleMain of ``injectElasticEPRayLaunchFlags``) and
    append ``POD_IP`` and ``VLLM_DP_MASTER_IP`` to ``env``; False (nothing changed) for a
    container that is not an elastic-EP Ray launch or has no command (admission refuses the
    latter when the graph's backendFramework is vllm: it cannot wrap the image ENTRYPOINT)."""
    if not is_ray_launch(container) or not container.get("command"):
        return False
    words = [_quote(str(t)) for t in container["command"]]
    words += [_quote(str(a)) for a in container.get("args") or []]
    engine = "exec " + " ".join(words).strip()
    container["command"] = ["/bin/sh", "-c"]
    container["args"] = [
        f'ray start --head --port={RAY_GCS_PORT} --node-ip-address="${POD_IP_ENV}" --block & '
        f'i=0; until python3 -c "import socket; s=socket.create_connection('
        f"('127.0.0.1',{RAY_GCS_PORT}),timeout=1); s.close()\" 2>/dev/null; "
        f'do i=$((i+1)); [ "$i" -ge {HEAD_WAIT_TRIES} ] && {{ echo "ERROR: Ray head did not '
        f'start within {HEAD_WAIT_TRIES * 2}s" >&2; exit 1; }}; sleep 2; done && {engine}'
    ]
    env.append(_pod_ip_env(POD_IP_ENV))
    env.append(_pod_ip_env(DP_MASTER_IP_ENV))
    return True


def is_single_pod_leader(component: v1beta1.Component, main: Obj) -> bool:
    """``isSinglePodElasticEPLeader``: the Service's selector must resolve to the one Ray
    head, so one node and at most one replica (``main``: the component's container
    ``main``)."""
    nodes = component.multinode.nodeCount if component.multinode is not None else 1
    return is_ray_launch(main) and nodes <= 1 and component.replicas in (None, 1)


def leader_service(component_service: Obj) -> Obj:
    """``GenerateElasticEPHeadlessService``: the component Service's labels, annotations and
    selector; headless, publishing not-ready addresses (the engine only starts once its DP
    ranks join, so gating on readiness would deadlock); the Ray GCS and system ports."""
    meta = component_service["metadata"]
    out_meta: Obj = {
        "name": naming.elastic_ep_leader_service(meta["name"]),
        "namespace": meta["namespace"],
    }
    for key in ("labels", "annotations"):
        if meta.get(key):
            out_meta[key] = copy.deepcopy(meta[key])
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": out_meta,
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": copy.deepcopy(component_service["spec"]["selector"]),
            "ports": [
                {
                    "name": RAY_GCS_PORT_NAME,
                    "port": RAY_GCS_PORT,
                    "targetPort": RAY_GCS_PORT,
                    "protocol": "TCP",
                },
                {
                    "name": "system",
                    "port": defaults.SYSTEM_PORT,
                    "targetPort": "system",
                    "protocol": "TCP",
                },
            ],
        },
    }


def requires_command(backend_framework: str | None, graph: GraphComponents) -> Iterator[Problem]:
    """``validateElasticEPRequiresCommand`` (admission, #12943): with
    ``spec.backendFramework: vllm`` (``backend_framework``), a component whose container
    ``main`` asks for the elastic-EP Ray topology must set ``command`` (the Ray head wraps
    it; an image ENTRYPOINT cannot be). A v1alpha1 service's container ``main`` takes its
    command and args from ``extraPodSpec.mainContainer`` alone (the conversion): the path
    the user wrote (``hubform.Graph.written_path``)."""
    if backend_framework != VLLM:
        return
    for component in sorted(graph.components, key=lambda c: c.name):
        main = main_container(component)
        if main is None or main.command:
            continue
        if is_ray_launch({"command": None, "args": main.args}):
            yield Problem.at(
                graph.path(component.name, *main_path(component, "command")),
                "elastic expert parallelism (--enable-elastic-ep with --data-parallel-backend "
                "ray) requires an explicit container command: the operator starts the "
                "single-pod Ray head by wrapping that command and cannot start it from the "
                "image ENTRYPOINT",
            )
