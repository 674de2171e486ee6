"""In-cluster rendering for Flux (issue 27, point 1), without a cluster: the artifact as
source-controller packs it (deterministic ``.tar.gz``, ``sha256:`` digest), its bounded
storage and HTTP server, and one render job (download checked against the digest, unpack,
``dyn-gitops render`` in a child process, problems with ``file:line``).

Flux side: RFC-0012 (ExternalArtifact), source-controller api v1.9.6
``api/v1/externalartifact_types.go`` and kustomize-controller v1.9.5
``internal/controller/kustomization_controller.go`` (fetches ``status.artifact.url`` and checks
``status.artifact.digest``, nothing else of the ExternalArtifact).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from dyn_gitops_operator.artifacts import ArtifactServer, ArtifactStore, TooLarge, pack
from dyn_gitops_operator.renderjob import JobFailed, checked_path, fetch, render, unpack
from support.inputs import small_dgd


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ArtifactStore, str]]:
    store = ArtifactStore(tmp_path / "storage", keep=2, max_size=1 << 20)
    srv = ArtifactServer("127.0.0.1:0", store)
    srv.start()
    try:
        yield store, f"http://127.0.0.1:{srv.port}"
    finally:
        srv.stop()


def test_the_tar_is_deterministic_and_unpacks_to_the_same_tree(tmp_path: Path) -> None:
    a = tree(tmp_path / "a", {"ns/x.yaml": "a: 1\n", "kustomization.yaml": "k\n"})
    b = tree(tmp_path / "b", {"kustomization.yaml": "k\n", "ns/x.yaml": "a: 1\n"})
    data = pack(a)
    assert data == pack(b)  # same content, other write order and times: same digest
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["kustomization.yaml", "ns", "ns/x.yaml"]
    assert {(m.mtime, m.uid, m.gid) for m in members} == {(0, 0, 0)}
    out = tmp_path / "out"
    unpack(data, out, 1 << 20)
    assert (out / "ns/x.yaml").read_text() == "a: 1\n"


def test_the_store_keeps_the_newest_n_and_serves_only_artifacts(
    tmp_path: Path, server: tuple[ArtifactStore, str]
) -> None:
    store, base = server
    stored = []
    for i in range(4):
        d = tree(tmp_path / f"r{i}", {"x.yaml": f"i: {i}\n"})
        stored.append(store.put("team-a", "app", pack(d)))
    kept = sorted(p.name for p in (store.root / "externalartifact/team-a/app").iterdir())
    assert kept == sorted(Path(s.path).name for s in stored[2:])
    body = urllib.request.urlopen(f"{base}/{stored[3].path}", timeout=10).read()
    assert "sha256:" + hashlib.sha256(body).hexdigest() == stored[3].digest
    for gone in (stored[0].path, "externalartifact/team-a/app", "../etc/passwd"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{base}/{gone}", timeout=10)
        assert err.value.code == 404
    with pytest.raises(TooLarge):
        ArtifactStore(tmp_path / "small", keep=1, max_size=10).put("n", "a", b"x" * 11)


def test_a_download_that_does_not_match_its_digest_is_refused(
    tmp_path: Path, server: tuple[ArtifactStore, str]
) -> None:
    store, base = server
    s = store.put("ns", "src", pack(tree(tmp_path / "t", {"a.yaml": "a: 1\n"})))
    assert fetch(f"{base}/{s.path}", s.digest, 1 << 20, 10)
    with pytest.raises(JobFailed, match="does not match"):
        fetch(f"{base}/{s.path}", "sha256:" + "0" * 64, 1 << 20, 10)
    with pytest.raises(JobFailed, match="over 10 bytes"):
        fetch(f"{base}/{s.path}", s.digest, 10, 10)


def test_a_path_leaving_the_artifact_is_refused() -> None:
    assert checked_path("deploy/./apps/") == "deploy/apps"
    assert checked_path("") == "."
    for bad in ("../x", "/etc", "a/../../b"):
        with pytest.raises(JobFailed):
            checked_path(bad)


def test_a_render_writes_the_cli_tree_and_a_bad_one_names_file_and_line(tmp_path: Path) -> None:
    src = tree(tmp_path / "src", {"dgd/app.yaml": small_dgd("app")})
    out = render(src, "dgd", "team-a", tmp_path / "out", 120).dir
    listed = (out / "kustomization.yaml").read_text()
    assert "team-a/deployment.apps_app-frontend.yaml" in listed
    assert (out / "team-a/deployment.apps_app-frontend.yaml").is_file()
    bad = small_dgd("app").replace('gpu: "1"', 'gpu: "lots"')
    src2 = tree(tmp_path / "src2", {"dgd/app.yaml": bad})
    with pytest.raises(JobFailed) as err:
        render(src2, "dgd", "team-a", tmp_path / "out2", 120)
    assert err.value.reason == "RenderFailed"
    assert "dgd/app.yaml:" in str(err.value), str(err.value)
    assert "invalid input" in str(err.value)
