"""``KubeApi``: the API verbs the controller uses, as a protocol.

Reconcilers, informers and the lease code depend on this, not on a client: ``kube.Kube``
sends the verbs to an API server, ``fakekube.FakeKube`` answers them from memory (unit
tests). Exactly the verbs and arguments in use, so a fake has nothing else to imitate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from dyn_gitops_operator.resources import Obj, Resource, WatchEvent


class KubeApi(Protocol):
    def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        """The object; NotFoundError when there is none."""
        ...

    def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        transform: Callable[[Obj], Obj] | None = None,
    ) -> tuple[list[Obj], str]:
        """Every matching object (``transform``-ed) and the list's resourceVersion."""
        ...

    def watch(
        self,
        res: Resource,
        namespace: str | None,
        resource_version: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int = 290,
        on_open: Callable[[Any], None] | None = None,
    ) -> Iterator[WatchEvent]:
        """Events after ``resource_version`` (GoneError when it has expired); ``on_open``
        gets a handle whose ``shutdown()`` ends the watch from another thread."""
        ...

    def check_listable(self, res: Resource, namespace: str | None) -> None:
        """Raise NotFoundError / ForbiddenError unless the API is served and listable."""
        ...

    def apply(self, res: Resource, obj: Obj, *, subresource: str | None = None) -> Obj:
        """Server-side apply with the client's field manager, forced; a
        ``metadata.resourceVersion`` makes it conditional (ConflictError)."""
        ...

    def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
    ) -> Obj:
        """JSON merge patch (conditional like ``apply``); for ``/scale`` of a custom
        resource, which refuses server-side apply."""
        ...

    def create(self, res: Resource, obj: Obj) -> Obj:
        """ConflictError when the name is taken."""
        ...

    def update(self, res: Resource, obj: Obj) -> Obj:
        """PUT with the object's resourceVersion (ConflictError when stale)."""
        ...

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> None:
        """Delete with uid / resourceVersion preconditions (ConflictError when unmet)."""
        ...


__all__ = ["KubeApi"]
