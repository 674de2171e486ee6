"""End to end against the real argocd-cmp-server, driven over gRPC exactly as repo-server does.

The sidecar is started with the repository's plugin.yaml, on a Unix socket, with the same
``dyn-gitops`` the image installs (the launcher in front of the warm render server). The
test plays repo-server: for each call it tars and gzips the repository, sends the metadata
(application path, checksum, size and the environment repo-server builds: ARGOCD_APP_*,
KUBE_VERSION, KUBE_API_VERSIONS, ARGOCD_ENV_*, ARGOCD_APP_PARAMETERS, PARAM_*) and then
the file in 1 KiB chunks (ARGOCD_CMP_CHUNK_SIZE's default), as util/cmp/stream.go does.

Binaries come from tools/test-bins/build.sh: under CI=true a missing one fails the test,
elsewhere it is skipped with the reason. Python stubs are generated here with grpcio-tools
from Argo CD's own plugin.proto in the Go module cache (our trimmed copy otherwise).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.binaries import missing_component, need_binaries
from support.paths import REPO
from support.render_server import stop_servers
from support.repo_server import (
    ANNOUNCED,
    APP_PATH,
    DATA,
    SAMPLE,
    SHA_LEN,
    Sidecar,
    Stubs,
    build_stubs,
    git,
    make_repo,
    real_plugin_proto,
    reference,
    repo_server_env,
    without_source_root,
)

from dyn_gitops.argocd import plugin
from dyn_gitops.settings import REGISTRY

grpc = pytest.importorskip("grpc")  # a test dependency ([test] extra)


def _binary(name: str) -> Path:
    """A binary from tools/test-bins/build.sh; under CI a missing one fails, else skips."""
    return need_binaries(name)[name]


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> Stubs:
    return build_stubs(tmp_path_factory)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


def _fields(proto_text: str) -> set[tuple[str, str, str, str]]:
    """(message, type, name, number) of every field, comments and options ignored."""
    text = re.sub(r"//[^\n]*", "", proto_text)
    out = set()
    for m in re.finditer(r"message\s+(\w+)\s*\{(.*?)\n\}", text, re.S):
        for f in re.finditer(r"([\w.<>, ]+?)\s+(\w+)\s*=\s*(\d+)\s*;", m.group(2)):
            out.add(
                (
                    m.group(1),
                    " ".join(f.group(1).split()).replace("repeated ", "repeated:"),
                    f.group(2),
                    f.group(3),
                )
            )
    return out


def test_trimmed_proto_is_argo_cds() -> None:
    """Our fallback copy has Argo CD's names and field numbers (when the real one is here)."""
    real = real_plugin_proto()
    if real is None:
        missing_component(
            "Argo CD's plugin.proto: not in the Go module cache, and it could "
            "not be downloaded (needs Go and the Go module proxy)"
        )
    assert _fields((DATA / "proto" / "plugin.proto").read_text()) == _fields(real.read_text())
    services = re.findall(
        r"rpc\s+(\w+)\((stream )?([\w.]+)\)\s*returns\s*\((\w+)\)", real.read_text()
    )
    ours = re.findall(
        r"rpc\s+(\w+)\((stream )?([\w.]+)\)\s*returns\s*\((\w+)\)",
        (DATA / "proto" / "plugin.proto").read_text(),
    )
    assert sorted(ours) == sorted(services)
    repo_proto = real.parents[2] / "reposerver" / "repository" / "repository.proto"
    ann = {f for f in _fields(repo_proto.read_text()) if f[0] == "ParameterAnnouncement"}
    assert {f for f in _fields((DATA / "proto" / "repository.proto").read_text())} == ann


def _start_sidecar(stubs: Stubs, config: Path, workdir: Path) -> Iterator[Sidecar]:
    server = _binary("argocd-cmp-server")
    sockets, tmp, bindir = workdir / "plugins", workdir / "tmp", workdir / "bin"
    for d in (sockets, tmp, bindir):
        d.mkdir()
    # the image's dyn-gitops: the launcher written by `dyn-gitops cmp install-launcher`
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from dyn_gitops.oneshot import main; main()",
            "cmp",
            "install-launcher",
            str(bindir / "dyn-gitops"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    env = {
        "PATH": f"{bindir}:{os.path.dirname(sys.executable)}:/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(tmp),
        "ARGOCD_CMP_WORKDIR": str(tmp),
        "ARGOCD_PLUGINSOCKFILEPATH": str(sockets),
        "ARGOCD_CMP_SERVER_LOGFORMAT": "json",
    }
    if os.environ.get("PYTHONPATH"):  # the dyn_gitops under test, when not the installed one
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    log = workdir / "cmp-server.log"
    with log.open("wb") as out:
        child = subprocess.Popen(
            [str(server), "--config-dir-path", str(config.parent)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    sock = sockets / f"{plugin.PLUGIN_REF}.sock"
    try:
        for _ in range(300):
            if sock.exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert sock.exists(), f"argocd-cmp-server did not start:\n{log.read_text()}"
        channel = grpc.insecure_channel(f"unix://{sock}")
        grpc.channel_ready_future(channel).result(timeout=30)
        yield Sidecar(
            stubs, channel, stubs.grpc.ConfigManagementPluginServiceStub(channel), log, tmp
        )
        channel.close()
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        stop_servers(tmp)


def _server_log(tmp: Path) -> str:
    return (
        "".join(
            p.read_text(errors="replace")[-3000:]
            for p in tmp.glob("dyn-gitops-*/render-*.sock.log")
        )
        or "(none)"
    )


@pytest.fixture(scope="module")
def sidecar(stubs: Stubs) -> Iterator[Sidecar]:
    workdir = Path(tempfile.mkdtemp(prefix="dge"))  # short: Unix socket paths are limited
    try:
        config = workdir / "config" / "plugin.yaml"
        config.parent.mkdir()
        shutil.copy(REPO / "plugin.yaml", config)
        yield from _start_sidecar(stubs, config, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# --- acceptance ----------------------------------------------------------------------------------
def test_plugin_configuration(sidecar: Sidecar) -> None:
    resp = sidecar.client.CheckPluginConfiguration(sidecar.stubs.empty(), timeout=30)
    assert resp.isDiscoveryConfigured is False  # used by name: no MatchRepository stream
    assert resp.provideGitCreds is False


def test_parameters_announcement_matches_the_registry(sidecar: Sidecar, repo: Path) -> None:
    env = repo_server_env(repo)
    got = sidecar.announcements(
        repo,
        {
            k: env[k]
            for k in (  # newEnvRepoQuery's smaller set
                "ARGOCD_APP_NAME",
                "ARGOCD_APP_SOURCE_REPO_URL",
                "ARGOCD_APP_SOURCE_PATH",
                "ARGOCD_APP_SOURCE_TARGET_REVISION",
            )
        },
    )
    # proto3 cannot tell "" from unset: compare with the same defaults
    assert got == [
        {f: a.get(f, "") for f in ANNOUNCED} | {"required": False} for a in plugin.announcements()
    ]
    assert [a["name"] for a in got] == [s.cmp_parameter for s in REGISTRY]


def test_generate_returns_what_render_prints(sidecar: Sidecar, repo: Path) -> None:
    manifests = sidecar.generate(repo, repo_server_env(repo))
    assert without_source_root(manifests) == reference(repo, "--namespace", "llm-serving")
    # the neighbour application travelled in the tarball but is not rendered
    assert "other" not in {json.loads(m)["metadata"]["name"] for m in manifests}


def test_generate_is_stable_through_the_warm_server(sidecar: Sidecar, repo: Path) -> None:
    """Once the sidecar's render server runs, the answer is the same, byte for byte."""
    env = repo_server_env(repo)
    first = sidecar.generate(repo, env)
    sock = next(iter(sidecar.tmp.glob("dyn-gitops-*/render-*.sock")), None)
    for _ in range(300):
        if sock is not None and sock.with_suffix(".sock.pid").exists():
            break
        time.sleep(0.1)
        sock = next(iter(sidecar.tmp.glob("dyn-gitops-*/render-*.sock")), None)
    assert sock is not None, "the first generate starts a render server in the sidecar"
    for _ in range(3):
        assert sidecar.generate(repo, env) == first
    assert "(warm server)" in sidecar.log.read_text()


def test_invalid_dgd_is_an_error_with_file_and_line(sidecar: Sidecar, repo: Path) -> None:
    (repo / APP_PATH / "broken.yaml").write_text(
        "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata:\n"
        "  name: broken\nspec:\n  services:\n    Frontend:\n      componentType: frontend\n"
        "      replicas: many\n"
    )
    with pytest.raises(grpc.RpcError) as err:
        sidecar.generate(repo, repo_server_env(repo))
    details = err.value.details()
    assert "`dyn-gitops cmp generate` failed exit status 1" in details
    assert (
        "broken.yaml:9: DynamoGraphDeployment/broken: spec.services.Frontend.replicas:" in details
    )
    assert "nothing rendered" in details


def test_env_and_parameters_change_the_output_as_documented(sidecar: Sidecar, repo: Path) -> None:
    env = repo_server_env(
        repo,
        app_env={"DYN_GITOPS_DISCOVERY_BACKEND": "etcd", "DYN_GITOPS_EMIT_SOURCE": "true"},
        parameters=[
            {"name": "emit-source", "string": "false"},
            {"name": "namespace", "string": "team-b"},
        ],
    )
    got = without_source_root(sidecar.generate(repo, env))
    # parameters win over ARGOCD_ENV_* (emit-source), env applies (discovery-backend)
    assert got == reference(
        repo, "--namespace", "team-b", "--discovery-backend", "etcd", "--no-emit-source"
    )
    assert got != reference(repo, "--namespace", "team-b")


def test_grove_parameter_renders_podcliquesets(sidecar: Sidecar, repo: Path) -> None:
    """The Grove path through the plugin: a parameter turns it on, the output equals
    `dyn-gitops render --grove`, and a destination without Grove is told so."""
    env = repo_server_env(repo, parameters=[{"name": "grove", "string": "true"}])
    got = without_source_root(sidecar.generate(repo, env))
    assert got == reference(repo, "--namespace", "llm-serving", "--grove")
    assert {o["kind"] for o in got} >= {"PodCliqueSet"} and "Deployment" not in {
        o["kind"] for o in got
    }
    env = repo_server_env(
        repo,
        parameters=[{"name": "grove", "string": "true"}],
        kube_api_versions="v1,v1/Service,v1/ServiceAccount,v1/ConfigMap,"
        "rbac.authorization.k8s.io/v1,nvidia.com/v1alpha1",
    )
    with pytest.raises(grpc.RpcError) as err:
        sidecar.generate(repo, env)
    assert "install Grove, or set the setting grove to false" in err.value.details()


def test_dyn_gitops_yaml_is_below_env_and_parameters(sidecar: Sidecar, repo: Path) -> None:
    (repo / APP_PATH / "dyn-gitops.yaml").write_text("namespace: from-file\n")
    git(repo, "commit", "-qam", "settings file")
    plain = without_source_root(sidecar.generate(repo, repo_server_env(repo)))
    assert {o["metadata"]["namespace"] for o in plain} == {"from-file"}  # beats destination
    env = repo_server_env(repo, app_env={"DYN_GITOPS_NAMESPACE": "from-env"})
    assert {
        o["metadata"]["namespace"] for o in without_source_root(sidecar.generate(repo, env))
    } == {"from-env"}


def test_bad_setting_is_a_clear_error(sidecar: Sidecar, repo: Path) -> None:
    env = repo_server_env(repo, parameters=[{"name": "discovery-backend", "string": "zookeeper"}])
    with pytest.raises(grpc.RpcError) as err:
        sidecar.generate(repo, env)
    assert (
        "parameter discovery-backend: discovery-backend: found 'zookeeper', expected one of "
        "kubernetes, etcd"
    ) in err.value.details()


def test_missing_cluster_api_is_a_clear_error(sidecar: Sidecar, repo: Path) -> None:
    env = repo_server_env(
        repo,
        kube_api_versions="v1,v1/Service,v1/ServiceAccount,apps/v1,"
        "apps/v1/Deployment,rbac.authorization.k8s.io/v1",
    )
    with pytest.raises(grpc.RpcError) as err:
        sidecar.generate(repo, env)
    assert (
        "which the destination cluster does not serve (KUBE_API_VERSIONS): install the "
        "Dynamo CRDs" in err.value.details()
    )


def test_discovery_variant_matches_only_dynamo_applications(stubs: Stubs, repo: Path) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="dgd"))
    try:
        config = workdir / "config" / "plugin.yaml"
        config.parent.mkdir()
        shutil.copy(REPO / "deploy" / "argocd" / "plugin-discovery.yaml", config)
        for side in _start_sidecar(stubs, config, workdir):
            resp = side.client.CheckPluginConfiguration(stubs.empty(), timeout=30)
            assert resp.isDiscoveryConfigured is True
            env = repo_server_env(repo)
            ours = side.client.MatchRepository(side.stream(repo, APP_PATH, env), timeout=60)
            other = side.client.MatchRepository(side.stream(repo, "apps/other", env), timeout=60)
            assert (ours.isSupported, other.isSupported) == (True, False)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# --- warm generate through the launcher ---------------------------------------------------------
def test_warm_generate_through_the_launcher_equals_the_cold_one(tmp_path: Path) -> None:
    """The image's launcher: the first `generate` renders in-process and starts the warm
    server, later ones are served warm, byte for byte the same answer. (Its speed against
    `kustomize build` is measured by bench/warm_generate_vs_kustomize.py, not asserted.)"""
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(SAMPLE / "vllm-agg.yaml", app)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    launcher = bindir / "dyn-gitops"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from dyn_gitops.oneshot import main; main()",
            "cmp",
            "install-launcher",
            str(launcher),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    tmp = Path(tempfile.mkdtemp(prefix="dgb"))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp),
        "ARGOCD_APP_NAME": "llm",
        "ARGOCD_APP_NAMESPACE": "llm-serving",
        "ARGOCD_APP_REVISION": "0" * SHA_LEN,
        "ARGOCD_APP_SOURCE_PATH": APP_PATH,
        "KUBE_VERSION": "1.31.4",
    }
    gen_cmd = [str(launcher), "cmp", "generate"]
    try:
        cold = subprocess.run(
            gen_cmd, cwd=app, env=env, capture_output=True, text=True, timeout=120
        )
        assert cold.returncode == 0, cold.stderr
        assert "apiVersion:" in cold.stdout
        # the server starts in the background; until it listens, generate falls back to
        # in-process (same answer): poll until one is served warm, a hang guard only
        deadline = time.monotonic() + 120
        served_warm = 0
        while served_warm < 2:
            res = subprocess.run(
                gen_cmd, cwd=app, env=env, capture_output=True, text=True, timeout=120
            )
            why = f"stderr: {res.stderr}\nserver log: {_server_log(tmp)}"
            assert res.returncode == 0, why
            assert res.stdout == cold.stdout, why
            served_warm += "(warm server)" in res.stderr
            assert time.monotonic() < deadline, f"never served warm; {why}"
            time.sleep(0.1)
    finally:
        stop_servers(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
