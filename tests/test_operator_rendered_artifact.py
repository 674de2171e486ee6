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
from typing import Any

import pytest
from dyn_gitops_operator.artifacts import ArtifactServer, ArtifactStore, TooLarge, pack
from dyn_gitops_operator.errors import NotFoundError
from dyn_gitops_operator.renderjob import JobFailed, checked_path, fetch, render, unpack
from dyn_gitops_operator.resources import EXTERNAL_ARTIFACTS, Obj
from support.inputs import small_dgd

from dyn_gitops import keys


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


# ------------------------------------------------------------------ the reconciler, on the fake
class Sources:
    """Flux's side for the reconciler: a GitRepository as source-controller leaves it (its
    artifact served over HTTP by an artifact server standing in for source-controller)."""

    def __init__(self, tmp: Path, base: str, store: ArtifactStore) -> None:
        self.tmp, self.base, self.store, self.n = tmp, base, store, 0

    def source(self, files: dict[str, str], annotations: dict[str, str] | None = None) -> Obj:
        self.n += 1
        stored = self.store.put("src", "repo", pack(tree(self.tmp / f"commit{self.n}", files)))
        return {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {
                "name": "apps",
                "namespace": "team-a",
                "uid": "uid-apps",
                "annotations": {keys.ANN_RENDER_PATH: "dgd"}
                if annotations is None
                else annotations,
            },
            "status": {
                "artifact": {
                    "url": f"{self.base}/{stored.path}",
                    "digest": stored.digest,
                    "revision": f"main@sha1:{self.n:040d}",
                }
            },
        }


@pytest.fixture
def rig(tmp_path: Path, server: tuple[ArtifactStore, str]) -> Iterator[Any]:
    from dyn_gitops_operator.fakekube import FakeKube
    from dyn_gitops_operator.fakekube.rules import KindRules
    from dyn_gitops_operator.metrics import Metrics
    from dyn_gitops_operator.reconcilers.base import Context
    from dyn_gitops_operator.reconcilers.rendered import RenderedArtifactReconciler
    from dyn_gitops_operator.settings import RenderedArtifactSettings

    flux_store, base = server
    kube = FakeKube(rules={EXTERNAL_ARTIFACTS: KindRules(status=True)})
    ours = ArtifactStore(tmp_path / "ours", keep=2, max_size=1 << 20)
    settings = RenderedArtifactSettings(enabled=True, advertised_url="http://artifacts:9797")

    class Rig:
        sources = Sources(tmp_path, base, flux_store)
        ctx = Context(kube=kube, metrics=Metrics(), remember=lambda res, obj: None)
        reconciler = RenderedArtifactReconciler(settings, ours)

        def ea(self) -> Obj | None:
            try:
                return kube.get(EXTERNAL_ARTIFACTS, "team-a", "apps")
            except NotFoundError:
                return None

        def run(self, source: Obj | None) -> Obj | None:
            self.reconciler.reconcile(("team-a", "GitRepository/apps"), source, self.ea(), self.ctx)
            return self.ea()

    yield Rig()


def test_the_reconciler_renders_once_per_input_and_keeps_the_last_good_artifact(
    rig: Any,
) -> None:
    """Level-triggered: the ExternalArtifact (owned by its source, pointing at it) carries
    the artifact rendered from the source's digest, written once; a bad commit is Ready=False
    with the problem's file:line, its artifact the last good one, not rendered again until
    the input changes; a revert to good content is Ready again at its own revision; a
    controller without its files (a new pod) renders the same digest."""
    good = rig.sources.source({"dgd/app.yaml": small_dgd("app")})
    ea = rig.run(good)
    assert ea is not None
    assert ea["metadata"]["ownerReferences"][0]["uid"] == "uid-apps"
    assert ea["spec"]["sourceRef"] == {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "name": "apps",
        "namespace": "team-a",
    }
    art = ea["status"]["artifact"]
    assert art["revision"] == good["status"]["artifact"]["revision"]
    assert art["url"] == f"http://artifacts:9797/{art['path']}"
    assert art["metadata"][keys.ANN_RENDER_SOURCE_DIGEST] == good["status"]["artifact"]["digest"]
    assert [c["status"] for c in ea["status"]["conditions"]] == ["True"]
    assert rig.reconciler.store.has(art["path"])
    assert rig.run(good)["metadata"]["resourceVersion"] == ea["metadata"]["resourceVersion"]

    bad = rig.sources.source({"dgd/app.yaml": small_dgd("app").replace('"1"', '"lots"')})
    failed = rig.run(bad)
    (cond,) = failed["status"]["conditions"]
    assert (cond["status"], cond["reason"]) == ("False", "RenderFailed")
    assert "dgd/app.yaml:" in cond["message"], cond["message"]
    assert failed["status"]["artifact"] == art
    assert rig.run(bad)["metadata"]["resourceVersion"] == failed["metadata"]["resourceVersion"]

    # a revert: the same content (the same source digest) under a new revision
    revert = rig.sources.source({"dgd/app.yaml": small_dgd("app")})
    assert revert["status"]["artifact"]["digest"] == good["status"]["artifact"]["digest"]
    back = rig.run(revert)
    assert [c["status"] for c in back["status"]["conditions"]] == ["True"]
    assert back["status"]["artifact"]["revision"] == revert["status"]["artifact"]["revision"]
    assert back["status"]["artifact"]["digest"] == art["digest"]

    fresh = type(rig.reconciler)(
        rig.reconciler.s, ArtifactStore(rig.sources.tmp / "new", keep=2, max_size=1 << 20)
    )
    rig.reconciler = fresh
    again = rig.run(good)
    assert again["status"]["artifact"]["digest"] == art["digest"]
    assert [c["status"] for c in again["status"]["conditions"]] == ["True"]


def test_removing_the_annotation_deletes_the_artifact_and_a_foreign_one_is_left_alone(
    rig: Any,
) -> None:
    good = rig.sources.source({"dgd/app.yaml": small_dgd("app")})
    path = rig.run(good)["status"]["artifact"]["path"]
    plain = {**good, "metadata": {**good["metadata"], "annotations": {}}}
    assert rig.run(plain) is None
    assert not rig.reconciler.store.has(path)
    foreign = {**good, "metadata": {**good["metadata"], "uid": "another-uid"}}
    rig.run(good)
    before = rig.ea()
    assert rig.run(foreign) == before  # not its ExternalArtifact: untouched, not deleted
    missing = rig.sources.source({"other/app.yaml": small_dgd("app")})
    (cond,) = rig.run(missing)["status"]["conditions"]
    assert (cond["status"], cond["reason"]) == ("False", "InvalidPath")
