"""One Flux source annotated with ``dyn-gitops.io/render-path`` -> one ExternalArtifact of the
same name (Flux RFC-0012): its artifact rendered at the source's revision, stored and served
by this controller, and the ExternalArtifact's status (artifact, ``Ready``) kept.

Level-triggered: each pass compares the source's artifact (digest) and the annotations with
what the ExternalArtifact says it was rendered from, and renders only when they differ or
its file is not stored here (a restarted controller renders again; the tar is deterministic,
so the digest comes out the same). A render that fails sets ``Ready=False`` with the
renderer's problems and keeps ``status.artifact``: kustomize-controller goes on applying the
last good revision, and nothing of the bad one is applied.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from dyn_gitops import __version__ as renderer_version
from dyn_gitops import keys
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.artifacts import ArtifactStore, TooLarge, pack
from dyn_gitops_operator.reconcilers.base import Context, timestamp
from dyn_gitops_operator.renderjob import JobFailed, checked_path, fetch, render, unpack
from dyn_gitops_operator.resources import EXTERNAL_ARTIFACTS, Obj
from dyn_gitops_operator.settings import RenderedArtifactSettings

log = logging.getLogger(__name__)


def _ns(obj: Obj) -> str:
    return str(o.meta(obj).get("namespace") or "")


#: under the storage directory: one render's scratch space (never served)
WORK_DIR = ".work"
#: in the artifact's metadata: the renderer that made it (a new one renders again)
META_RENDERER = keys.OUR_PREFIX + "renderer-version"


#: not in the metadata: the artifact's own ``revision``
_REVISION = "revision"
_INPUT_KEYS = (
    keys.ANN_RENDER_SOURCE_DIGEST,
    keys.ANN_RENDER_PATH,
    keys.ANN_RENDER_NAMESPACE,
    META_RENDERER,
)


def wanted_input(source: Obj) -> dict[str, str] | None:
    """What the ExternalArtifact must be rendered from (None: the source has no artifact)."""
    art = (source.get("status") or {}).get("artifact") or {}
    if not art.get("url") or not art.get("digest"):
        return None
    ann = o.annotations_of(source)
    return {
        keys.ANN_RENDER_SOURCE_DIGEST: str(art["digest"]),
        keys.ANN_RENDER_PATH: ann.get(keys.ANN_RENDER_PATH, ""),
        keys.ANN_RENDER_NAMESPACE: ann.get(keys.ANN_RENDER_NAMESPACE) or _ns(source),
        META_RENDERER: renderer_version,
        # a revert gives the same content under a new revision: rendered again, so the
        # revision and the Ready condition follow the source
        _REVISION: str(art.get("revision") or ""),
    }


def _rendered_from(ea: Obj | None) -> dict[str, str]:
    art = ((ea or {}).get("status") or {}).get("artifact") or {}
    meta = art.get("metadata") or {}
    return {
        **{k: str(meta.get(k, "")) for k in _INPUT_KEYS},
        _REVISION: str(art.get("revision") or ""),
    }


class RenderedArtifactReconciler:
    name = "rendered-artifact"

    def __init__(self, settings: RenderedArtifactSettings, store: ArtifactStore) -> None:
        self.s = settings
        self.store = store
        #: key -> the input whose render failed (not tried again until the input changes)
        self.failed: dict[tuple[str, str], dict[str, str]] = {}
        #: key -> the input last rendered and stored here (a cache that has not seen our
        #: status write yet does not make it render again)
        self.rendered: dict[tuple[str, str], tuple[dict[str, str], str]] = {}

    def reconcile(
        self, key: tuple[str, str], source: Obj | None, ea: Obj | None, ctx: Context
    ) -> None:
        """``source``: the Flux source of ``key``; ``ea``: the ExternalArtifact of its name."""
        if source is None or keys.ANN_RENDER_PATH not in o.annotations_of(source):
            self._stop(key, source, ea, ctx)
            return
        if ea is not None and not self._ours(ea, source):
            log.warning(
                "ExternalArtifact exists and is not this source's: left alone",
                extra={"object": "/".join(key)},
            )
            return
        if ea is None:  # (again): whatever was rendered for it is written again
            self.rendered.pop(key, None)
            ea = ctx.apply(EXTERNAL_ARTIFACTS, self._spec(source))
        want = wanted_input(source)
        if want is None:
            no_artifact = ("False", "SourceNotReady", "the source has no artifact yet")
            self._status(ctx, source, ea, None, no_artifact)
            return
        if self._current(key, ea, want) or self.failed.get(key) == want:
            return
        try:
            artifact = self._render(source, want)
        except JobFailed as exc:
            self.failed[key] = want
            log.info("render failed", extra={"object": "/".join(key), "error": str(exc)})
            self._status(ctx, source, ea, None, ("False", exc.reason, str(exc)))
            return
        self.failed.pop(key, None)
        self.rendered[key] = (want, artifact["path"])
        msg = f"stored artifact for revision '{artifact['revision']}'"
        self._status(ctx, source, ea, artifact, ("True", "Succeeded", msg))

    def _stop(self, key: tuple[str, str], source: Obj | None, ea: Obj | None, ctx: Context) -> None:
        """The source is gone (the garbage collector deletes its ExternalArtifact) or no
        longer annotated (its ExternalArtifact is deleted here): its files go."""
        self.failed.pop(key, None)
        self.rendered.pop(key, None)
        name = key[1].split("/", 1)[1]
        if source is not None and ea is not None and self._ours(ea, source):
            ctx.may_write()
            ctx.kube.delete(EXTERNAL_ARTIFACTS, key[0], name, uid=o.meta(ea).get("uid"))
        if source is None or ea is None or self._ours(ea, source):
            self.store.forget(key[0], name)

    def _ours(self, ea: Obj, source: Obj) -> bool:
        refs = o.meta(ea).get("ownerReferences") or []
        return any(r.get("uid") == o.meta(source).get("uid") for r in refs)

    def _current(self, key: tuple[str, str], ea: Obj, want: dict[str, str]) -> bool:
        art = (ea.get("status") or {}).get("artifact") or {}
        if _rendered_from(ea) == want and self.store.has(str(art.get("path") or "")):
            return True
        done = self.rendered.get(key)  # a status of ours, one write behind in the cache
        return bool(art) and done is not None and done[0] == want and self.store.has(done[1])

    def _spec(self, source: Obj) -> Obj:
        meta = o.meta(source)
        return {
            "apiVersion": EXTERNAL_ARTIFACTS.api_version,
            "kind": EXTERNAL_ARTIFACTS.kind,
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "ownerReferences": [
                    {
                        "apiVersion": source["apiVersion"],
                        "kind": source["kind"],
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "sourceRef": {
                    "apiVersion": source["apiVersion"],
                    "kind": source["kind"],
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                }
            },
        }

    def _render(self, source: Obj, want: dict[str, str]) -> Obj:
        """Fetch, render, pack and store; the ``status.artifact`` for it."""
        art = source["status"]["artifact"]
        path = checked_path(want[keys.ANN_RENDER_PATH])
        data = fetch(str(art["url"]), str(art["digest"]), self.s.max_size, self.s.fetch_timeout)
        work = self.store.root / WORK_DIR  # on the storage volume, bounded with it
        work.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="render-", dir=work) as tmp:
            tree, out = Path(tmp) / "src", Path(tmp) / "out"
            tree.mkdir()
            unpack(data, tree, self.s.max_size)
            if not (tree / path).is_dir():
                raise JobFailed(
                    "InvalidPath",
                    f"render path {path!r} is not a directory at {art.get('revision')}",
                )
            render(tree, path, want[keys.ANN_RENDER_NAMESPACE], out, self.s.render_timeout)
            packed = pack(out)
        try:
            stored = self.store.put(_ns(source), o.name(source), packed)
        except TooLarge as exc:
            raise JobFailed("ArtifactFailed", str(exc)) from None
        return {
            "path": stored.path,
            "url": f"{self.s.url_base()}/{stored.path}",
            "revision": str(art.get("revision") or ""),
            "digest": stored.digest,
            "size": stored.size,
            "metadata": {k: want[k] for k in _INPUT_KEYS},
        }

    def _status(
        self,
        ctx: Context,
        source: Obj,
        ea: Obj,
        artifact: Obj | None,
        cond: tuple[str, str, str],
    ) -> None:
        """Write the status: the new artifact, or the one there (kept on a failure)."""
        old = ea.get("status") or {}
        art = artifact or old.get("artifact")
        if artifact is not None and (old.get("artifact") or {}).get("digest") == artifact["digest"]:
            art = {**artifact, "lastUpdateTime": old["artifact"].get("lastUpdateTime")}
        now = timestamp(ctx.now())
        if art is not None and not art.get("lastUpdateTime"):
            art = {**art, "lastUpdateTime": now}
        status, reason, message = cond
        prev: Obj = next((c for c in old.get("conditions") or [] if c.get("type") == "Ready"), {})
        if (prev.get("status"), prev.get("reason"), prev.get("message"), old.get("artifact")) == (
            status,
            reason,
            message,
            art,
        ):
            return
        changed = prev.get("status") != status
        ready = {
            "type": "Ready",
            "status": status,
            "reason": reason,
            "message": message,
            "observedGeneration": o.meta(ea).get("generation", 1),
            "lastTransitionTime": now if changed else prev.get("lastTransitionTime") or now,
        }
        body: Obj = {"conditions": [ready]}
        if art is not None:
            body["artifact"] = art
        ctx.apply(
            EXTERNAL_ARTIFACTS,
            {
                "apiVersion": EXTERNAL_ARTIFACTS.api_version,
                "kind": EXTERNAL_ARTIFACTS.kind,
                "metadata": {"name": o.name(ea), "namespace": _ns(source)},
                "status": body,
            },
            subresource="status",
        )


__all__ = ["META_RENDERER", "RenderedArtifactReconciler", "wanted_input"]
