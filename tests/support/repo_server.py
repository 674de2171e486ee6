"""Playing Argo CD's repo-server against a config management plugin sidecar over gRPC
(tests/test_cmp_e2e.py against the real argocd-cmp-server, tests/test_images.py against the
sidecar image): the stubs of Argo CD's plugin.proto, the streams repo-server sends, the
application repository and the environment repo-server builds for it."""

from __future__ import annotations

import hashlib
import importlib
import importlib.resources
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from dyn_gitops import keys
from support.paths import REPO

DATA = REPO / "tests" / "data" / "argocd"
SAMPLE = REPO / "samples" / "vllm-agg" / "input"
APP_PATH = "apps/llm"
SHA_LEN = 40
ANNOUNCED = ("name", "title", "tooltip", "itemType", "collectionType", "string")


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


def build_stubs(tmp_path_factory: pytest.TempPathFactory) -> Stubs:
    """Python stubs of Argo CD's plugin.proto (the real one when available), compiled once."""
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


def make_repo(tmp_path: Path) -> Path:
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
