"""A fake API server client whose chosen writes are refused: an admission webhook or RBAC
stand-in for the controller's error handling (the fake itself has neither).

    kube = RefusingKube()
    kube.refuse("apply", DEPLOYMENTS, 422, "Invalid", "Deployment.apps ... is invalid: ...")
    ...
    kube.attempts[("apply", "Deployment")]   # refused calls so far
    kube.allow("apply", DEPLOYMENTS)
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from dyn_gitops_operator.errors import api_error
from dyn_gitops_operator.fakekube import FakeKube
from dyn_gitops_operator.resources import Obj, Resource


class RefusingKube(FakeKube):
    """``FakeKube`` (the controller's client) refusing ``(verb, resource[/subresource])``
    with the error class of an HTTP status (as ``kube.Kube`` raises it); every other call
    goes through."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._refused: dict[tuple[str, str], tuple[int, str, str]] = {}
        self._lock = threading.Lock()
        #: (verb, kind[/subresource]) -> refused calls
        self.attempts: Counter[tuple[str, str]] = Counter()

    def refuse(
        self,
        verb: str,
        res: Resource,
        status: int,
        reason: str,
        message: str,
        subresource: str | None = None,
    ) -> None:
        with self._lock:
            self._refused[(verb, _what(res, subresource))] = (status, reason, message)

    def allow(self, verb: str, res: Resource, subresource: str | None = None) -> None:
        with self._lock:
            self._refused.pop((verb, _what(res, subresource)), None)

    def _gate(self, verb: str, res: Resource, subresource: str | None) -> None:
        key = (verb, _what(res, subresource))
        with self._lock:
            error = self._refused.get(key)
            if error is not None:
                self.attempts[key] += 1
        if error is not None:
            raise api_error(*error)

    def apply(
        self, res: Resource, obj: Obj, *, subresource: str | None = None, force: bool = True
    ) -> Obj:
        self._gate("apply", res, subresource)
        return super().apply(res, obj, subresource=subresource, force=force)

    def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
    ) -> Obj:
        self._gate("patch", res, subresource)
        return super().patch(res, namespace, name, body, subresource=subresource)

    def create(self, res: Resource, obj: Obj) -> Obj:
        self._gate("create", res, None)
        return super().create(res, obj)

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> None:
        self._gate("delete", res, None)
        super().delete(res, namespace, name, uid=uid, resource_version=resource_version)


def _what(res: Resource, subresource: str | None) -> str:
    return f"{res.kind}/{subresource}" if subresource else res.kind


__all__ = ["RefusingKube"]
