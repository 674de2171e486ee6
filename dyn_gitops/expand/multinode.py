"""Leader and worker pod specs of a multinode service on the LeaderWorkerSet path
(``spec/dynamo-pod-spec.md`` 7.1-7.4, ``dynamo-objects.md`` 6).

The single-node pod spec is built first; each backend then rewrites the main container
per role: flags that point every node at the leader, Ray or MPI launchers, and no
liveness/readiness/startup probes on workers (a worker is not a Dynamo endpoint).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from .. import keys, naming
from ..bounded import UINT64_MAX, parse_int
from . import defaults
from .context import ComponentError

Obj = dict[str, Any]

LEADER = "leader"
WORKER = "worker"

DIST_INIT_PORT = 29500
RAY_PORT = 6379
DP_RPC_PORT = 13445
SSH_PORT = 2222
SSH_MOUNT = "/ssh-pk"
WAIT_LEADER_VOLUME = "wait-leader-script"
WAIT_LEADER_KEY = "wait-for-leader.py"
WAIT_LEADER_MOUNT = "/scripts"
WAIT_LEADER_CONTAINER = "wait-for-leader-mp"

#: env every mpirun forwards besides the container's own (``-x``)
MPI_FORWARDED_ENV = (
    "CPATH",
    "CUDA_VISIBLE_DEVICES",
    "MODEL_PATH",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_ENDPOINT",
    "TOKENIZERS_PARALLELISM",
    "NCCL_DEBUG",
    "NCCL_IB_DISABLE",
    "NCCL_P2P_DISABLE",
    "TENSORRT_LLM_CACHE_DIR",
    "HF_HOME",
    "TRANSFORMERS_CACHE",
    "HF_DATASETS_CACHE",
    "PATH",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "HOME",
    "USER",
    "TRITON_PTXAS_PATH",
    "TRTLLM_USE_UCX_KVCACHE",
)


@dataclass(frozen=True)
class Addressing:
    """How the pods of one multinode service find each other (the operator's
    ``MultinodeDeployer``): LeaderWorkerSet and Grove name pods differently."""

    leader_host: str  # as written in command/args (kubelet expands $(VAR))
    worker_rank: str  # this worker's node rank, 1..N-1
    rank_needs_shell: bool  # the rank is a shell expression, so the command needs sh -c
    mpi_hosts: tuple[str, ...]  # every node for mpirun -H, leader first
    dns_wait: bool  # the leader waits for the workers' DNS names before mpirun


def lws_addressing(nodes: int) -> Addressing:
    """LWS injects LWS_LEADER_ADDRESS/LWS_WORKER_INDEX; a worker's name is the leader's
    with ``-<index>`` before the first dot, resolvable only once that pod exists."""
    workers = tuple(
        f"$(echo \"$LWS_LEADER_ADDRESS\" | sed 's/\\./-{i}\\./')" for i in range(1, nodes)
    )
    return Addressing(
        leader_host="$(LWS_LEADER_ADDRESS)",
        worker_rank="$(LWS_WORKER_INDEX)",
        rank_needs_shell=False,
        mpi_hosts=("$(LWS_LEADER_ADDRESS)", *workers),
        dns_wait=True,
    )


def grove_addressing(service: str, nodes: int) -> Addressing:
    """Grove pods are ``<pcsg>-<pcsg index>-<clique>-<pod index>`` under the PCS replica's
    headless Service; the worker clique's pod index starts at 0, so rank = index + 1."""
    base = "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)"
    leader_clique, worker_clique = naming.clique_names(service, multinode=True)
    leader = f"{base}-{leader_clique}-0.$(GROVE_HEADLESS_SERVICE)"
    workers = tuple(
        f"{base}-{worker_clique}-{i}.$(GROVE_HEADLESS_SERVICE)" for i in range(nodes - 1)
    )
    return Addressing(
        leader_host=leader,
        worker_rank="$((GROVE_PCLQ_POD_INDEX + 1))",
        rank_needs_shell=True,
        mpi_hosts=(leader, *workers),
        dns_wait=False,
    )


_PYTHON = re.compile(r"^(.*/)?python\d*(\.\d+)*$")
_NEEDS_QUOTES = re.compile(r"[ \t\n'\"\\{}\[\]$`!]")
_GO_SPACE = r"[\t\n\f\r ]"
_GO_INT = re.compile(r"^[+-]?[0-9]+\Z")  # strconv.ParseInt(s, 10, 64)


def quote(token: str, single_quoted: bool = False) -> str:
    """``shellQuoteForBashC``: double-quote tokens the shell would split or expand.

    ``single_quoted``: the result goes inside an outer ``'...'`` (TRT-LLM's
    ``bash -c '...'``), so a ``'`` is also written ``'"'"'``, as the operator does. The
    operator does that everywhere; in a plain ``sh -c`` it leaves an unterminated quote,
    so the flag-injection and Ray wrappers keep the ``'`` as it is."""
    if not _NEEDS_QUOTES.search(token):
        return token
    escaped = re.sub(r'([\\"$`])', r"\\\1", token)
    if single_quoted:
        escaped = escaped.replace("'", "'\"'\"'")
    return f'"{escaped}"'


def _command_line(c: Obj, single_quoted: bool = False) -> str:
    return " ".join(
        quote(t, single_quoted) for t in [*(c.get("command") or []), *(c.get("args") or [])]
    )


def is_python(command: list[str]) -> bool:
    return bool(command) and bool(_PYTHON.match(command[0]))


def inject_flags(c: Obj, flags: str, needs_shell: bool, framework: str) -> None:
    """``injectFlagsIntoContainerCommand`` (dynamo-pod-spec.md 7.1)."""
    command = list(c.get("command") or [])
    args = list(c.get("args") or [])
    if is_python(command):
        if needs_shell:
            line = _command_line(c)
            c["command"] = ["sh", "-c"]
            c["args"] = [f"exec {line} {flags}"]
        else:
            c["args"] = [*args, *flags.split()]
        return
    # Go's regexp: \s is ASCII whitespace without \v, $ is the end of the text; every match
    # in the first arg that has one gets the flags before its delimiter (|, &, ;, space)
    pattern = re.compile(
        rf"(python[0-9.]*{_GO_SPACE}+[^|&;]*{framework}[^|&;]*?)({_GO_SPACE}|\Z|[|&;])"
    )
    for i, arg in enumerate(args):
        injected = pattern.sub(lambda m: f"{m.group(1)} {flags}{m.group(2)}", arg)
        if injected != arg:
            args[i] = injected
            c["args"] = args
            return


def _drop_probes(c: Obj) -> None:
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        c.pop(probe, None)


def _is_gpu_resource(name: str) -> bool:
    """``isGPUResourceName`` (internal/dra/dra.go @ 2a6da14c8): NVIDIA's, a vendor's
    ``*/gpu``, a MIG shape, or a ``gpu.*`` name."""
    n = name.lower()
    return (
        n in (naming.GPU_RESOURCE, "gpu")
        or n.endswith("/gpu")
        or "/mig-" in n
        or (n.startswith("gpu."))
    )


def gpu_count(c: Obj) -> int:
    """GPUs per node: the main container's scalar GPU resource, limits before requests,
    the first GPU name in sorted order (``ResolveContainerGPUs`` @ 2a6da14c8, shared by
    vLLM and TRT-LLM since #12166). A count only DRA claims give is not known here: 0."""
    res = c.get("resources") or {}
    for side in ("limits", "requests"):
        values = res.get(side) or {}
        names = sorted(n for n in values if _is_gpu_resource(str(n)))
        if names:
            value = str(values[names[0]])
            count = parse_int(value) if _GO_INT.match(value) else None  # ParseInt's range
            return count if count is not None else 0
    return 0


def _expanded_args(c: Obj) -> list[str]:
    """``getExpandedArgs``: the args (not the command), each split on whitespace."""
    return [tok for arg in c.get("args") or [] for tok in arg.split()]


def _flag_value(tokens: list[str], flag: str) -> int:
    """``getFlagValue``: the first integer following ``flag`` exactly (no ``=`` form, no
    short alias), else 1."""
    for i, tok in enumerate(tokens[:-1]):
        value = parse_int(tokens[i + 1]) if tok == flag and _GO_INT.match(tokens[i + 1]) else None
        if value is not None:
            return value
    return 1


# ------------------------------------------------------------------------------- SGLang
def sglang(c: Obj, role: str, nodes: int, addr: Addressing) -> None:
    rank = "0" if role == LEADER else addr.worker_rank
    inject_flags(
        c,
        f"--dist-init-addr {addr.leader_host}:{DIST_INIT_PORT} --nnodes {nodes} --node-rank {rank}",
        needs_shell=role == WORKER and addr.rank_needs_shell,
        framework="sglang",
    )
    if role == WORKER:
        _drop_probes(c)


# --------------------------------------------------------------------------------- vLLM
#: Masterminds/semver's ``NewVersion`` (lenient: ``v`` prefix, minor and patch optional)
_ORIGIN_VERSION = re.compile(
    r"^v?([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?\Z"
)


def origin_at_least_1_0(origin: str) -> bool:
    """The ``VLLMMultiprocessing`` gate (internal/features/compatibility @ 2a6da14c8): the
    origin version parses and is >= 1.0.0 (a pre-release of 1.0.0 is below it)."""
    m = _ORIGIN_VERSION.match(origin)
    if m is None:
        return False
    major, minor, patch = (parse_int(g or "0", low=0, high=UINT64_MAX) for g in m.groups()[:3])
    if major is None or minor is None or patch is None:  # strconv.ParseUint's range
        return False
    version = (major, minor, patch)
    return version > (1, 0, 0) or (version == (1, 0, 0) and m.group(4) is None)


def vllm_uses_mp(annotations: dict[str, str]) -> bool:
    """mp when annotated so, else (no valid annotation) for DGDs created by operator >= 1.0
    (ERRATA 4: a live operator's webhook stamps the origin version on every new DGD; a DGD
    without the stamp is taken as created before 1.0 and gets Ray)."""
    value = annotations.get(keys.ANN_VLLM_EXECUTOR_BACKEND, "").lower()
    if value in ("mp", "ray"):
        return value == "mp"
    return origin_at_least_1_0(annotations.get(keys.ANN_OPERATOR_ORIGIN_VERSION, ""))


def vllm(
    c: Obj,
    pod: Obj,
    role: str,
    nodes: int,
    annotations: dict[str, str],
    wait_leader_cm: str,
    addr: Addressing,
) -> None:
    gpus = gpu_count(c)
    tokens = _expanded_args(c)
    world = _flag_value(tokens, "--tensor-parallel-size") * _flag_value(
        tokens, "--pipeline-parallel-size"
    )
    dp = _flag_value(tokens, "--data-parallel-size")
    uses_mp = vllm_uses_mp(annotations)
    if gpus and world > gpus:  # tensor/pipeline parallelism spans nodes
        _vllm_model_parallel(c, role, nodes, addr, uses_mp=uses_mp)
    elif "--enable-elastic-ep" in tokens:  # one Ray cluster over every node
        _elastic_ep(c, role, addr)
    elif gpus and world * dp > gpus:  # data parallelism spans nodes
        local = gpus // world
        total = dp if dp != 1 else local * nodes
        sized = "--data-parallel-size" in tokens
        _vllm_data_parallel(c, role, addr, local, None if sized else total)
    if uses_mp:  # whichever launch was chosen, as the operator does
        c.setdefault("env", []).append(
            {
                "name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
            }
        )
    if role == WORKER:
        _drop_probes(c)
        if command_line_has_arg(c, "--distributed-executor-backend", "mp"):
            _wait_for_leader(c, pod, wait_leader_cm, addr.leader_host)


def _vllm_model_parallel(c: Obj, role: str, nodes: int, addr: Addressing, *, uses_mp: bool) -> None:
    """Tensor/pipeline parallelism over the nodes: vLLM's mp executor with node ranks, or a
    Ray cluster whose head runs the command on the leader."""
    if uses_mp:
        rank = "--node-rank 0" if role == LEADER else f"--node-rank {addr.worker_rank} --headless"
        inject_flags(
            c,
            f"--distributed-executor-backend mp --nnodes {nodes} --master-addr "
            f"{addr.leader_host} --master-port {DIST_INIT_PORT} {rank}",
            needs_shell=role == WORKER and addr.rank_needs_shell,
            framework="vllm",
        )
    elif role == LEADER:
        command = " ".join(quote(t) for t in c.get("command") or [])
        args = " ".join(quote(t) for t in c.get("args") or [])
        c["args"] = [
            f"ray start --head --port={RAY_PORT} && {command} {args} "
            "--distributed-executor-backend ray"
        ]
        c["command"] = ["/bin/sh", "-c"]
    else:
        c["command"] = ["/bin/sh", "-c"]
        c["args"] = [f"ray start --address={addr.leader_host}:{RAY_PORT} --block"]


def _vllm_data_parallel(c: Obj, role: str, addr: Addressing, local: int, total: int | None) -> None:
    """Data parallelism over the nodes (hybrid load balancing), ``local`` ranks a node;
    ``total`` is set when the command does not set ``--data-parallel-size`` itself."""
    size = "" if total is None else f"--data-parallel-size {total} "
    start = "0" if role == LEADER else f"$(( {local} * {addr.worker_rank} ))"
    inject_flags(
        c,
        f"--data-parallel-hybrid-lb {size}--data-parallel-size-local {local} "
        f"--data-parallel-start-rank {start} --data-parallel-address "
        f"{addr.leader_host} --data-parallel-rpc-port {DP_RPC_PORT}",
        needs_shell=role == WORKER,
        framework="vllm",
    )


_POSIX_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+\Z")


def quote_posix(token: str) -> str:
    """``shellQuotePOSIX`` (utils.go @ 2a6da14c8): one argv token through ``sh -c``,
    single-quoted unless every character is shell-neutral."""
    if _POSIX_SAFE.match(token):
        return token
    return "'" + token.replace("'", "'\\''") + "'"


def _elastic_ep(c: Obj, role: str, addr: Addressing) -> None:
    """``injectElasticEPRayLaunchFlags`` for a multinode leader / worker (#8216, v1.2;
    backend_vllm.go @ 2a6da14c8): the leader starts a Ray head, waits up to 300 s for its
    port, then runs vLLM; a worker joins only once the leader's ``/live`` answers 200, so
    that vLLM places the initial data-parallel ranks on the leader's GPUs alone."""
    if role == LEADER:
        if not c.get("command"):
            return  # the image's entrypoint is unknown: left as written, no Ray head
        vllm_command = " ".join(
            quote_posix(t) for t in [*(c.get("command") or []), *(c.get("args") or [])]
        ).strip()
        c["args"] = [
            f"ray start --head --port={RAY_PORT} --block & i=0; until python3 -c "
            f"\"import socket; s=socket.create_connection(('127.0.0.1',{RAY_PORT}),timeout=1); "
            's.close()" 2>/dev/null; do i=$((i+1)); [ "$i" -ge 150 ] && { echo "ERROR: Ray '
            'head did not start within 300s" >&2; exit 1; }; sleep 2; done && ' + vllm_command
        ]
    else:
        live = f"http://{addr.leader_host}:{defaults.SYSTEM_PORT}/live"
        gate = (
            f"i=0; until python3 -c \"import urllib.request; urllib.request.urlopen('{live}', "
            'timeout=5)" 2>/dev/null; do i=$((i+1)); [ "$i" -ge 720 ] && { echo "ERROR: '
            "leader /live did not become ready within 3h\" >&2; exit 1; }; echo 'waiting for "
            "leader dynamo.vllm /live to return 200...'; sleep 15; done"
        )
        c["args"] = [f"{gate} && ray start --address={addr.leader_host}:{RAY_PORT} --block"]
    c["command"] = ["/bin/sh", "-c"]


def _has_arg(tokens: list[str], flag: str, value: str) -> bool:
    """``hasArg`` (internal/dynamo/utils.go @ 2a6da14c8): ``flag value`` or ``flag=value``
    inside a token, or the two as adjacent tokens."""
    joined, equals = f"{flag} {value}", f"{flag}={value}"
    return any(
        joined in tok or equals in tok or (tok == flag and tokens[i + 1 : i + 2] == [value])
        for i, tok in enumerate(tokens)
    )


def command_line_has_arg(c: Obj, flag: str, value: str) -> bool:
    """``containerCommandLineHasArg``: over command + args, as written or split on
    whitespace (a user's own ``--distributed-executor-backend mp`` counts too)."""
    line = [*(c.get("command") or []), *(c.get("args") or [])]
    return _has_arg(line, flag, value) or _has_arg(
        [t for a in line for t in a.split()], flag, value
    )


def _wait_for_leader(c: Obj, pod: Obj, config_map: str, leader_host: str) -> None:
    host = re.sub(r"\$\((\w+)\)", r"${\1}", leader_host)  # evaluated by sh, not kubelet
    init = {
        "name": WAIT_LEADER_CONTAINER,
        "image": c.get("image"),
        # all three in command, no args, as the operator writes it
        "command": [
            "sh",
            "-c",
            f'export LEADER_HOST="{host}" LEADER_PORT="{DIST_INIT_PORT}" '
            f"&& exec python3 {WAIT_LEADER_MOUNT}/{WAIT_LEADER_KEY}",
        ],
        "volumeMounts": [
            {"name": WAIT_LEADER_VOLUME, "mountPath": WAIT_LEADER_MOUNT, "readOnly": True}
        ],
    }
    pod["initContainers"] = [*(pod.get("initContainers") or []), init]
    pod["volumes"] = [
        *(pod.get("volumes") or []),
        {"name": WAIT_LEADER_VOLUME, "configMap": {"name": config_map}},
    ]


# ------------------------------------------------------------------------------ TRT-LLM
# The SSH bootstrap of backend_trtllm.go @ 2a6da14c8 (ERRATA 3), step by step, joined with
# " && ". $HOME, not ~: the image may set HOME while the shell user is root, and ssh, sshd
# and mpirun must find the keys where they were put.
_SSH_CLIENT_CONFIG = (
    "printf 'Host *\\nIdentityFile '$HOME'/.ssh/id_rsa\\nStrictHostKeyChecking no\\n"
    f"Port {SSH_PORT}\\n' > $HOME/.ssh/config"
)
_SSH_KEYS = (
    "ls -la /ssh-pk/",
    "cp /ssh-pk/private.key $HOME/.ssh/id_rsa",
    "cp /ssh-pk/private.key.pub $HOME/.ssh/id_rsa.pub",
    "cp /ssh-pk/private.key.pub $HOME/.ssh/authorized_keys",
    "chmod 600 $HOME/.ssh/id_rsa $HOME/.ssh/authorized_keys",
    "chmod 644 $HOME/.ssh/id_rsa.pub",
    _SSH_CLIENT_CONFIG,
)
_HOST_KEY_TYPES = ("rsa", "ecdsa", "ed25519")
#: a non-root sshd: host keys, pid file and config under $HOME; StrictModes off because
#: $HOME may belong to another uid than the one sshd runs as
_SSHD_CONFIG = (
    f"printf 'Port {SSH_PORT}\\n"
    + "".join(f"HostKey '$HOME'/.ssh/host_keys/ssh_host_{t}_key\\n" for t in _HOST_KEY_TYPES)
    + "PidFile '$HOME'/.ssh/run/sshd.pid\\nStrictModes no\\nPermitRootLogin yes\\n"
    "PasswordAuthentication no\\nPubkeyAuthentication yes\\n"
    "AuthorizedKeysFile '$HOME'/.ssh/authorized_keys\\n' > $HOME/.ssh/sshd_config"
)
_LEADER_SSH = ("mkdir -p $HOME/.ssh", *_SSH_KEYS)
_WORKER_SSHD = (
    "mkdir -p $HOME/.ssh $HOME/.ssh/host_keys $HOME/.ssh/run",
    *_SSH_KEYS,
    *(f"ssh-keygen -t {t} -f $HOME/.ssh/host_keys/ssh_host_{t}_key -N ''" for t in _HOST_KEY_TYPES),
    _SSHD_CONFIG,
    "/usr/sbin/sshd -D -f $HOME/.ssh/sshd_config",
)
_DNS_TIMEOUT_SECONDS = 300


def _dns_wait(workers: tuple[str, ...]) -> str:
    """LWS: a worker's name resolves only once its pod exists, and mpirun needs all of
    them; the leader waits up to 300 s in all (the operator's loop, its messages too)."""
    return (
        f"TIMEOUT={_DNS_TIMEOUT_SECONDS}; START_TIME=$(date +%s); for worker in "
        f'{" ".join(workers)}; do echo "Waiting for DNS: $worker"; until getent hosts '
        "$worker >/dev/null 2>&1; do CURRENT_TIME=$(date +%s); if [ $((CURRENT_TIME - "
        'START_TIME)) -gt $TIMEOUT ]; then echo "ERROR: Timeout waiting for DNS: $worker"; '
        'exit 1; fi; echo "DNS not ready for $worker, retrying..."; sleep 2; done; '
        'echo "\u2713 DNS resolved: $worker"; done; echo "All workers DNS ready"'
    )


def trtllm(c: Obj, pod: Obj, role: str, nodes: int, ssh_secret: str, addr: Addressing) -> None:
    pod["volumes"] = [
        *(pod.get("volumes") or []),
        {"name": ssh_secret, "secret": {"secretName": ssh_secret, "defaultMode": 0o644}},
    ]
    c["volumeMounts"] = [
        *(c.get("volumeMounts") or []),
        {"name": ssh_secret, "mountPath": SSH_MOUNT, "readOnly": True},
    ]
    c.setdefault("env", []).append({"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "1"})
    if role == WORKER:
        c.pop("livenessProbe", None)
        c.pop("startupProbe", None)
        c["readinessProbe"] = {
            "tcpSocket": {"port": SSH_PORT},
            "initialDelaySeconds": 20,
            "periodSeconds": 20,
            "timeoutSeconds": 5,
            "failureThreshold": 10,
        }
        c["command"] = ["/bin/sh", "-c"]
        c["args"] = [" && ".join(_WORKER_SSHD)]
        return
    # the original command goes inside bash -c '...': a python command quoted token by
    # token, else a shell form's args as they are (else its command)
    if is_python(list(c.get("command") or [])):
        original = _command_line(c, single_quoted=True)
    else:
        original = " ".join(c.get("args") or c.get("command") or [])
    hosts = ",".join(addr.mpi_hosts)
    env_names = sorted({*(e["name"] for e in c.get("env") or []), *MPI_FORWARDED_ENV})
    forwarded = " ".join(f"-x {n}" for n in env_names)
    mpirun = (
        f'mpirun $([ "$(id -u)" = "0" ] && echo --allow-run-as-root) --oversubscribe '
        f"-n {nodes * gpu_count(c)} -H {hosts} --mca pml ob1 "
        "--mca plm_rsh_args "
        f'"-p {SSH_PORT} -o StrictHostKeyChecking=no -i $HOME/.ssh/id_rsa" {forwarded} '
        f"bash -c 'trtllm-llmapi-launch {original}'"
    )
    wait = (_dns_wait(addr.mpi_hosts[1:]),) if addr.dns_wait else ()
    c["command"] = ["/bin/sh", "-c"]
    c["args"] = [" && ".join((*_LEADER_SSH, *wait, mpirun))]


def check_launchable(c: Obj, role: str) -> None:
    """The operator refuses a multinode main container without a command and args."""
    if not c.get("command") or not c.get("args"):
        raise ComponentError(
            (),
            f"a multinode service's main container needs both command and "
            f"args (the {role} command is rewritten per node)",
            in_main=True,
        )


def _pop_shared_memory_mount(c: Obj) -> Obj | None:
    """The ``/dev/shm`` mount the single-node pod spec ends with, taken off: the operator
    mounts it last, after the backend's own mounts (``ApplySharedMemoryVolumeAndMount``
    runs after ``UpdateContainer`` in ``GenerateBasePodSpec`` @ 2a6da14c8)."""
    mounts = c.get("volumeMounts") or []
    if mounts and mounts[-1].get("name") == defaults.SHARED_MEMORY_VOLUME:
        return dict(mounts.pop())
    return None


def volumes_in_mount_order(pod: Obj) -> None:
    """``appendMissingPVCVolumesForMounts`` (graph.go @ 2a6da14c8), run after the backend's
    ``UpdatePodSpec``: the main container's volumes in the order it mounts them, then the
    rest as they were (every mount has its volume by then)."""
    volumes = pod.get("volumes") or []
    by_name = {v["name"]: v for v in volumes}
    ordered: list[Obj] = []
    seen: set[str] = set()
    for mount in pod["containers"][0].get("volumeMounts") or []:
        name = mount.get("name")
        if name in by_name and name not in seen:
            ordered.append(by_name[name])
            seen.add(name)
    ordered += [v for v in volumes if v["name"] not in seen]
    if ordered:
        pod["volumes"] = ordered


def role_pod(
    single: Obj,
    role: str,
    backend: str,
    nodes: int,
    annotations: dict[str, str],
    wait_leader_cm: str,
    ssh_secret: str,
    addr: Addressing,
    require_command: bool = True,
) -> Obj:
    """The ``role`` pod spec of a multinode service, from its single-node pod spec.

    ``require_command``: the LWS path refuses a main container without command and args
    (the Grove path does not check)."""
    pod = copy.deepcopy(single)
    main = pod["containers"][0]
    if require_command:
        check_launchable(main, role)
    shm = _pop_shared_memory_mount(main)
    if backend == "sglang":
        sglang(main, role, nodes, addr)
    elif backend == "vllm":
        vllm(main, pod, role, nodes, annotations, wait_leader_cm, addr)
    elif backend == "trtllm":
        trtllm(main, pod, role, nodes, ssh_secret, addr)
    elif role == WORKER:
        _drop_probes(main)
    if shm is not None:
        main.setdefault("volumeMounts", []).append(shm)
    volumes_in_mount_order(pod)
    return pod
