"""``FakeKube``: one client of a ``FakeApiServer``, with its own field manager."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.fakekube.rules import KindRules
from dyn_gitops_operator.fakekube.server import FakeApiServer
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.resources import Obj, Resource, WatchEvent


class FakeKube:
    """The ``KubeApi`` verbs against an in-memory server; ``as_manager`` gives another
    client of the same server (the GitOps tool, kube-controller-manager, an HPA ...).

    A few extras the protocol does not need, for tests: ``get`` and ``update`` of the
    ``status`` / ``scale`` subresources, ``apply(force=False)``, ``server.compact()``."""

    def __init__(
        self,
        field_manager: str = FIELD_MANAGER,
        *,
        server: FakeApiServer | None = None,
        rules: Mapping[Resource, KindRules] | None = None,
        served: Iterable[Resource] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.field_manager = field_manager
        self.server = server or FakeApiServer(rules, served, clock)

    def as_manager(self, field_manager: str) -> FakeKube:
        return FakeKube(field_manager, server=self.server)

    # ------------------------------------------------------------------ reads
    def get(
        self, res: Resource, namespace: str | None, name: str, *, subresource: str | None = None
    ) -> Obj:
        return self.server.get(res, namespace, name, subresource)

    def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        transform: Callable[[Obj], Obj] | None = None,
    ) -> tuple[list[Obj], str]:
        items, rv = self.server.list(res, namespace, label_selector, field_selector)
        return ([transform(i) for i in items] if transform is not None else items), rv

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
        return self.server.watch(
            res,
            namespace,
            resource_version,
            label_selector,
            field_selector,
            timeout_seconds,
            on_open,
        )

    def check_listable(self, res: Resource, namespace: str | None) -> None:
        self.server.kind(res)

    # ------------------------------------------------------------------ writes
    def apply(
        self, res: Resource, obj: Obj, *, subresource: str | None = None, force: bool = True
    ) -> Obj:
        return self.server.apply(res, obj, self.field_manager, subresource, force)

    def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
    ) -> Obj:
        return self.server.patch(res, namespace, name, body, self.field_manager, subresource)

    def create(self, res: Resource, obj: Obj) -> Obj:
        return self.server.create(res, obj, self.field_manager)

    def update(self, res: Resource, obj: Obj, *, subresource: str | None = None) -> Obj:
        return self.server.update(res, obj, self.field_manager, subresource)

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> None:
        self.server.delete(res, namespace, name, uid, resource_version)


def _satisfies_protocol(kube: FakeKube) -> KubeApi:
    return kube  # mypy checks here that FakeKube implements every KubeApi verb


__all__ = ["FakeKube"]
