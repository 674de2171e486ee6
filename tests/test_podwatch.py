"""The pod-watch helper itself (``support.podwatch``), against a scripted API server on a
local port: a watch that dies fails the ``with`` block, 410 Gone relists, and a pod deleted
while Ready is recorded."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from support.podwatch import ReadyPods, WatchDied

NS = "ns"


def pod(name: str, rv: int, ready: bool, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "resourceVersion": str(rv)}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cond = {"type": "Ready", "status": "True" if ready else "False"}
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "status": {"conditions": [cond]}}


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def error(code: int, reason: str) -> dict[str, Any]:
    status = {"kind": "Status", "code": code, "reason": reason, "message": reason}
    return {"type": "ERROR", "object": status}


class Script:
    """What the fake API server answers: the pod lists in order (the last one repeats) and
    the watch requests' events in order (then empty watches)."""

    def __init__(self, lists: list[list[dict[str, Any]]], watches: list[list[dict[str, Any]]]):
        self.lists, self.watches = lists, watches
        self.requests: list[str] = []

    def answer(self, path: str) -> list[bytes]:
        self.requests.append(path)
        if "watch=true" in path:
            if not self.watches:
                time.sleep(0.2)  # an empty watch that ended (its timeout)
                return []
            return [json.dumps(e).encode() + b"\n" for e in self.watches.pop(0)]
        items = self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]
        rv = max((int(p["metadata"]["resourceVersion"]) for p in items), default=1)
        listing = {"kind": "PodList", "metadata": {"resourceVersion": str(rv)}, "items": items}
        return [json.dumps(listing).encode()]


@contextmanager
def fake_api(script: Script) -> Iterator[tuple[Any, Callable[[], None]]]:
    """A kubernetes ApiClient for a local server playing ``script``, and a function that
    closes the server's port."""
    from kubernetes import client

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"".join(script.answer(self.path))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    closed = False

    def close() -> None:
        nonlocal closed
        if not closed:
            closed = True
            server.shutdown()
            server.server_close()

    conf = client.Configuration()
    conf.host = f"http://127.0.0.1:{server.server_address[1]}"
    conf.retries = False
    api = client.ApiClient(conf)
    try:
        yield api, close
    finally:
        close()
        api.close()


def wait(cond: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + 30
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_an_error_event_kills_the_watch_and_fails_the_block() -> None:
    script = Script([[pod("a", 1, True)]], [[error(500, "InternalError")]])
    with (
        fake_api(script) as (api, _),
        pytest.raises(WatchDied, match="InternalError"),
        ReadyPods(api, NS, "app=x") as watch,
    ):
        wait(lambda: watch._error is not None, "the watch to die")
        with pytest.raises(WatchDied):
            watch.fewest()
        with pytest.raises(WatchDied):
            watch.count()


def test_a_closed_port_kills_the_watch_and_fails_the_block() -> None:
    script = Script([[pod("a", 1, True)]], [])
    with (
        fake_api(script) as (api, close),
        pytest.raises(WatchDied, match="the pod watch died"),
        ReadyPods(api, NS, "app=x") as watch,
    ):
        wait(lambda: any("watch=true" in r for r in script.requests), "a watch request")
        close()
        wait(lambda: watch._error is not None, "the watch to die")


def test_the_death_replaces_the_exception_of_the_block() -> None:
    """A failure seen through a dead watch proves nothing (a Pain included): it is replaced
    by the watch's death."""
    from support.pain import Pain

    script = Script([[pod("a", 1, True)]], [[error(500, "InternalError")]])
    with (
        fake_api(script) as (api, _),
        pytest.raises(WatchDied) as died,
        ReadyPods(api, NS, "app=x") as watch,
    ):
        wait(lambda: watch._error is not None, "the watch to die")
        raise Pain("zero ready workers")
    assert isinstance(died.value.__context__, Pain)


def test_gone_relists_and_a_pod_deleted_while_ready_is_recorded() -> None:
    lists = [[pod("a", 1, True)], [pod("a", 5, True), pod("b", 6, False)]]
    watches = [
        [error(410, "Expired")],
        [
            event("MODIFIED", pod("b", 7, True)),
            event("MODIFIED", pod("a", 8, True, deleting=True)),
            event("DELETED", pod("a", 9, False, deleting=True)),
            event("MODIFIED", pod("b", 10, False)),
            event("DELETED", pod("b", 11, False)),  # not ready any more when deleted
        ],
    ]
    script = Script(lists, watches)
    with fake_api(script) as (api, _), ReadyPods(api, NS, "app=x") as watch:
        wait(lambda: len(watch.history) >= 7, "every event")
        assert watch.count() == 0
    assert watch.history == [
        ("LIST", "", 1),
        ("RELIST", "", 1),
        ("MODIFIED", "b", 2),
        ("MODIFIED", "a", 1),
        ("DELETED", "a", 1),
        ("MODIFIED", "b", 0),
        ("DELETED", "b", 0),
    ]
    assert watch.deleted_while_serving == [("a", 1)]
    assert watch.fewest() == 0
