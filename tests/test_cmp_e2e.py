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

import hashlib
import importlib
import importlib.resources
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import missing_component, need_binaries
from support.render_server import stop_servers

from dyn_gitops import keys
from dyn_gitops.argocd import plugin
from dyn_gitops.settings import REGISTRY

grpc = pytest.importorskip("grpc")  # a test dependency ([test] extra)

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "argocd"
SAMPLE = REPO / "samples" / "vllm-agg" / "input"
APP_PATH = "apps/llm"
SHA_LEN = 40
ANNOUNCED = ("name", "title", "tooltip", "itemType", "collectionType", "string")


def _binary(name: str) -> Path:
    """A binary from tools/test-bins/build.sh; under CI a missing one fails, else skips."""
    return need_binaries(name)[name]


# --- gRPC stubs ----------------------------------------------------------------------------
def _pinned_argocd_version() -> str | None:
    versions = REPO / "tools" / "test-bins" / "versions.env"
    m = (
        re.search(r"^argocd-cmp-server=(\S+)", versions.read_text(), re.M)
        if versions.exists()
        else None
    )
    return m.group(1) if m else None


def real_plugin_proto() -> Path | None:
    """Argo CD's plugin.proto at the pinned version: from the Go module cache build.sh fills,
    else downloaded into it from the Go module proxy (None: no Go, or no proxy)."""
    version = _pinned_argocd_version()
    if not version:
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    gomodcache = cache / "dyn-gitops" / "go-mod"
    rel = Path("github.com/argoproj/argo-cd") / f"v3@{version}" / "cmpserver/plugin/plugin.proto"
    for root in (os.environ.get("GOMODCACHE"), gomodcache):
        if root and (Path(root) / rel).is_file():
            return Path(root) / rel
    go = shutil.which("go")
    if go is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:  # outside any module, like build.sh
        proc = subprocess.run(
            [go, "mod", "download", "-json", f"github.com/argoproj/argo-cd/v3@{version}"],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=600,
            env={
                **os.environ,
                "GOMODCACHE": str(gomodcache),
                "GOWORK": "off",
                "GOFLAGS": "-mod=mod",
            },
        )
    return gomodcache / rel if proc.returncode == 0 and (gomodcache / rel).is_file() else None


@dataclass
class Stubs:
    pb: Any  # plugin_pb2
    grpc: Any  # plugin_pb2_grpc
    empty: Any  # google.protobuf.empty_pb2.Empty
    source: str  # which plugin.proto


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> Stubs:
    from google.protobuf import empty_pb2
    from grpc_tools import protoc

    src = tmp_path_factory.mktemp("proto-src")
    out = tmp_path_factory.mktemp("proto-out")
    shutil.copy(DATA / "proto" / "repository.proto", src)
    real = real_plugin_proto()
    if real is not None:  # Argo CD's file; only its import path is made local
        text = re.sub(
            r'import "[^"]*reposerver/repository/repository.proto";',
            'import "repository.proto";',
            real.read_text(),
        )
        source = str(real)
    else:
        text, source = (DATA / "proto" / "plugin.proto").read_text(), "tests/data trimmed copy"
    (src / "plugin.proto").write_text(text)
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    assert (
        protoc.main(
            [
                "protoc",
                f"-I{src}",
                f"-I{include}",
                f"--python_out={out}",
                f"--grpc_python_out={out}",
                "plugin.proto",
                "repository.proto",
            ]
        )
        == 0
    )
    sys.path.insert(0, str(out))
    try:
        pb = importlib.import_module("plugin_pb2")
        pb_grpc = importlib.import_module("plugin_pb2_grpc")
    finally:
        sys.path.remove(str(out))
    return Stubs(pb, pb_grpc, empty_pb2.Empty, source)


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


# --- the sidecar ----------------------------------------------------------------------------
@dataclass
class Sidecar:
    stubs: Stubs
    channel: Any
    client: Any
    log: Path
    tmp: Path  # the sidecar's TMPDIR

    def stream(
        self, repo: Path, app_rel: str, env: dict[str, str], chunk: int = 1024
    ) -> Iterator[Any]:
        """What repo-server sends: metadata, then the tar.gz of the repository root."""
        tgz = tar_gz(repo, exclude=(".git",))
        pb = self.stubs.pb
        yield pb.AppStreamRequest(
            metadata=pb.ManifestRequestMetadata(
                appName=Path(app_rel).name,
                appRelPath=app_rel,
                checksum=hashlib.sha256(tgz).hexdigest(),
                size=len(tgz),
                env=[pb.EnvEntry(name=k, value=v) for k, v in env.items()],
            )
        )
        for i in range(0, len(tgz), chunk):
            yield pb.AppStreamRequest(file=pb.File(chunk=tgz[i : i + chunk]))

    def generate(self, repo: Path, env: dict[str, str], app_rel: str = APP_PATH) -> list[str]:
        resp = self.client.GenerateManifest(self.stream(repo, app_rel, env), timeout=120)
        return list(resp.manifests)

    def announcements(self, repo: Path, env: dict[str, str]) -> list[dict[str, Any]]:
        resp = self.client.GetParametersAnnouncement(self.stream(repo, APP_PATH, env), timeout=60)
        return [
            {f: getattr(a, f) for f in ANNOUNCED} | {"required": a.required}
            for a in resp.parameterAnnouncements
        ]


def tar_gz(root: Path, exclude: tuple[str, ...] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if rel.parts[0] in exclude:
                continue
            tar.add(path, arcname=str(rel), recursive=False)
    return buf.getvalue()


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


# --- the application repository ----------------------------------------------------------------
def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A Git repository with one application at apps/llm (the vllm-agg sample) and a
    neighbour that is not ours; committed, so `dyn-gitops render --rev` sees the same."""
    r = tmp_path / "repo"
    app = r / APP_PATH
    app.mkdir(parents=True)
    shutil.copy(SAMPLE / "vllm-agg.yaml", app)
    (app / "dyn-gitops.yaml").write_text("operator-release: dynamo-platform\n")
    (r / "apps" / "other").mkdir()
    (r / "apps" / "other" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  a: b\n"
    )
    git(r, "init", "-q")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "app")
    return r


def repo_server_env(
    repo: Path,
    *,
    namespace: str = "llm-serving",
    app_env: dict[str, str] | None = None,
    parameters: list[dict[str, Any]] | None = None,
    kube_api_versions: str = "",
) -> dict[str, str]:
    """The environment repo-server sends (reposerver/repository/repository.go newEnv,
    getPluginEnvs; ApplicationSourcePluginParameters.Environ)."""
    sha = git(repo, "rev-parse", "HEAD")
    env = {
        "ARGOCD_APP_NAME": "llm",
        "ARGOCD_APP_NAMESPACE": namespace,
        "ARGOCD_APP_PROJECT_NAME": "default",
        "ARGOCD_APP_REVISION": sha,
        "ARGOCD_APP_REVISION_SHORT": sha[:7],
        "ARGOCD_APP_REVISION_SHORT_8": sha[:8],
        "ARGOCD_APP_SOURCE_REPO_URL": "https://git.example.com/platform/inference.git",
        "ARGOCD_APP_SOURCE_PATH": APP_PATH,
        "ARGOCD_APP_SOURCE_TARGET_REVISION": "main",
        "KUBE_VERSION": "1.31.4",
        "KUBE_API_VERSIONS": kube_api_versions,
    }
    for k, v in (app_env or {}).items():
        env[f"ARGOCD_ENV_{k}"] = v
    env["ARGOCD_APP_PARAMETERS"] = json.dumps(parameters) if parameters is not None else "null"
    for p in parameters or []:
        base = "PARAM_" + re.sub(r"[^A-Z0-9_]", "_", p["name"].upper())
        if "string" in p:
            env[base] = p["string"]
    return env


def reference(repo: Path, *flags: str) -> list[dict[str, Any]]:
    """What `dyn-gitops render` prints for the same commit, path and settings."""
    sha = git(repo, "rev-parse", "HEAD")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from dyn_gitops.oneshot import main; main()",
            "render",
            "--rev",
            sha,
            APP_PATH,
            *flags,
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")},
    )
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def without_source_root(manifests: list[str]) -> list[dict[str, Any]]:
    """Decode the manifests; check and drop the one annotation only the CMP knows."""
    out = []
    for text in manifests:
        obj = json.loads(text)
        ann = obj["metadata"].get("annotations") or {}
        if keys.ANN_RENDERER_VERSION in ann:
            assert ann.pop(keys.ANN_SOURCE_ROOT) == APP_PATH
            assert len(ann[keys.ANN_SOURCE_COMMIT]) == SHA_LEN
        else:
            assert keys.ANN_SOURCE_ROOT not in ann
        out.append(obj)
    return out


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
