"""``KubeApi``: the API verbs the controller uses, as a protocol.

Reconcilers, informers and the lease code depend on this, not on a client: ``kube.Kube``
sends the verbs to an API server, ``fakekube.FakeKube`` answers them from memory (unit
tests). Exactly the verbs and arguments in use, so a fake has nothing else to imitate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, Protocol

from dyn_gitops_operator.resources import Obj, Resource, WatchEvent

#: (connect, read) seconds for the calls made inside ``call_timeout`` on this thread; the
#: client's own timeout when None (a fake has no sockets and ignores it)
CALL_TIMEOUT: ContextVar[tuple[float, float] | None] = ContextVar("call_timeout", default=None)


@contextlib.contextmanager
def call_timeout(timeout: tuple[float, float]) -> Iterator[None]:
    """Bound the API calls of this block (the leader's lease calls): a context variable
    rather than an argument, so every wrapper of a client keeps its verbs' signatures."""
    token = CALL_TIMEOUT.set(timeout)
    try:
        yield
    finally:
        CALL_TIMEOUT.reset(token)


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


__all__ = ["CALL_TIMEOUT", "KubeApi", "call_timeout"]
