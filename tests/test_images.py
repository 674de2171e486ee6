"""The two images of the Dockerfile, built here with podman from a Python base that mmdebstrap
assembles from Debian packages (tools/images/build.sh; cached by content key), then run as a
cluster would run them: read-only root, no capabilities, non-root.

- the Argo CD sidecar (``--target cmp``): ``--version``; ``cmp generate`` on a sample app with
  the Argo CD environment, through the warm render server, equal to the host's output; as
  Argo CD runs it (the real argocd-cmp-server as entrypoint, the plugin socket appearing);
- the controller (``--target controller``): ``--help``; ``/healthz`` and ``/readyz`` against the
  test API server.

Figures (size, start-up) are printed (``pytest -s``) and quoted in docs/images.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import images, repo_server
from support.binaries import missing_component
from support.controlplane import free_port

from dyn_gitops import __version__
from dyn_gitops.argocd import plugin

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "vllm-agg" / "input" / "vllm-agg.yaml"


@pytest.fixture(scope="session")
def built() -> images.Images:
    why = images.deps_missing()
    if why:
        missing_component(f"the image tools are missing ({why}): run tools/images/deps.sh as root")
    built = images.build()
    print(
        f"\nimages: built or reused in {built.build_seconds:.1f}s: {built.cmp} {built.controller}"
    )
    return built


def inspect(ref: str) -> dict[str, Any]:
    out = images.podman("image", "inspect", ref, check=True).stdout
    return dict(json.loads(out)[0])


# --- metadata -------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["cmp", "controller"])
def test_image_metadata(built: images.Images, target: str) -> None:
    ref = getattr(built, target)
    info = inspect(ref)
    config = info["Config"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.source"] == "https://github.com/dyn-gitops/dyn-gitops"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.revision"] not in ("", "unknown")
    assert "PYTHONDONTWRITEBYTECODE=1" in config["Env"]
    user = {"cmp": "999:999", "controller": "65532:65532"}[target]
    assert config["User"] == user
    entry = {
        "cmp": ["/opt/dyn-gitops/bin/dyn-gitops", "cmp", "init", "--"],
        "controller": ["dyn-gitops-operator"],
    }
    assert config["Entrypoint"] == entry[target]
    if target == "cmp":  # argocd-cmp-server under the init (docs/images.md, "Stopping")
        assert config["Cmd"] == ["/var/run/argocd/argocd-cmp-server"]
    size = int(info["Size"])
    print(f"\n{target}: {ref} {size / 1e6:.0f} MB")
    limit = {"cmp": 300e6, "controller": 450e6}[target]  # the kubernetes client is 120 MB
    assert size < limit, f"{ref} is {size / 1e6:.0f} MB"


@pytest.mark.parametrize(
    ("target", "ids"), [("cmp", "999 999 [999]"), ("controller", "65532 65532 [65532]")]
)
def test_runs_as_its_own_user_and_group(built: images.Images, target: str, ids: str) -> None:
    # the probe's finding: `useradd --uid 999 --user-group` gave gid 1000
    proc = images.podman(
        "run", "--rm", "--network=none", *images.HARDENED, "--entrypoint", "python3",
        getattr(built, target), "-c", "import os; print(os.getuid(), os.getgid(), os.getgroups())",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ids


@pytest.mark.parametrize("target", ["cmp", "controller"])
def test_no_shell_at_run_time(built: images.Images, target: str) -> None:
    for shell in ("/bin/sh", "/bin/bash", "/bin/dash"):
        proc = images.podman(
            "run",
            "--rm",
            "--network=none",
            "--entrypoint",
            shell,
            getattr(built, target),
            "-c",
            "true",
        )
        assert proc.returncode != 0, f"{shell} runs in the {target} image"


# --- the sidecar ----------------------------------------------------------------------------
def test_cmp_version(built: images.Images) -> None:
    start = time.monotonic()
    proc = images.podman(
        "run", "--rm", "--network=none", *images.HARDENED, "--entrypoint", "dyn-gitops",
        built.cmp, "--version",
    )  # fmt: skip
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"dyn-gitops, version {__version__}"
    print(f"\ncmp: `podman run … dyn-gitops --version` {took:.2f}s")


#: what a generation in the container does: the first starts the warm render server (and
#: renders by itself); once its socket is there (under TMPDIR), the second is answered by it
TWICE = """
import os, subprocess, sys, time
sock = f"/tmp/dyn-gitops-{os.getuid()}/render-{sys.argv[1]}.sock"
outs, took = [], []
for i in range(2):
    t = time.monotonic()
    p = subprocess.run(["dyn-gitops", "cmp", "generate"], capture_output=True, text=True)
    took.append(time.monotonic() - t)
    if p.returncode:
        sys.exit(p.stderr)
    outs.append(p.stdout)
    deadline = time.monotonic() + 90
    while i == 0 and not os.path.exists(sock) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(sock), f"no render server socket at {sock}"
assert outs[0] == outs[1], "the warm server answered differently"
sys.stderr.write(f"generate: cold {took[0]:.3f}s warm {took[1]:.3f}s\\n")
sys.stdout.write(outs[1])
"""


def test_cmp_generate_with_the_argo_cd_environment(
    built: images.Images, tmp_path: Path, cli: Any
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(SAMPLE, app)
    app.chmod(0o755)
    argo = {
        "ARGOCD_APP_NAME": "demo",
        "ARGOCD_APP_NAMESPACE": "team-a",
        "ARGOCD_APP_REVISION": "0123456789abcdef0123456789abcdef01234567",
        "ARGOCD_APP_SOURCE_PATH": "app",
        "ARGOCD_APP_SOURCE_REPO_URL": "https://git.example.com/apps.git",
        "ARGOCD_ENV_DYN_GITOPS_DISCOVERY_BACKEND": "etcd",
        "ARGOCD_APP_PARAMETERS": json.dumps([{"name": "emit-source", "string": "false"}]),
    }
    env_args = [f"--env={k}={v}" for k, v in argo.items()]
    proc = images.podman(
        "run", "--rm", "--network=none", *images.HARDENED, *env_args,
        "-v", f"{app}:/src/app:ro", "--workdir=/src/app", "--entrypoint", "python3",
        built.cmp, "-c", TWICE, __version__,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    print(f"\ncmp: {proc.stderr.strip()}")
    host = subprocess.run(
        ["dyn-gitops", "cmp", "generate", "--server", "off"],
        capture_output=True, text=True, cwd=app,
        env={**os.environ, **argo, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    assert host.returncode == 0, host.stderr
    assert proc.stdout == host.stdout  # the image renders exactly what the package renders
    objs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    assert {o["metadata"]["namespace"] for o in objs} == {"team-a"}
    assert not [o for o in objs if o["kind"] == "DynamoGraphDeployment"]  # the parameter applied


# the gRPC stubs of Argo CD's plugin.proto and the application repository (as in
# test_cmp_e2e): the sidecar image answers repo-server's calls
@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> repo_server.Stubs:
    return repo_server.build_stubs(tmp_path_factory)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return repo_server.make_repo(tmp_path)


@pytest.fixture
def cmp_server(test_binaries: Any) -> Path:
    """The real argocd-cmp-server (asked first: no image build or proto compile without it)."""
    return Path(test_binaries("argocd-cmp-server")["argocd-cmp-server"])


def test_sidecar_as_argo_cd_runs_it(
    cmp_server: Path, built: images.Images, tmp_path: Path, stubs: Any, repo: Path
) -> None:
    """argocd-cmp-server (copied by repo-server into /var/run/argocd) as the entrypoint: it reads
    the baked-in plugin.yaml, listens on the plugin socket in the shared directory, and answers
    GenerateManifest streams (a tar.gz of the repository) with what `dyn-gitops render` prints,
    the second time through the warm render server."""
    import grpc

    server = cmp_server
    plugins, tmp = tmp_path / "plugins", tmp_path / "tmp"
    for d in (plugins, tmp):
        d.mkdir()
        d.chmod(0o1777)  # repo-server and the sidecar (999) share the socket directory
    name = f"dyn-gitops-cmp-{uuid.uuid4().hex[:8]}"
    start = time.monotonic()
    proc = images.podman(
        "run", "-d", "--name", name, "--network=none", "--read-only", "--cap-drop=all",
        "--security-opt=no-new-privileges", "-v", f"{tmp}:/tmp",
        "-v", f"{server}:/var/run/argocd/argocd-cmp-server:ro",
        "-v", f"{plugins}:/home/argocd/cmp-server/plugins", built.cmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    try:
        sock = plugins / f"{plugin.PLUGIN_REF}.sock"
        deadline = time.monotonic() + 120
        while not sock.exists() and time.monotonic() < deadline:
            state = images.podman("inspect", "--format", "{{.State.Running}}", name).stdout.strip()
            assert state == "true", images.podman("logs", name).stderr
            time.sleep(0.2)
        assert sock.exists(), images.podman("logs", name).stderr
        up = time.monotonic() - start
        channel = grpc.insecure_channel(f"unix://{sock}")
        grpc.channel_ready_future(channel).result(timeout=60)
        sidecar = repo_server.Sidecar(
            stubs, channel, stubs.grpc.ConfigManagementPluginServiceStub(channel), tmp, tmp
        )
        env = repo_server.repo_server_env(repo)
        expected = repo_server.reference(repo, "--namespace", "llm-serving")
        took = []
        for _ in range(2):
            t = time.monotonic()
            manifests = sidecar.generate(repo, env)
            took.append(time.monotonic() - t)
            assert repo_server.without_source_root(manifests) == expected
            deadline = time.monotonic() + 90  # the first generation starts the render server
            while (
                not list(tmp.glob("dyn-gitops-999/render-*.sock")) and time.monotonic() < deadline
            ):
                time.sleep(0.05)
            assert list(tmp.glob("dyn-gitops-999/render-*.sock")), "no warm render server"
        channel.close()
        print(
            f"\ncmp: sidecar socket {sock.name} {up:.2f}s after podman run;"
            f" GenerateManifest first {took[0]:.2f}s, warm {took[1]:.2f}s"
        )
    finally:
        images.podman("rm", "-f", "-t", "0", name)


def test_sidecar_stops_on_sigterm(cmp_server: Path, built: images.Images, tmp_path: Path) -> None:
    """`podman stop` sends SIGTERM, as the kubelet does: the sidecar (argocd-cmp-server under
    the image's init, a warm render server beside it) exits 0 by itself, well within the
    grace period. argocd-cmp-server as PID 1 took the signal and never exited: podman waited
    its whole timeout and killed it (exit 137)."""
    plugins, tmp = tmp_path / "plugins", tmp_path / "tmp"
    for d in (plugins, tmp):
        d.mkdir()
        d.chmod(0o1777)
    name = f"dyn-gitops-cmp-stop-{uuid.uuid4().hex[:8]}"
    proc = images.podman(
        "run", "-d", "--name", name, "--network=none", "--read-only", "--cap-drop=all",
        "--security-opt=no-new-privileges", "-v", f"{tmp}:/tmp",
        "-v", f"{cmp_server}:/var/run/argocd/argocd-cmp-server:ro",
        "-v", f"{plugins}:/home/argocd/cmp-server/plugins", built.cmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    try:
        sock = plugins / f"{plugin.PLUGIN_REF}.sock"
        warm = images.podman("exec", "-d", name, "dyn-gitops", "cmp", "serve")
        assert warm.returncode == 0, warm.stderr
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
            sock.exists() and list(tmp.glob("dyn-gitops-999/render-*.sock"))
        ):
            time.sleep(0.2)
        assert sock.exists(), images.podman("logs", name).stderr
        assert list(tmp.glob("dyn-gitops-999/render-*.sock")), "no warm render server"
        start = time.monotonic()
        stop = images.podman("stop", "-t", "60", name, timeout=120)
        took = time.monotonic() - start
        assert stop.returncode == 0, stop.stderr
        assert "SIGKILL" not in stop.stderr, stop.stderr  # podman did not have to kill it
        code = images.podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
        assert code == "0", images.podman("logs", name).stderr
        print(f"\ncmp: `podman stop` (SIGTERM) returned after {took:.2f}s, exit code {code}")
    finally:
        images.podman("rm", "-f", "-t", "0", name)


# --- the controller -------------------------------------------------------------------------
def test_controller_help(built: images.Images) -> None:
    proc = images.podman("run", "--rm", "--network=none", *images.HARDENED, built.controller)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: dyn-gitops-operator")
    version = images.podman("run", "--rm", "--network=none", built.controller, "--version")
    assert version.stdout.strip() == f"dyn-gitops-operator, version {__version__}"


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(r.status)
    except OSError:
        return 0


def test_controller_health_against_the_api_server(
    built: images.Images, kube: Any, control_plane: Any, tmp_path: Path
) -> None:
    # the control plane's files are root-only: give the container (65532) a readable copy
    kdir = tmp_path / "kube"
    kdir.mkdir()
    ca = kdir / "ca.crt"
    shutil.copy(control_plane.dir / "certs" / "apiserver.crt", ca)
    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["certificate-authority"] = "/kube/ca.crt"
    (kdir / "config").write_text(yaml.safe_dump(config))
    for p in (kdir, tmp_path):
        p.chmod(0o755)
    for f in kdir.iterdir():
        f.chmod(0o644)
    port = free_port()
    name = f"dyn-gitops-ctl-{uuid.uuid4().hex[:8]}"
    start = time.monotonic()
    proc = images.podman(
        "run", "-d", "--name", name, "--network=host", *images.HARDENED, "-v", f"{kdir}:/kube:ro",
        built.controller, "--kubeconfig=/kube/config", "--no-leader-elect",
        f"--http-address=127.0.0.1:{port}", "--log-format=plain",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    try:
        took: dict[str, float] = {}
        deadline = time.monotonic() + 120
        while len(took) < 2 and time.monotonic() < deadline:
            for path in ("healthz", "readyz"):
                if path not in took and _get(f"http://127.0.0.1:{port}/{path}") == 200:
                    took[path] = time.monotonic() - start
            state = images.podman("inspect", "--format", "{{.State.Running}}", name).stdout.strip()
            assert state == "true", images.podman("logs", name).stderr
            time.sleep(0.2)
        logs = images.podman("logs", name)
        assert set(took) == {"healthz", "readyz"}, logs.stdout + logs.stderr
        print(
            f"\ncontroller: after podman run, /healthz {took['healthz']:.2f}s,"
            f" /readyz {took['readyz']:.2f}s"
        )
    finally:
        images.podman("rm", "-f", "-t", "0", name)
