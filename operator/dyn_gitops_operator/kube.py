"""The only module that talks to the API server (and the only ``kubernetes`` importer).

It uses the official client for configuration, authentication and the connection pool,
but sends raw JSON and returns plain dicts: deserialising thousands of Deployments into
the client's model classes is slow and the controller reads a handful of fields.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.errors import (
    ApiError,
    GoneError,
    StartupError,
    TransientError,
    api_error,
)
from dyn_gitops_operator.kubeapi import CALL_TIMEOUT, KubeApi
from dyn_gitops_operator.resources import (
    DEPLOYMENTS,
    DGDS,
    DGDSAS,
    LEASES,
    LWS,
    PCSGS,
    PODCLIQUES,
    PODCLIQUESETS,
    Obj,
    Resource,
    WatchEvent,
)

log = logging.getLogger(__name__)


def make_api_client(kubeconfig: str | None, pool_size: int = 16) -> Any:
    """ApiClient from a kubeconfig file, the in-cluster service account, or ~/.kube/config."""
    import yaml

    cfg = k8s.Configuration()
    where = kubeconfig or "in-cluster service account, then ~/.kube/config ($KUBECONFIG)"
    if kubeconfig and not os.path.isfile(kubeconfig):
        raise StartupError(
            f"cannot load the kubeconfig {kubeconfig}: no such file (relative to the current "
            f"directory {os.getcwd()}); pass --kubeconfig FILE, or run in a pod with a service "
            "account"
        )
    try:
        if kubeconfig:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, client_configuration=cfg
            )
        else:
            try:
                k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=cfg
                )
            except k8s_config.ConfigException:
                k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                    client_configuration=cfg
                )
    except (k8s_config.ConfigException, OSError, yaml.YAMLError, ValueError, TypeError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, OSError) and exc.strerror:
            reason = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
        elif isinstance(exc, yaml.YAMLError):
            reason = "not YAML (" + " ".join(str(exc).split())[:200] + ")"
        raise StartupError(
            f"cannot load the kubeconfig ({where}): {reason}; pass --kubeconfig FILE, or run "
            "in a pod with a service account"
        ) from None
    # every informer holds one long-lived watch connection, workers need the rest
    cfg.connection_pool_maxsize = pool_size
    return k8s.ApiClient(cfg)


class Kube:
    """Typed-enough verbs over raw JSON: get, list, watch, apply, update, create, delete."""

    def __init__(
        self,
        api_client: Any,
        request_timeout: tuple[float, float] = (5.0, 30.0),
        field_manager: str = FIELD_MANAGER,
    ) -> None:
        self.api = api_client
        self.timeout = request_timeout
        self.field_manager = field_manager

    # ------------------------------------------------------------------ transport
    def _open(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float] | None = None,
    ) -> Any:
        _, url, headers, _, _ = self.api.param_serialize(
            method, path, query_params=query or [], header_params={}, auth_settings=["BearerToken"]
        )
        headers["Accept"] = "application/json"
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body, separators=(",", ":")).encode()
        conn, read = timeout or CALL_TIMEOUT.get() or self.timeout
        try:
            return self.api.rest_client.pool_manager.request(
                method,
                url,
                body=data,
                headers=headers,
                preload_content=False,
                timeout=urllib3.Timeout(connect=conn, read=read),
                retries=False,
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransientError(0, type(exc).__name__, str(exc)) from exc

    def request(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Obj:
        resp = self._open(method, path, query, body, content_type)
        try:
            raw = resp.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransientError(0, type(exc).__name__, str(exc)) from exc
        finally:
            resp.release_conn()
        if resp.status >= 300:
            raise _error_from(resp.status, raw)
        return json.loads(raw) if raw else {}

    # ------------------------------------------------------------------ verbs
    def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        return self.request("GET", res.path(namespace, name))

    def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        page_size: int = 500,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> tuple[list[Obj], str]:
        """All items (paginated) and the list's resourceVersion.

        ``transform`` is applied page by page, so a large list never sits in memory whole.
        """
        items: list[Obj] = []
        cont = ""
        while True:
            query = [("limit", str(page_size))]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if field_selector:
                query.append(("fieldSelector", field_selector))
            if cont:
                query.append(("continue", cont))
            page = self.request("GET", res.path(namespace), query)
            meta = page.get("metadata") or {}
            raw = page.pop("items", None) or []
            items.extend(map(transform, raw) if transform is not None else raw)
            del page, raw  # the untrimmed page can go before the next one arrives
            cont = meta.get("continue") or ""
            if not cont:
                return items, str(meta.get("resourceVersion", ""))

    def check_listable(self, res: Resource, namespace: str | None) -> None:
        """One item of a list: NotFoundError when the API is not served, ForbiddenError
        when we may not list it."""
        self.request("GET", res.path(namespace), [("limit", "1")])

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
        """Events after ``resource_version``; raises GoneError when it has expired.

        ``on_open`` receives the open response; its ``shutdown()`` ends the watch from
        another thread (a blocked read otherwise waits for the server-side timeout).
        """
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        resp = self._open(
            "GET", res.path(namespace), query, timeout=(self.timeout[0], timeout_seconds + 30.0)
        )
        if on_open is not None:
            on_open(resp)
        try:
            if resp.status >= 300:
                raise _error_from(resp.status, resp.read())
            for line in _lines(resp):
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise api_error(
                        int(status.get("code") or 500),
                        status.get("reason", ""),
                        status.get("message", ""),
                    )
                yield event
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransientError(0, type(exc).__name__, str(exc)) from exc
        finally:
            resp.release_conn()

    def apply(
        self,
        res: Resource,
        obj: Obj,
        *,
        subresource: str | None = None,
        force: bool = True,
        dry_run: bool = False,
    ) -> Obj:
        """Server-side apply of ``obj`` with our field manager.

        ``metadata.resourceVersion`` in ``obj`` makes the apply conditional (409 when the
        object changed since we read it).
        """
        meta = obj["metadata"]
        query = [("fieldManager", self.field_manager), ("force", "true" if force else "false")]
        if dry_run:
            query.append(("dryRun", "All"))
        return self.request(
            "PATCH",
            res.path(meta.get("namespace"), meta["name"], subresource),
            query,
            obj,
            "application/apply-patch+yaml",
        )

    def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
    ) -> Obj:
        """JSON merge patch with our field manager; a ``metadata.resourceVersion`` in
        ``body`` makes it conditional (409 when the object changed). For the ``/scale``
        subresource of a custom resource, which refuses server-side apply."""
        query = [("fieldManager", self.field_manager)]
        return self.request(
            "PATCH",
            res.path(namespace, name, subresource),
            query,
            body,
            "application/merge-patch+json",
        )

    def create(self, res: Resource, obj: Obj) -> Obj:
        query = [("fieldManager", self.field_manager)]
        return self.request("POST", res.path(obj["metadata"].get("namespace")), query, obj)

    def update(self, res: Resource, obj: Obj) -> Obj:
        """PUT: optimistic concurrency through ``metadata.resourceVersion``."""
        meta = obj["metadata"]
        query = [("fieldManager", self.field_manager)]
        return self.request("PUT", res.path(meta.get("namespace"), meta["name"]), query, obj)

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> None:
        """Delete with preconditions: never delete a different or changed object."""
        pre: dict[str, str] = {}
        if uid:
            pre["uid"] = uid
        if resource_version:
            pre["resourceVersion"] = resource_version
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
            "preconditions": pre,
        }
        self.request("DELETE", res.path(namespace, name), None, body)


def _satisfies_protocol(kube: Kube) -> KubeApi:
    return kube  # mypy checks here that Kube implements every KubeApi verb


def _lines(resp: Any) -> Iterator[bytes]:
    buf = b""
    for chunk in resp.stream(None, decode_content=True):
        buf += chunk
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            line, buf = buf[:nl], buf[nl + 1 :]
            if line.strip():
                yield line


def _error_from(status: int, raw: bytes) -> ApiError:
    """The error of a refused call, from its ``Status`` body; any other body (a proxy's
    page, the mux's ``404 page not found``) is dropped: the status names the error."""
    try:
        body = json.loads(raw)
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    reason, message = str(body.get("reason") or ""), str(body.get("message") or "")
    if status == 410:
        return GoneError(410, reason or "Gone", message)
    return api_error(status, reason, message)


__all__ = [
    "DEPLOYMENTS",
    "DGDS",
    "DGDSAS",
    "LEASES",
    "LWS",
    "PCSGS",
    "PODCLIQUES",
    "PODCLIQUESETS",
    "Kube",
    "Obj",
    "Resource",
    "WatchEvent",
    "make_api_client",
]
