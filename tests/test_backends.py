"""Backend flag injection for multinode services (``spec/dynamo-pod-spec.md`` 7.1-7.4):
SGLang dist-init flags, vLLM Ray / mp / data-parallel launches, TRT-LLM mpirun over SSH,
with the LeaderWorkerSet and Grove addressings.

Go tests ported (section 10), from ``backend_sglang_test.go``, ``backend_vllm_test.go``
and ``backend_trtllm_test.go`` at the v1alpha1-era revision 015d780b: every multinode case
of TestSGLangBackend_PythonCommandInjection, ..._ShellCommandInjection,
..._GetMultinodeFlags, ..._ProbeRemoval, TestIsPythonCommand; TestVLLMBackend_UpdateContainer,
..._ShellCommandInjection, TestUpdateVLLMMultinodeArgs, TestVLLMBackend_UpdatePodSpec,
TestGenerateWaitLeaderConfigMap, TestGetWaitLeaderConfigMapName, TestShouldUseMpBackend;
TestShellQuoteForBashC, ..._InLeaderCommand, TestTRTLLMBackend_UpdateContainer,
..._UpdatePodSpec, ..._hostNamesList, ..._addSSHVolumeMount, ..._setupLeaderContainer,
..._setupWorkerContainer, ..._getGPUsPerNode. The single-node cases are one render test
at the end. The SSH setup, sshd and DNS-wait shell text is the operator's
(backend_trtllm.go @ 2a6da14c8, ERRATA 3), pinned in full.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.paths import CONFORMANCE
from support.rendering import render

from dyn_gitops import keys, naming
from dyn_gitops.expand import lws, multinode
from dyn_gitops.expand.multinode import LEADER, WORKER, Addressing

Obj = dict[str, Any]
PROBES = {"livenessProbe", "readinessProbe", "startupProbe"}
MAIN = "main"  # the operator's RoleMain: neither leader nor worker

# the Go tests' two mock MultinodeDeployers: kubelet-expanded names, and a rank that
# needs a shell
SIMPLE = Addressing(
    leader_host="leader.example.com",
    worker_rank="1",
    rank_needs_shell=False,
    mpi_hosts=("leader.example.com", "worker1.example.com"),
    dns_wait=False,
)
SHELL = Addressing(
    leader_host="$(LEADER_HOST)",
    worker_rank="$(WORKER_INDEX)",
    rank_needs_shell=True,
    mpi_hosts=("$(LEADER_HOST)", "$(WORKER_1_HOST)"),
    dns_wait=True,
)
GROVE_LEADER = "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-test-service-ldr-0.$(GROVE_HEADLESS_SERVICE)"
GROVE_RANK = "$((GROVE_PCLQ_POD_INDEX + 1))"


def grove(nodes: int = 2, service: str = "test-service") -> Addressing:
    return multinode.grove_addressing(service, nodes)


def lws_addr(nodes: int = 2) -> Addressing:
    return multinode.lws_addressing(nodes)


def container(
    command: list[str] | None = None,
    args: list[str] | None = None,
    gpus: str | None = None,
    **extra: Any,
) -> Obj:
    c: Obj = {"name": "main", "image": "vllm:latest", **extra}
    if command is not None:
        c["command"] = list(command)
    if args is not None:
        c["args"] = list(args)
    if gpus is not None:
        c["resources"] = {"limits": {naming.GPU_RESOURCE: gpus}}
    return c


def with_probes(c: Obj) -> Obj:
    return {
        **c,
        "livenessProbe": {"initialDelaySeconds": 30},
        "readinessProbe": {"initialDelaySeconds": 10},
        "startupProbe": {"initialDelaySeconds": 5},
    }


# =================================================================================== SGLang
# Go: TestSGLangBackend_PythonCommandInjection (every multinode case; the single-node case
# is test_single_node_workers_are_left_alone)
@pytest.mark.parametrize(
    ("nodes", "role", "addr", "command", "args", "want_command", "want_args"),
    [
        pytest.param(
            2,
            WORKER,
            SIMPLE,
            ["python3"],
            ["-m", "dynamo.sglang", "--model", "llama"],
            ["python3"],
            [
                "-m",
                "dynamo.sglang",
                "--model",
                "llama",
                "--dist-init-addr",
                "leader.example.com:29500",
                "--nnodes",
                "2",
                "--node-rank",
                "1",
            ],
            id="python command simple deployer - direct append",
        ),
        pytest.param(
            2,
            WORKER,
            lws_addr(),
            ["python3"],
            ["-m", "dynamo.sglang", "--model", "llama"],
            ["python3"],
            [
                "-m",
                "dynamo.sglang",
                "--model",
                "llama",
                "--dist-init-addr",
                "$(LWS_LEADER_ADDRESS):29500",
                "--nnodes",
                "2",
                "--node-rank",
                "$(LWS_WORKER_INDEX)",
            ],
            id="python command LWS worker - direct append (kubelet expansion)",
        ),
        pytest.param(
            2,
            LEADER,
            lws_addr(),
            ["python3"],
            ["-m", "dynamo.sglang"],
            ["python3"],
            [
                "-m",
                "dynamo.sglang",
                "--dist-init-addr",
                "$(LWS_LEADER_ADDRESS):29500",
                "--nnodes",
                "2",
                "--node-rank",
                "0",
            ],
            id="python command LWS leader - direct append",
        ),
        pytest.param(
            2,
            WORKER,
            SHELL,
            ["python3"],
            ["-m", "dynamo.sglang", "--model", "llama"],
            ["sh", "-c"],
            [
                "exec python3 -m dynamo.sglang --model llama --dist-init-addr "
                "$(LEADER_HOST):29500 --nnodes 2 --node-rank $(WORKER_INDEX)"
            ],
            id="python command shell deployer - shell wrapping",
        ),
        pytest.param(
            3,
            LEADER,
            SHELL,
            ["python"],
            ["-m", "dynamo.sglang"],
            ["python"],
            [
                "-m",
                "dynamo.sglang",
                "--dist-init-addr",
                "$(LEADER_HOST):29500",
                "--nnodes",
                "3",
                "--node-rank",
                "0",
            ],
            id="python command leader role - always simple",
        ),
        pytest.param(
            2,
            WORKER,
            SIMPLE,
            ["python3.11"],
            ["-m", "dynamo.sglang"],
            ["python3.11"],
            [
                "-m",
                "dynamo.sglang",
                "--dist-init-addr",
                "leader.example.com:29500",
                "--nnodes",
                "2",
                "--node-rank",
                "1",
            ],
            id="python3.11 variant supported",
        ),
        pytest.param(
            2,
            WORKER,
            SIMPLE,
            ["/usr/bin/python3.8"],
            ["-m", "dynamo.sglang", "--model", "llama"],
            ["/usr/bin/python3.8"],
            [
                "-m",
                "dynamo.sglang",
                "--model",
                "llama",
                "--dist-init-addr",
                "leader.example.com:29500",
                "--nnodes",
                "2",
                "--node-rank",
                "1",
            ],
            id="absolute path python command supported",
        ),
        pytest.param(
            2,
            WORKER,
            SHELL,
            ["/home/user/.pyenv/shims/python3.9"],
            ["-m", "dynamo.sglang"],
            ["sh", "-c"],
            [
                "exec /home/user/.pyenv/shims/python3.9 -m dynamo.sglang "
                "--dist-init-addr $(LEADER_HOST):29500 --nnodes 2 "
                "--node-rank $(WORKER_INDEX)"
            ],
            id="pyenv shims python command supported",
        ),
        pytest.param(
            2,
            WORKER,
            SIMPLE,
            ["python3", "-m", "dynamo.sglang"],
            ["--model-path", "Qwen/Qwen3-0.6B", "--tp-size", "8"],
            ["python3", "-m", "dynamo.sglang"],
            [
                "--model-path",
                "Qwen/Qwen3-0.6B",
                "--tp-size",
                "8",
                "--dist-init-addr",
                "leader.example.com:29500",
                "--nnodes",
                "2",
                "--node-rank",
                "1",
            ],
            id="python command with module in command array - simple deployer",
        ),
        pytest.param(
            2,
            WORKER,
            SHELL,
            ["python3", "-m", "dynamo.sglang"],
            ["--model-path", "Qwen/Qwen3-0.6B"],
            ["sh", "-c"],
            [
                "exec python3 -m dynamo.sglang --model-path Qwen/Qwen3-0.6B "
                "--dist-init-addr $(LEADER_HOST):29500 --nnodes 2 "
                "--node-rank $(WORKER_INDEX)"
            ],
            id="python command with module in command array - shell deployer",
        ),
        pytest.param(
            2,
            WORKER,
            SHELL,
            ["python3", "-m", "dynamo.sglang"],
            [],
            ["sh", "-c"],
            [
                "exec python3 -m dynamo.sglang --dist-init-addr "
                "$(LEADER_HOST):29500 --nnodes 2 --node-rank $(WORKER_INDEX)"
            ],
            id="python command with no args - shell deployer",
        ),
        pytest.param(
            2,
            WORKER,
            SHELL,
            ["java"],
            ["-jar", "app.jar"],
            ["java"],
            ["-jar", "app.jar"],
            id="non-python command multinode unchanged",
        ),
    ],
)
def test_sglang_python_command_injection(
    nodes: int,
    role: str,
    addr: Addressing,
    command: list[str],
    args: list[str],
    want_command: list[str],
    want_args: list[str],
) -> None:
    c = container(command, args)
    multinode.sglang(c, role, nodes, addr)
    assert (c["command"], c["args"]) == (want_command, want_args)


# Go: TestSGLangBackend_ShellCommandInjection (every multinode case): the flags go right
# after the first `python ... sglang` of the first arg that has one, before | & ;
@pytest.mark.parametrize(
    ("nodes", "role", "addr", "args", "want_args"),
    [
        pytest.param(
            2,
            LEADER,
            grove(),
            ["python -m dynamo.sglang"],
            [
                f"python -m dynamo.sglang --dist-init-addr {GROVE_LEADER}:29500 --nnodes 2 "
                "--node-rank 0"
            ],
            id="multinode shell command with regex injection",
        ),
        pytest.param(
            2,
            LEADER,
            grove(),
            ["echo blah | wc -l && python -m dynamo.sglang && ls -al"],
            [
                f"echo blah | wc -l && python -m dynamo.sglang --dist-init-addr {GROVE_LEADER}"
                ":29500 --nnodes 2 --node-rank 0 && ls -al"
            ],
            id="multinode shell command with complex pipeline",
        ),
        pytest.param(
            3,
            WORKER,
            grove(3),
            ["python -m dynamo.sglang"],
            [
                f"python -m dynamo.sglang --dist-init-addr {GROVE_LEADER}:29500 --nnodes 3 "
                f"--node-rank {GROVE_RANK}"
            ],
            id="shell command worker with grove env vars",
        ),
        pytest.param(
            2,
            LEADER,
            lws_addr(),
            ["python -m dynamo.sglang"],
            [
                "python -m dynamo.sglang --dist-init-addr $(LWS_LEADER_ADDRESS):29500 "
                "--nnodes 2 --node-rank 0"
            ],
            id="shell command with LWS deployer",
        ),
        pytest.param(
            2,
            LEADER,
            grove(),
            ["python -m dynamo.sglang | tee /tmp/log"],
            [
                f"python -m dynamo.sglang --dist-init-addr {GROVE_LEADER}:29500 --nnodes 2 "
                "--node-rank 0 | tee /tmp/log"
            ],
            id="shell command with pipes",
        ),
        pytest.param(
            2,
            LEADER,
            grove(),
            ["echo start", "python -m dynamo.sglang", "echo done"],
            [
                "echo start",
                f"python -m dynamo.sglang --dist-init-addr {GROVE_LEADER}:29500 "
                "--nnodes 2 --node-rank 0",
                "echo done",
            ],
            id="shell command multiple args individual processing",
        ),
        pytest.param(
            2,
            LEADER,
            grove(),
            ["echo hello", "python -m some.other.module"],
            ["echo hello", "python -m some.other.module"],
            id="shell command no sglang modules unchanged",
        ),
        pytest.param(
            2,
            LEADER,
            grove(),
            ["python -m dynamo.sglang", "python -m dynamo.sglang --other-flags"],
            [
                f"python -m dynamo.sglang --dist-init-addr {GROVE_LEADER}:29500 --nnodes 2 "
                "--node-rank 0",
                "python -m dynamo.sglang --other-flags",
            ],
            id="shell command stops after first python injection",
        ),
    ],
)
def test_sglang_shell_command_injection(
    nodes: int, role: str, addr: Addressing, args: list[str], want_args: list[str]
) -> None:
    c = container(["sh", "-c"], args)
    multinode.sglang(c, role, nodes, addr)
    assert c["args"] == want_args
    assert c["command"] == ["sh", "-c"]  # a shell command is kept


def test_shell_form_flags_go_before_a_glued_delimiter() -> None:
    # Go: injectFlagsIntoPythonCommand's regex (the function the ShellCommandInjection cases
    # exercise): the flags end the `python ... sglang` match, before `;` even without a
    # space, and every such command in that one arg gets them
    c = container(["sh", "-c"], ["python -m dynamo.sglang;echo hi && python3 -m dynamo.sglang"])
    multinode.inject_flags(c, "--nnodes 2", needs_shell=False, framework="sglang")
    assert c["args"] == [
        "python -m dynamo.sglang --nnodes 2;echo hi && python3 -m dynamo.sglang --nnodes 2"
    ]


# Go: TestIsPythonCommand (the whole table)
@pytest.mark.parametrize(
    ("cmd", "want"),
    [
        ("python", True),
        ("python3", True),
        ("python2", True),
        ("python3.11", True),
        ("python2.7", True),
        ("python3.12.1", True),
        ("/usr/bin/python", True),
        ("/usr/bin/python3", True),
        ("/usr/bin/python3.8", True),
        ("/usr/bin/python2.7", True),
        ("/opt/python/bin/python3.11", True),
        ("/usr/local/bin/python3.12.1", True),
        ("/home/user/.pyenv/shims/python3.9", True),
        ("./python3", True),
        ("../bin/python", True),
        ("bin/python3.10", True),
        ("java", False),
        ("sh", False),
        ("node", False),
        ("python-config", False),
        ("/usr/bin/python-config", False),
        ("", False),
        ("python ", False),
        ("/usr/bin/python ", False),
        ("pythonx", False),
        ("/usr/bin/pythonx", False),
        ("/usr/bin/", False),
        ("python/", False),
        ("/usr/bin/python/", False),
    ],
)
def test_is_python_command(cmd: str, want: bool) -> None:
    assert multinode.is_python([cmd]) is want


# Go: TestSGLangBackend_GetMultinodeFlags: the flags and whether they need a shell, seen
# through a bare python command (appended as args, or wrapped in sh -c)
@pytest.mark.parametrize(
    ("nodes", "role", "addr", "flags", "needs_shell"),
    [
        pytest.param(
            2,
            LEADER,
            SHELL,
            "--dist-init-addr $(LEADER_HOST):29500 --nnodes 2 --node-rank 0",
            False,
            id="leader role never needs shell",
        ),
        pytest.param(
            3,
            WORKER,
            SIMPLE,
            "--dist-init-addr leader.example.com:29500 --nnodes 3 --node-rank 1",
            False,
            id="worker with simple deployer",
        ),
        pytest.param(
            2,
            WORKER,
            SHELL,
            "--dist-init-addr $(LEADER_HOST):29500 --nnodes 2 --node-rank $(WORKER_INDEX)",
            True,
            id="worker with shell deployer",
        ),
    ],
)
def test_sglang_multinode_flags(
    nodes: int, role: str, addr: Addressing, flags: str, needs_shell: bool
) -> None:
    c = container(["python3"], [])
    multinode.sglang(c, role, nodes, addr)
    if needs_shell:
        assert (c["command"], c["args"]) == (["sh", "-c"], [f"exec python3 {flags}"])
    else:
        assert (c["command"], c["args"]) == (["python3"], flags.split())


# Go: TestSGLangBackend_ProbeRemoval (multinode cases): only the worker loses its probes
@pytest.mark.parametrize(
    ("role", "removed"),
    [
        pytest.param(LEADER, False, id="multinode leader does not remove probes"),
        pytest.param(WORKER, True, id="multinode worker removes probes"),
        pytest.param(MAIN, False, id="multinode main role does not remove probes"),
    ],
)
def test_sglang_probe_removal(role: str, removed: bool) -> None:
    c = with_probes(container(None, ["python -m dynamo.sglang"]))
    multinode.sglang(c, role, 2, grove())
    assert PROBES & set(c) == (set() if removed else PROBES)


# ===================================================================================== vLLM
def _origin(version: str = "1.0.0", **more: str) -> dict[str, str]:
    return {keys.ANN_OPERATOR_ORIGIN_VERSION: version, **more}


MP_OVERRIDE = {keys.ANN_VLLM_EXECUTOR_BACKEND: "mp"}
TP = "--tensor-parallel-size"
DP = "--data-parallel-size"
JSON_ARG = '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'
MP_FLAGS = ["--distributed-executor-backend", "mp", "--nnodes", "2", "--master-addr"]
RAY_LEADER = "ray start --head --port=6379 && "
UNCHANGED = None  # the case expects command and args untouched

# Go: TestVLLMBackend_UpdateContainer (multinode cases, "UC") and TestUpdateVLLMMultinodeArgs
# (every case, "args"); GPUs are the main container's nvidia.com/gpu limit
VLLM_CASES = [
    pytest.param(
        3,
        LEADER,
        grove(3),
        {},
        ["python3", "-m", "dynamo.vllm"],
        ["--model", "test", TP, "8"],
        "4",
        (
            ["/bin/sh", "-c"],
            [
                f"{RAY_LEADER}python3 -m dynamo.vllm --model test {TP} 8 "
                "--distributed-executor-backend ray"
            ],
        ),
        id="UC multinode leader uses ray (no annotations = legacy)",
    ),
    pytest.param(
        3,
        LEADER,
        grove(3),
        {},
        ["python3", "-m", "dynamo.vllm"],
        ["--model", "test", TP, "8", "--kv-transfer-config", JSON_ARG],
        "4",
        (
            ["/bin/sh", "-c"],
            [
                f"{RAY_LEADER}python3 -m dynamo.vllm --model test {TP} 8 --kv-transfer-config "
                '"{\\"kv_connector\\": \\"NixlConnector\\", \\"kv_role\\": \\"kv_both\\"}" '
                "--distributed-executor-backend ray"
            ],
        ),
        id="UC multinode leader uses ray with JSON args (no annotations = legacy)",
    ),
    pytest.param(
        3,
        WORKER,
        grove(3),
        {},
        ["python3"],
        ["-m", "dynamo.vllm", "--model", "test", TP, "8"],
        "4",
        (["/bin/sh", "-c"], [f"ray start --address={GROVE_LEADER}:6379 --block"]),
        id="UC multinode worker uses ray (no annotations = legacy)",
    ),
    pytest.param(
        2,
        WORKER,
        lws_addr(),
        {},
        None,
        ["python3", "-m", "dynamo.vllm", TP, "8"],
        "4",
        (["/bin/sh", "-c"], ["ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"]),
        id="UC multinode worker with LWS deployment type (no annotations = legacy ray)",
    ),
    pytest.param(
        2,
        LEADER,
        grove(),
        {},
        None,
        [],
        None,
        UNCHANGED,
        id="UC multinode leader with no initial args",
    ),
    pytest.param(
        3,
        MAIN,
        grove(3),
        {},
        None,
        ["python3", "-m", "dynamo.frontend"],
        None,
        UNCHANGED,
        id="UC multinode main role (non-leader/worker) does not modify args",
    ),
    pytest.param(
        2,
        LEADER,
        grove(),
        _origin(),
        ["python3"],
        ["-m", "dynamo.vllm", TP, "16"],
        "8",
        (
            ["python3"],
            [
                "-m",
                "dynamo.vllm",
                TP,
                "16",
                *MP_FLAGS,
                GROVE_LEADER,
                "--master-port",
                "29500",
                "--node-rank",
                "0",
            ],
        ),
        id="UC multinode leader uses mp (origin version >= threshold)",
    ),
    pytest.param(
        2,
        WORKER,
        grove(),
        _origin(),
        ["python3"],
        ["-m", "dynamo.vllm", TP, "16"],
        "8",
        (
            ["sh", "-c"],
            [
                f"exec python3 -m dynamo.vllm {TP} 16 --distributed-executor-"
                f"backend mp --nnodes 2 --master-addr {GROVE_LEADER} "
                f"--master-port 29500 --node-rank {GROVE_RANK} --headless"
            ],
        ),
        id="UC multinode worker uses mp (origin version >= threshold) Grove",
    ),
    pytest.param(
        2,
        LEADER,
        grove(),
        _origin(**{keys.ANN_VLLM_EXECUTOR_BACKEND: "ray"}),
        ["python3", "-m", "dynamo.vllm"],
        ["--model", "test", TP, "8"],
        "4",
        (
            ["/bin/sh", "-c"],
            [
                f"{RAY_LEADER}python3 -m dynamo.vllm --model test {TP} 8 "
                "--distributed-executor-backend ray"
            ],
        ),
        id="UC multinode leader uses ray (explicit override despite new version)",
    ),
    pytest.param(
        2,
        LEADER,
        grove(),
        MP_OVERRIDE,
        ["python3"],
        ["-m", "dynamo.vllm", TP, "16"],
        "8",
        (
            ["python3"],
            [
                "-m",
                "dynamo.vllm",
                TP,
                "16",
                *MP_FLAGS,
                GROVE_LEADER,
                "--master-port",
                "29500",
                "--node-rank",
                "0",
            ],
        ),
        id="UC multinode leader uses mp (explicit override on legacy DGD)",
    ),
    pytest.param(
        2,
        LEADER,
        grove(),
        {},
        ["python3"],
        ["-m", "dynamo.vllm", TP, "16"],
        "8",
        (
            ["/bin/sh", "-c"],
            [f"{RAY_LEADER}python3 -m dynamo.vllm {TP} 16 --distributed-executor-backend ray"],
        ),
        id="args leader uses ray (nil annotations = legacy)",
    ),
    pytest.param(
        2,
        LEADER,
        grove(),
        _origin(),
        ["python3"],
        ["-m", "dynamo.vllm", TP, "16"],
        "8",
        (
            ["python3"],
            [
                "-m",
                "dynamo.vllm",
                TP,
                "16",
                *MP_FLAGS,
                GROVE_LEADER,
                "--master-port",
                "29500",
                "--node-rank",
                "0",
            ],
        ),
        id="args leader uses mp (origin version >= threshold)",
    ),
    pytest.param(
        2,
        WORKER,
        grove(),
        _origin(),
        ["python3"],
        ["-m", "dynamo.vllm", TP, "16"],
        "8",
        (
            ["sh", "-c"],
            [
                f"exec python3 -m dynamo.vllm {TP} 16 --distributed-executor-"
                f"backend mp --nnodes 2 --master-addr {GROVE_LEADER} "
                f"--master-port 29500 --node-rank {GROVE_RANK} --headless"
            ],
        ),
        id="args worker uses mp (origin version >= threshold) Grove",
    ),
    pytest.param(
        2,
        WORKER,
        lws_addr(),
        _origin(),
        ["python3"],
        ["-m", "dynamo.vllm", TP, "16"],
        "8",
        (
            ["python3"],
            [
                "-m",
                "dynamo.vllm",
                TP,
                "16",
                *MP_FLAGS,
                "$(LWS_LEADER_ADDRESS)",
                "--master-port",
                "29500",
                "--node-rank",
                "$(LWS_WORKER_INDEX)",
                "--headless",
            ],
        ),
        id="args worker uses mp (origin version >= threshold) LWS",
    ),
    pytest.param(
        2,
        LEADER,
        lws_addr(),
        _origin(),
        ["python3"],
        ["-m", "dynamo.vllm", TP, "16"],
        "8",
        (
            ["python3"],
            [
                "-m",
                "dynamo.vllm",
                TP,
                "16",
                *MP_FLAGS,
                "$(LWS_LEADER_ADDRESS)",
                "--master-port",
                "29500",
                "--node-rank",
                "0",
            ],
        ),
        id="args leader uses mp (origin version >= threshold) LWS",
    ),
    pytest.param(
        2,
        LEADER,
        lws_addr(),
        {},
        ["python3"],
        ["-m", "dynamo.vllm", DP, "16"],
        "8",
        (
            ["python3"],
            [
                "-m",
                "dynamo.vllm",
                DP,
                "16",
                "--data-parallel-hybrid-lb",
                "--data-parallel-size-local",
                "8",
                "--data-parallel-start-rank",
                "0",
                "--data-parallel-address",
                "$(LWS_LEADER_ADDRESS)",
                "--data-parallel-rpc-port",
                "13445",
            ],
        ),
        id="args leader with data parallel launch LWS",
    ),
    pytest.param(
        2,
        LEADER,
        grove(),
        {},
        ["python3"],
        ["-m", "dynamo.vllm", DP, "16"],
        "8",
        (
            ["python3"],
            [
                "-m",
                "dynamo.vllm",
                DP,
                "16",
                "--data-parallel-hybrid-lb",
                "--data-parallel-size-local",
                "8",
                "--data-parallel-start-rank",
                "0",
                "--data-parallel-address",
                GROVE_LEADER,
                "--data-parallel-rpc-port",
                "13445",
            ],
        ),
        id="args leader prepends distributed data parallel flags",
    ),
    pytest.param(
        2,
        LEADER,
        grove(),
        {},
        None,
        [],
        None,
        UNCHANGED,
        id="args leader with empty args does not modify",
    ),
    pytest.param(
        2,
        WORKER,
        grove(),
        {},
        None,
        ["python3", "-m", "dynamo.vllm", TP, "16"],
        "8",
        (["/bin/sh", "-c"], [f"ray start --address={GROVE_LEADER}:6379 --block"]),
        id="args worker with ray distributed launch Grove (nil annotations)",
    ),
    pytest.param(
        2,
        WORKER,
        grove(),
        {},
        ["python3"],
        ["-m", "dynamo.vllm", DP, "16"],
        "8",
        (
            ["sh", "-c"],
            [
                f"exec python3 -m dynamo.vllm {DP} 16 --data-parallel-hybrid-lb "
                "--data-parallel-size-local 8 --data-parallel-start-rank "
                f"$(( 8 * {GROVE_RANK} )) --data-parallel-address "
                f"{GROVE_LEADER} --data-parallel-rpc-port 13445"
            ],
        ),
        id="args worker with data parallel launch Grove",
    ),
    pytest.param(
        2,
        WORKER,
        grove(),
        {},
        ["python3"],
        ["-m", "dynamo.vllm", DP, "8", TP, "2"],
        "8",
        (
            ["sh", "-c"],
            [
                f"exec python3 -m dynamo.vllm {DP} 8 {TP} 2 --data-parallel-hybrid-lb "
                "--data-parallel-size-local 4 --data-parallel-start-rank "
                f"$(( 4 * {GROVE_RANK} )) --data-parallel-address {GROVE_LEADER} "
                "--data-parallel-rpc-port 13445"
            ],
        ),
        id="args worker with data parallel launch Grove, tp > 1",
    ),
    pytest.param(
        2,
        WORKER,
        lws_addr(),
        {},
        None,
        ["python3", "-m", "dynamo.vllm", TP, "16"],
        "8",
        (["/bin/sh", "-c"], ["ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"]),
        id="args worker with ray distributed launch LWS (nil annotations)",
    ),
    pytest.param(
        2,
        MAIN,
        grove(),
        {},
        None,
        ["python3", "-m", "dynamo.frontend"],
        None,
        UNCHANGED,
        id="args main role does not modify args",
    ),
]


@pytest.mark.parametrize(
    ("nodes", "role", "addr", "annotations", "command", "args", "gpus", "want"), VLLM_CASES
)
def test_vllm_multinode_launch(
    nodes: int,
    role: str,
    addr: Addressing,
    annotations: dict[str, str],
    command: list[str] | None,
    args: list[str],
    gpus: str | None,
    want: tuple[list[str] | None, list[str]] | None,
) -> None:
    c = with_probes(container(command, args, gpus))
    before = copy.deepcopy(c)
    pod: Obj = {"containers": [c]}
    multinode.vllm(c, pod, role, nodes, annotations, "test-dgd-wait-leader-script", addr)
    if want is UNCHANGED:
        assert (c.get("command"), c["args"]) == (before.get("command"), before["args"])
    else:
        assert (c.get("command"), c["args"]) == want
    # UpdateContainer: a multinode worker loses every probe, the leader keeps them
    assert PROBES & set(c) == (set() if role == WORKER else PROBES)


@pytest.mark.parametrize(
    ("command", "args"),
    [
        pytest.param(["python3", "-m", "dynamo.vllm"], [f"{TP}=16"], id="= form"),
        pytest.param(["python3", "-m", "dynamo.vllm"], ["-tp", "16"], id="short alias"),
        pytest.param(["python3", "-m", "dynamo.vllm", TP, "16"], [], id="in the command"),
        pytest.param(["python3", "-m", "dynamo.vllm"], [TP, "x", TP, "1"], id="first integer"),
    ],
)
def test_vllm_reads_parallel_sizes_like_the_operator(command: list[str], args: list[str]) -> None:
    # Go: getExpandedArgs / getFlagValue, behind the cases above: only the args, split on
    # whitespace, the exact long flag followed by an integer; so none of these spans nodes
    c = container(command, args, gpus="8")
    multinode.vllm(c, {"containers": [c]}, LEADER, 2, {}, "cm", grove())
    assert (c["command"], c["args"]) == (command, args)


# Go: TestVLLMBackend_ShellCommandInjection (every multinode case): data parallel over 2
# nodes of 4 GPUs, flags injected into the shell form; the user's --data-parallel-size 8
# stays and is not added again
@pytest.mark.parametrize(
    ("addr", "arg", "want"),
    [
        pytest.param(
            grove(),
            f"python3 -m dynamo.vllm {DP} 8",
            "python3 -m dynamo.vllm {flags} {DP} 8",
            id="multinode shell command with regex injection",
        ),
        pytest.param(
            grove(),
            f"echo blah | wc -l && python3 -m dynamo.vllm {DP} 8 && ls -al",
            "echo blah | wc -l && python3 -m dynamo.vllm {flags} {DP} 8 && ls -al",
            id="multinode shell command with complex pipeline",
        ),
        pytest.param(
            lws_addr(),
            f"python3 -m dynamo.vllm {DP} 8",
            "python3 -m dynamo.vllm {flags} {DP} 8",
            id="shell command with LWS deployer",
        ),
        pytest.param(
            grove(),
            f"python3 -m dynamo.vllm {DP} 8 | tee /tmp/log",
            "python3 -m dynamo.vllm {flags} {DP} 8 | tee /tmp/log",
            id="shell command with pipes",
        ),
    ],
)
def test_vllm_shell_command_injection(addr: Addressing, arg: str, want: str) -> None:
    c = container(["sh", "-c"], [arg], gpus="4")
    multinode.vllm(c, {"containers": [c]}, LEADER, 2, {}, "cm", addr)
    flags = (
        "--data-parallel-hybrid-lb --data-parallel-size-local 4 --data-parallel-start-rank "
        f"0 --data-parallel-address {addr.leader_host} --data-parallel-rpc-port 13445"
    )
    assert c["args"] == [want.format(flags=flags, DP=DP)]
    assert c["command"] == ["sh", "-c"]


# Go: TestVLLMBackend_UpdateContainer: VLLM_NIXL_SIDE_CHANNEL_HOST whenever the DGD uses
# the mp executor, on both roles and whichever launch was needed
@pytest.mark.parametrize("role", [LEADER, WORKER])
@pytest.mark.parametrize(
    ("annotations", "args", "has_env"),
    [
        pytest.param(_origin(), ["-m", "dynamo.vllm", TP, "16"], True, id="mp, tp spans nodes"),
        pytest.param(MP_OVERRIDE, ["-m", "dynamo.vllm", DP, "16"], True, id="mp, data parallel"),
        pytest.param(MP_OVERRIDE, ["-m", "dynamo.vllm"], True, id="mp, no launch flags"),
        pytest.param({}, ["-m", "dynamo.vllm", TP, "16"], False, id="ray"),
    ],
)
def test_vllm_mp_side_channel_host(
    role: str, annotations: dict[str, str], args: list[str], has_env: bool
) -> None:
    c = container(["python3"], args, gpus="8")
    multinode.vllm(c, {"containers": [c]}, role, 2, annotations, "cm", grove())
    env = {e["name"]: e for e in c.get("env") or []}
    if has_env:
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == {
            "name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
        }
    else:
        assert "VLLM_NIXL_SIDE_CHANNEL_HOST" not in env


# Go: TestVLLMBackend_UpdatePodSpec (multinode cases). The 1.1-line operator decides on the
# worker's rendered command line (it has --distributed-executor-backend mp); the v1alpha1-era
# test decided on the annotations alone, so here the containers take the mp launch
# (TP 16 over 8 GPUs) for the annotated cases.
@pytest.mark.parametrize(
    ("role", "addr", "annotations", "init", "leader_host"),
    [
        pytest.param(
            WORKER,
            grove(),
            _origin(),
            [],
            "${GROVE_PCSG_NAME}-${GROVE_PCSG_INDEX}-test-service-ldr-0.${GROVE_HEADLESS_SERVICE}",
            id="mp worker with Grove deployer injects init container",
        ),
        pytest.param(
            WORKER,
            lws_addr(),
            _origin(),
            [],
            "${LWS_LEADER_ADDRESS}",
            id="mp worker with LWS deployer injects init container",
        ),
        pytest.param(
            LEADER, grove(), _origin(), [], None, id="mp leader does not inject init container"
        ),
        pytest.param(
            WORKER, grove(), {}, [], None, id="ray worker does not inject init container (legacy)"
        ),
        pytest.param(
            WORKER,
            grove(),
            _origin(),
            [{"name": "existing-init", "image": "busybox"}],
            "${GROVE_PCSG_NAME}-${GROVE_PCSG_INDEX}-test-service-ldr-0.${GROVE_HEADLESS_SERVICE}",
            id="mp worker preserves existing init containers",
        ),
    ],
)
def test_vllm_mp_worker_waits_for_leader(
    role: str,
    addr: Addressing,
    annotations: dict[str, str],
    init: list[Obj],
    leader_host: str | None,
) -> None:
    c = container(["python3", "-m", "dynamo.vllm"], [TP, "16"], gpus="8", image="vllm:v2")
    pod: Obj = {"containers": [c], **({"initContainers": copy.deepcopy(init)} if init else {})}
    multinode.vllm(c, pod, role, 2, annotations, "test-dgd-wait-leader-script", addr)
    if leader_host is None:
        assert pod.get("initContainers", []) == init and "volumes" not in pod
        return
    assert pod["initContainers"][:-1] == init
    assert pod["initContainers"][-1] == {
        "name": "wait-for-leader-mp",
        "image": "vllm:v2",
        "command": [
            "sh",
            "-c",
            f'export LEADER_HOST="{leader_host}" LEADER_PORT="29500" && '
            "exec python3 /scripts/wait-for-leader.py",
        ],
        "volumeMounts": [{"name": "wait-leader-script", "mountPath": "/scripts", "readOnly": True}],
    }
    assert pod["volumes"] == [
        {"name": "wait-leader-script", "configMap": {"name": "test-dgd-wait-leader-script"}}
    ]


@pytest.mark.parametrize(
    "backend_arg",
    [["--distributed-executor-backend=mp"], ["--distributed-executor-backend", "mp"]],
)
def test_vllm_worker_written_with_mp_waits_for_leader(backend_arg: list[str]) -> None:
    # shouldInjectVLLMMpWaitLeaderInit / containerCommandLineHasArg (backend_vllm.go,
    # utils.go @ 2a6da14c8): any worker whose command line runs the mp executor, also one
    # the user wrote (here cross-node data parallel, so no flags were injected for it)
    c = container(["python3", "-m", "dynamo.vllm"], [DP, "16", *backend_arg], gpus="8")
    pod: Obj = {"containers": [c]}
    multinode.vllm(c, pod, WORKER, 2, {}, "cm", lws_addr())
    assert [i["name"] for i in pod["initContainers"]] == ["wait-for-leader-mp"]


def test_wait_leader_config_map() -> None:
    # Go: TestGenerateWaitLeaderConfigMap, TestGetWaitLeaderConfigMapName. The script is
    # the operator's WaitLeaderScript (backend_vllm.go @ 2a6da14c8), byte for byte as the
    # operator wrote it (conformance/operator-output): leader pod Running per the API
    # server (TCP only without RBAC), then its port
    assert lws.wait_leader_config_map_name("foo") == "foo-wait-leader-script"
    cm = lws.wait_leader_config_map("my-dgd", "my-ns")
    assert (cm["metadata"]["name"], cm["metadata"]["namespace"]) == (
        "my-dgd-wait-leader-script",
        "my-ns",
    )
    assert cm["metadata"]["labels"] == {keys.LABEL_GRAPH_NAME: "my-dgd"}
    assert list(cm["data"]) == ["wait-for-leader.py"]
    script = cm["data"]["wait-for-leader.py"]
    compile(script, "wait-for-leader.py", "exec")
    assert "fieldSelector=status.podIP={ip}" in script and 'if phase != "Running"' in script
    made = (
        CONFORMANCE.parent
        / "operator-output"
        / "examples__backends__vllm__deploy__disagg-multinode.yaml"
    )
    if made.exists():
        theirs = next(
            d
            for d in yaml.safe_load_all(made.read_text(encoding="utf-8"))
            if d and d["kind"] == "ConfigMap"
        )
        assert theirs["data"] == cm["data"]


# Go: TestShouldUseMpBackend (the whole table)
@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({}, False, id="nil or empty annotations = legacy = ray"),
        pytest.param(
            _origin("0.1.0", **MP_OVERRIDE),
            True,
            id="explicit override mp takes priority over version",
        ),
        pytest.param(
            _origin(**{keys.ANN_VLLM_EXECUTOR_BACKEND: "ray"}),
            False,
            id="explicit override ray takes priority over version",
        ),
        pytest.param(MP_OVERRIDE, True, id="explicit override mp (no origin version)"),
        pytest.param(
            _origin(**{keys.ANN_VLLM_EXECUTOR_BACKEND: "invalid"}),
            True,
            id="explicit override with invalid value falls through to feature gate",
        ),
        pytest.param(
            {keys.ANN_VLLM_EXECUTOR_BACKEND: "MP"}, True, id="explicit override case insensitive MP"
        ),
        pytest.param(
            _origin(**{keys.ANN_VLLM_EXECUTOR_BACKEND: "RAY"}),
            False,
            id="explicit override case insensitive Ray",
        ),
    ],
)
def test_vllm_uses_mp(annotations: dict[str, str], want: bool) -> None:
    assert multinode.vllm_uses_mp(annotations) is want


# ================================================================================== TRT-LLM
SECRET = "mpi-run-ssh-secret"
SSH_VOLUME = {"name": SECRET, "secret": {"secretName": SECRET, "defaultMode": 0o644}}
SSH_MOUNT = {"name": SECRET, "mountPath": "/ssh-pk", "readOnly": True}
OMPI_ENV = {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "1"}
# the -x list of the Go UpdateContainer cases: the fixed set plus the container's env,
# which by then holds OMPI_MCA_orte_keep_fqdn_hostnames
X_LIST = (
    "-x CPATH -x CUDA_VISIBLE_DEVICES -x HF_DATASETS_CACHE -x HF_ENDPOINT -x HF_HOME -x HF_TOKEN "
    "-x HOME -x HUGGING_FACE_HUB_TOKEN -x LD_LIBRARY_PATH -x MODEL_PATH -x NCCL_DEBUG "
    "-x NCCL_IB_DISABLE -x NCCL_P2P_DISABLE -x OMPI_MCA_orte_keep_fqdn_hostnames -x PATH "
    "-x PYTHONPATH -x TENSORRT_LLM_CACHE_DIR -x TOKENIZERS_PARALLELISM "
    "-x TRANSFORMERS_CACHE -x TRITON_PTXAS_PATH -x TRTLLM_USE_UCX_KVCACHE -x USER"
)
LWS_WORKER_1 = "$(echo \"$LWS_LEADER_ADDRESS\" | sed 's/\\./-1\\./')"
# ERRATA 3 / backend_trtllm.go @ 2a6da14c8: the SSH client set-up both roles start with,
# the worker's sshd (three host keys, a non-root sshd_config), the leader's DNS wait
SSH_CLIENT = (
    "ls -la /ssh-pk/",
    "cp /ssh-pk/private.key $HOME/.ssh/id_rsa",
    "cp /ssh-pk/private.key.pub $HOME/.ssh/id_rsa.pub",
    "cp /ssh-pk/private.key.pub $HOME/.ssh/authorized_keys",
    "chmod 600 $HOME/.ssh/id_rsa $HOME/.ssh/authorized_keys",
    "chmod 644 $HOME/.ssh/id_rsa.pub",
    "printf 'Host *\\nIdentityFile '$HOME'/.ssh/id_rsa\\nStrictHostKeyChecking no\\nPort 2222\\n'"
    " > $HOME/.ssh/config",
)
LEADER_SSH = ("mkdir -p $HOME/.ssh", *SSH_CLIENT)
WORKER_SSHD = " && ".join(
    (
        "mkdir -p $HOME/.ssh $HOME/.ssh/host_keys $HOME/.ssh/run",
        *SSH_CLIENT,
        "ssh-keygen -t rsa -f $HOME/.ssh/host_keys/ssh_host_rsa_key -N ''",
        "ssh-keygen -t ecdsa -f $HOME/.ssh/host_keys/ssh_host_ecdsa_key -N ''",
        "ssh-keygen -t ed25519 -f $HOME/.ssh/host_keys/ssh_host_ed25519_key -N ''",
        "printf 'Port 2222\\nHostKey '$HOME'/.ssh/host_keys/ssh_host_rsa_key\\n"
        "HostKey '$HOME'/.ssh/host_keys/ssh_host_ecdsa_key\\n"
        "HostKey '$HOME'/.ssh/host_keys/ssh_host_ed25519_key\\n"
        "PidFile '$HOME'/.ssh/run/sshd.pid\\nStrictModes no\\nPermitRootLogin yes\\n"
        "PasswordAuthentication no\\nPubkeyAuthentication yes\\n"
        "AuthorizedKeysFile '$HOME'/.ssh/authorized_keys\\n' > $HOME/.ssh/sshd_config",
        "/usr/sbin/sshd -D -f $HOME/.ssh/sshd_config",
    )
)


def dns_wait(workers: str) -> str:
    return (
        "TIMEOUT=300; START_TIME=$(date +%s); for worker in " + workers + "; do echo "
        '"Waiting for DNS: $worker"; until getent hosts $worker >/dev/null 2>&1; do '
        "CURRENT_TIME=$(date +%s); if [ $((CURRENT_TIME - START_TIME)) -gt $TIMEOUT ]; then "
        'echo "ERROR: Timeout waiting for DNS: $worker"; exit 1; fi; echo "DNS not ready for '
        '$worker, retrying..."; sleep 2; done; echo "\u2713 DNS resolved: $worker"; done; '
        'echo "All workers DNS ready"'
    )


def grove_hosts(service: str, nodes: int) -> str:
    base = f"$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-{service}"
    return ",".join(
        [
            f"{base}-ldr-0.$(GROVE_HEADLESS_SERVICE)",
            *(f"{base}-wkr-{i}.$(GROVE_HEADLESS_SERVICE)" for i in range(nodes - 1)),
        ]
    )


def mpirun(n: int, hosts: str, launch: str, x_list: str = X_LIST) -> str:
    return (
        f'mpirun $([ "$(id -u)" = "0" ] && echo --allow-run-as-root) --oversubscribe -n {n} '
        f'-H {hosts} --mca pml ob1 --mca plm_rsh_args "-p 2222 -o StrictHostKeyChecking=no '
        f"-i $HOME/.ssh/id_rsa\" {x_list} bash -c 'trtllm-llmapi-launch {launch}'"
    )


def trt_pod(
    c: Obj, role: str, nodes: int, addr: Addressing, volumes: list[Obj] | None = None
) -> Obj:
    pod: Obj = {"containers": [c], **({"volumes": volumes} if volumes else {})}
    multinode.trtllm(c, pod, role, nodes, SECRET, addr)
    return pod


def launch_line(c: Obj) -> str:
    """The leader's mpirun command: everything from ``mpirun`` on (before it: the SSH
    client set-up and, on LWS, the DNS wait)."""
    assert c["command"] == ["/bin/sh", "-c"] and len(c["args"]) == 1
    line: str = c["args"][0]
    return line[line.index("mpirun ") :]


# Go: TestShellQuoteForBashC (the whole table)
@pytest.mark.parametrize(
    ("token", "want"),
    [
        pytest.param("--model-path", "--model-path", id="Simple flag - no quoting needed"),
        pytest.param("/usr/bin/python3", "/usr/bin/python3", id="Simple path - no quoting needed"),
        pytest.param("", "", id="Empty string - no quoting needed"),
        pytest.param(
            '{"load_format": "DUMMY", "tensor_parallel_size": 8}',
            '"{\\"load_format\\": \\"DUMMY\\", \\"tensor_parallel_size\\": 8}"',
            id="JSON override-engine-args (primary use case)",
        ),
        pytest.param("$HOME/path", '"\\$HOME/path"', id="String with dollar sign is escaped"),
        pytest.param("hello `world`", '"hello \\`world\\`"', id="String with backtick is escaped"),
        pytest.param(
            "path\\to\\file",
            '"path\\\\to\\\\file"',
            id="Backslash is escaped first to avoid double-escaping",
        ),
    ],
)
def test_shell_quote(token: str, want: str) -> None:
    assert multinode.quote(token) == want
    assert multinode.quote(token, single_quoted=True) == want


def test_shell_quote_single_quote() -> None:
    # Go: TestShellQuoteForBashC "Single quote breaks out of outer bash -c context". The
    # operator writes it so everywhere; we do where the token sits inside TRT-LLM's
    # bash -c '...' and keep a plain "it's" in sh -c (the operator's form is an unterminated
    # quote there: flag injection and the Ray leader)
    assert multinode.quote("it's", single_quoted=True) == '"it\'"\'"\'s"'
    assert multinode.quote("it's") == '"it\'s"'
    c = container(["python3", "-m", "dynamo.trtllm"], ["--chat-template", "it's"], gpus="1")
    trt_pod(c, LEADER, 2, grove(2, "dec"))
    assert launch_line(c).endswith(
        "bash -c 'trtllm-llmapi-launch python3 -m dynamo.trtllm --chat-template \"it'\"'\"'s\"'"
    )


def test_shell_quote_in_leader_command() -> None:
    # Go: TestShellQuoteForBashC_InLeaderCommand: JSON in --override-engine-args survives
    # the outer bash -c '...'
    json_arg = '{"load_format": "DUMMY", "tensor_parallel_size": 8}'
    c = container(
        ["python3", "-m", "dynamo.trtllm"],
        ["--model-path", "deepseek-ai/DeepSeek-R1", "--override-engine-args", json_arg],
    )
    c["resources"] = {"requests": {naming.GPU_RESOURCE: "4"}}
    trt_pod(c, LEADER, 2, grove(2, "dec"))
    line = launch_line(c)
    assert (
        '--override-engine-args "{\\"load_format\\": \\"DUMMY\\", \\"tensor_parallel_size\\": 8}"'
    ) in line
    assert "bash -c 'trtllm-llmapi-launch python3 -m dynamo.trtllm " in line


def test_trtllm_leader_grove() -> None:
    # Go: TestTRTLLMBackend_UpdateContainer "Multinode leader with GPU resources"
    c = with_probes(
        {
            "name": "main",
            "args": ["python3", "--model", "test"],
            "resources": {"requests": {naming.GPU_RESOURCE: "2"}},
        }
    )
    trt_pod(c, LEADER, 3, grove(3))
    assert c["volumeMounts"] == [SSH_MOUNT]
    assert c["env"] == [OMPI_ENV]
    assert launch_line(c) == mpirun(6, grove_hosts("test-service", 3), "python3 --model test")
    assert "getent" not in c["args"][0]  # Grove names resolve: no DNS wait
    assert set(c) >= PROBES and c["readinessProbe"] == {"initialDelaySeconds": 10}


def test_trtllm_worker() -> None:
    # Go: TestTRTLLMBackend_UpdateContainer "Multinode worker", and
    # TestTRTLLMBackend_setupWorkerContainer (both cases: the original command or args are
    # replaced by SSH setup and sshd; that script is our own)
    for command, args in ((None, ["some", "args"]), (["original", "command"], None)):
        c = with_probes(container(command, args))
        trt_pod(c, WORKER, 3, grove(3))
        assert c["volumeMounts"] == [SSH_MOUNT]
        assert c["env"] == [OMPI_ENV]
        assert "livenessProbe" not in c and "startupProbe" not in c
        assert c["readinessProbe"] == {
            "tcpSocket": {"port": 2222},
            "initialDelaySeconds": 20,
            "periodSeconds": 20,
            "timeoutSeconds": 5,
            "failureThreshold": 10,
        }
        assert c["command"] == ["/bin/sh", "-c"] and c["args"] == [WORKER_SSHD]


def test_trtllm_leader_lws_waits_for_worker_dns() -> None:
    # Go: TestTRTLLMBackend_UpdateContainer "Multinode leader with LWS deployment"
    c = with_probes(
        {
            "name": "main",
            "args": ["python3", "--model", "test"],
            "resources": {"limits": {naming.GPU_RESOURCE: "1"}},
        }
    )
    trt_pod(c, LEADER, 2, lws_addr(2))
    assert c["volumeMounts"] == [SSH_MOUNT] and c["env"] == [OMPI_ENV]
    assert launch_line(c) == mpirun(
        2, f"$(LWS_LEADER_ADDRESS),{LWS_WORKER_1}", "python3 --model test"
    )
    # before mpirun: the SSH client set-up, then wait until every worker's name resolves
    # (not the leader's own), 300 s in all
    assert c["args"][0] == " && ".join((*LEADER_SSH, dns_wait(LWS_WORKER_1), launch_line(c)))
    assert set(c) >= PROBES


def test_trtllm_leader_grove_does_not_wait_for_dns() -> None:
    # backend_trtllm.go @ 2a6da14c8 setupLeaderContainer: NeedsDNSWait is false on Grove
    c = container(["python3", "-m", "dynamo.trtllm"], ["--model", "m"], gpus="1")
    trt_pod(c, LEADER, 2, grove())
    assert c["args"][0] == " && ".join((*LEADER_SSH, launch_line(c)))


# Go: TestTRTLLMBackend_UpdatePodSpec (multinode cases), TestTRTLLMBackend_addSSHVolumeMount
@pytest.mark.parametrize(
    ("role", "nodes", "addr", "volumes"),
    [
        pytest.param(LEADER, 3, grove(3), [], id="Multinode leader - SSH volume added"),
        pytest.param(WORKER, 2, lws_addr(2), [], id="Multinode worker - SSH volume added"),
        pytest.param(
            LEADER, 2, grove(2), [{"name": "existing-volume"}], id="Multinode with existing volumes"
        ),
    ],
)
def test_trtllm_ssh_volume(role: str, nodes: int, addr: Addressing, volumes: list[Obj]) -> None:
    pod = trt_pod(
        container(["python3"], ["-m", "dynamo.trtllm"]), role, nodes, addr, copy.deepcopy(volumes)
    )
    assert pod["volumes"] == [*volumes, SSH_VOLUME]


@pytest.mark.parametrize("mounts", [[], [{"name": "existing-mount", "mountPath": "/existing"}]])
def test_trtllm_ssh_mount_is_appended(mounts: list[Obj]) -> None:
    c = container(["python3"], ["-m", "dynamo.trtllm"], volumeMounts=copy.deepcopy(mounts))
    trt_pod(c, LEADER, 2, grove())
    assert c["volumeMounts"] == [*mounts, SSH_MOUNT]


# Go: TestTRTLLMBackend_hostNamesList (the whole table): mpirun's -H list, leader first
@pytest.mark.parametrize(
    ("addr", "want"),
    [
        pytest.param(
            grove(3, "test-service"),
            grove_hosts("test-service", 3).split(","),
            id="Grove deployment with 3 nodes",
        ),
        pytest.param(
            lws_addr(2), ["$(LWS_LEADER_ADDRESS)", LWS_WORKER_1], id="LWS deployment with 2 nodes"
        ),
        pytest.param(
            grove(5, "worker"),
            grove_hosts("worker", 5).split(","),
            id="Grove deployment with 5 nodes",
        ),
        pytest.param(
            lws_addr(4),
            [
                "$(LWS_LEADER_ADDRESS)",
                LWS_WORKER_1,
                "$(echo \"$LWS_LEADER_ADDRESS\" | sed 's/\\./-2\\./')",
                "$(echo \"$LWS_LEADER_ADDRESS\" | sed 's/\\./-3\\./')",
            ],
            id="LWS deployment with 4 nodes",
        ),
    ],
)
def test_mpi_host_names(addr: Addressing, want: list[str]) -> None:
    assert list(addr.mpi_hosts) == want


# Go: TestTRTLLMBackend_setupLeaderContainer (the whole table)
@pytest.mark.parametrize(
    ("nodes", "addr", "command", "args", "resources", "env", "n", "hosts", "launch", "x_list"),
    [
        pytest.param(
            3,
            grove(3),
            None,
            ["python3", "--model", "test"],
            {"requests": "2"},
            [],
            6,
            grove_hosts("test-service", 3),
            "python3 --model test",
            X_LIST,
            id="Leader with args and GPU resources",
        ),
        pytest.param(
            2,
            lws_addr(2),
            ["python", "-m", "worker"],
            None,
            {},
            [],
            0,
            f"$(LWS_LEADER_ADDRESS),{LWS_WORKER_1}",
            "python -m worker",
            X_LIST,
            id="Leader with command and no GPU resources",
        ),
        pytest.param(
            2,
            grove(2, "test"),
            ["sh", "-c"],
            ["launch", "--config", "test.yaml"],
            {"limits": "1"},
            [],
            2,
            grove_hosts("test", 2),
            "launch --config test.yaml",
            X_LIST,
            id="Leader with both command and args (shell command)",
        ),
        pytest.param(
            2,
            grove(2, "test"),
            ["python3"],
            ["-m", "dynamo.trtllm", "--model-path", "test"],
            {"limits": "1"},
            [],
            2,
            grove_hosts("test", 2),
            "python3 -m dynamo.trtllm --model-path test",
            X_LIST,
            id="Leader with python command and args (combined)",
        ),
        pytest.param(
            2,
            grove(2, "test"),
            ["python3", "-m", "dynamo.trtllm"],
            [
                "--model-path",
                "Qwen/Qwen3-0.6B",
                "--served-model-name",
                "Qwen/Qwen3-0.6B",
                "--disaggregation-mode",
                "prefill",
            ],
            {"limits": "1"},
            [],
            2,
            grove_hosts("test", 2),
            "python3 -m dynamo.trtllm --model-path Qwen/Qwen3-0.6B "
            "--served-model-name Qwen/Qwen3-0.6B --disaggregation-mode prefill",
            X_LIST,
            id="Leader with python module command and separate args",
        ),
        pytest.param(
            2,
            grove(2, "test"),
            ["/usr/bin/python3.8"],
            ["-m", "dynamo.trtllm", "--model-path", "test"],
            {"limits": "1"},
            [],
            2,
            grove_hosts("test", 2),
            "/usr/bin/python3.8 -m dynamo.trtllm --model-path test",
            X_LIST,
            id="Leader with absolute path python command",
        ),
        pytest.param(
            2,
            grove(2, "test"),
            None,
            ["serve", "--model", "test"],
            {"requests": "1"},
            [],
            2,
            grove_hosts("test", 2),
            "serve --model test",
            X_LIST,
            id="Leader with all environment variables forwarded",
        ),
        pytest.param(
            2,
            grove(2, "test"),
            None,
            ["serve", "--model", "test"],
            {"requests": "1"},
            [
                {"name": "CUDA_VISIBLE_DEVICES", "value": "0,1"},
                {"name": "CUSTOM_VAR", "value": "test_value"},
                {"name": "PATH", "value": "/custom/path"},
            ],
            2,
            grove_hosts("test", 2),
            "serve --model test",
            X_LIST.replace("-x CUDA_VISIBLE_DEVICES", "-x CUDA_VISIBLE_DEVICES -x CUSTOM_VAR"),
            id="Leader with overlapping environment variables (deduplication test)",
        ),
    ],
)
def test_trtllm_leader_command(
    nodes: int,
    addr: Addressing,
    command: list[str] | None,
    args: list[str] | None,
    resources: dict[str, str],
    env: list[Obj],
    n: int,
    hosts: str,
    launch: str,
    x_list: str,
) -> None:
    c = container(command, args, env=copy.deepcopy(env))
    if resources:
        c["resources"] = {side: {naming.GPU_RESOURCE: v} for side, v in resources.items()}
    trt_pod(c, LEADER, nodes, addr)
    assert launch_line(c) == mpirun(n, hosts, launch, x_list)
    assert ("getent hosts" in c["args"][0]) is addr.dns_wait


def test_trtllm_leader_shell_command_without_args_launches_its_command() -> None:
    # Go: setupLeaderContainer's fallback (no Go case): a non-python command without args
    c = container(["trtllm-serve", "--config", "x.yaml"], None, gpus="1")
    trt_pod(c, LEADER, 2, grove(2, "test"))
    assert launch_line(c).endswith("bash -c 'trtllm-llmapi-launch trtllm-serve --config x.yaml'")


# Go: TestTRTLLMBackend_getGPUsPerNode (the whole table), read through mpirun's
# -n (2 nodes x GPUs per node)
@pytest.mark.parametrize(
    ("resources", "gpus"),
    [
        pytest.param(None, 0, id="No resources - default to 0"),
        pytest.param({}, 0, id="Empty resources - default to 0"),
        pytest.param({"requests": {naming.GPU_RESOURCE: "2"}}, 2, id="GPU in requests"),
        pytest.param({"limits": {naming.GPU_RESOURCE: "4"}}, 4, id="GPU in limits"),
        # ResolveContainerGPUs (graph.go, internal/dra/dra.go @ 2a6da14c8; #12166): the
        # count vLLM and TRT-LLM share reads limits first (the 1.1 TRT-LLM read requests)
        pytest.param(
            {"requests": {naming.GPU_RESOURCE: "3"}, "limits": {naming.GPU_RESOURCE: "8"}},
            8,
            id="GPU in both requests and limits - limits take precedence",
        ),
        pytest.param(
            {"limits": {"amd.com/gpu": "2"}}, 2, id="any GPU resource name (isGPUResourceName)"
        ),
        pytest.param(
            {"requests": {naming.GPU_RESOURCE: "invalid"}}, 0, id="Invalid GPU value - default to 0"
        ),
        pytest.param(
            {"requests": {naming.GPU_RESOURCE: ""}}, 0, id="Empty GPU string - default to 0"
        ),
    ],
)
def test_trtllm_gpus_per_node(resources: Obj | None, gpus: int) -> None:
    c = container(["python3"], ["-m", "dynamo.trtllm"])
    if resources is not None:
        c["resources"] = resources
    trt_pod(c, LEADER, 2, grove())
    assert f" -n {2 * gpus} -H " in launch_line(c)


# ============================================================================= single node
def test_single_node_workers_are_left_alone(tmp_path: Path) -> None:
    # Go: the "Single node" cases of TestSGLangBackend_PythonCommandInjection /
    # _ShellCommandInjection / _ProbeRemoval, TestVLLMBackend_UpdateContainer /
    # _ShellCommandInjection / _UpdatePodSpec, TestTRTLLMBackend_UpdateContainer /
    # _UpdatePodSpec: no flags, probes kept, no init container, no SSH volume or env
    commands = {
        "sglang": (["python3"], ["-m", "dynamo.sglang"]),
        "vllm": (["sh", "-c"], ["python3 -m dynamo.vllm"]),
        "trtllm": (["python3", "-m", "dynamo.trtllm"], ["--model", "test"]),
    }
    for backend, (command, args) in commands.items():
        doc = {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "DynamoGraphDeployment",
            "metadata": {
                "name": f"single-{backend}",
                "namespace": "ns",
                "annotations": {keys.ANN_OPERATOR_ORIGIN_VERSION: "1.0.0"},
            },
            "spec": {
                "backendFramework": backend,
                "services": {
                    "worker": {
                        "componentType": "worker",
                        "replicas": 1,
                        "resources": {"limits": {"gpu": "1"}},
                        "extraPodSpec": {
                            "mainContainer": {
                                "image": "img:1.1.0",
                                "command": command,
                                "args": args,
                            }
                        },
                    }
                },
            },
        }
        path = tmp_path / f"{backend}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        [dep] = [o for o in render(path) if o["kind"] == "Deployment"]
        pod = dep["spec"]["template"]["spec"]
        main = pod["containers"][0]
        assert (main["command"], main["args"]) == (command, args), backend
        assert PROBES & set(main), backend
        assert "initContainers" not in pod, backend
        assert SECRET not in {v["name"] for v in pod.get("volumes") or []}, backend
        assert not {"OMPI_MCA_orte_keep_fqdn_hostnames", "VLLM_NIXL_SIDE_CHANNEL_HOST"} & {
            e["name"] for e in main.get("env") or []
        }, backend


# ========================================================================= vLLM elastic EP
def test_vllm_multinode_elastic_ep_runs_one_ray_cluster() -> None:
    # injectElasticEPRayLaunchFlags, multinode roles (backend_vllm.go @ 2a6da14c8, #8216):
    # no tensor parallelism over nodes, --enable-elastic-ep: the leader heads a Ray cluster
    # (POSIX-quoted engine command after a bounded wait for the head's port), a worker
    # joins once the leader's /live is 200. (Single-pod elastic EP is refused in podspec.)
    args = ["--enable-elastic-ep", "--data-parallel-backend", "ray", "--tag", "it's"]
    leader = container(["python3", "-m", "dynamo.vllm"], args, gpus="8")
    multinode.vllm(leader, {"containers": [leader]}, LEADER, 2, {}, "cm", lws_addr())
    assert leader["command"] == ["/bin/sh", "-c"]
    assert leader["args"] == [
        'ray start --head --port=6379 --block & i=0; until python3 -c "import socket; '
        "s=socket.create_connection(('127.0.0.1',6379),timeout=1); s.close()\" 2>/dev/null; "
        'do i=$((i+1)); [ "$i" -ge 150 ] && { echo "ERROR: Ray head did not start within '
        '300s" >&2; exit 1; }; sleep 2; done && python3 -m dynamo.vllm --enable-elastic-ep '
        "--data-parallel-backend ray --tag 'it'\\''s'"
    ]
    worker = with_probes(container(["python3", "-m", "dynamo.vllm"], args, gpus="8"))
    multinode.vllm(worker, {"containers": [worker]}, WORKER, 2, {}, "cm", lws_addr())
    assert worker["args"] == [
        'i=0; until python3 -c "import urllib.request; urllib.request.urlopen('
        "'http://$(LWS_LEADER_ADDRESS):9090/live', timeout=5)\" 2>/dev/null; do "
        'i=$((i+1)); [ "$i" -ge 720 ] && { echo "ERROR: leader /live did not become ready '
        "within 3h\" >&2; exit 1; }; echo 'waiting for leader dynamo.vllm /live to return "
        "200...'; sleep 15; done && ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"
    ]
    assert not PROBES & set(worker)
    # no command: the image's entrypoint is unknown, the leader is left as written
    bare = container(None, args, gpus="8")
    multinode.vllm(bare, {"containers": [bare]}, LEADER, 2, {}, "cm", lws_addr())
    assert "command" not in bare and bare["args"] == args
