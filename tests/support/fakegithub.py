"""A fake of the GitHub REST API's issue comments, served over loopback HTTP, for the PR
preview action's script (``.github/actions/pr-preview/preview.py``): list a pull request's
comments (paginated with ``Link`` headers, as GitHub does), create one, update one.

Only what the script calls, with GitHub's shapes: ``id``, ``body``, ``user.login``,
``html_url``; ``401 Bad credentials`` for a wrong token; failures queued per method
(``fail("POST", 403, "Resource not accessible by integration")``) to play a read-only token,
a validation error or an outage. Every request is recorded (method, path, query).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

_LIST = re.compile(r"/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<number>\d+)/comments")
_ONE = re.compile(r"/repos/(?P<repo>[^/]+/[^/]+)/issues/comments/(?P<id>\d+)")


@dataclass
class FakeGitHub:
    token: str
    #: the login of whoever holds ``token`` (the default token's)
    login: str = "github-actions[bot]"
    #: GitHub's page size is at most 100; smaller here, to page through a few comments
    page_size: int = 100
    url: str = ""
    #: where the ``Link`` header's URLs point (``url`` unless a test moves it)
    link_base: str = ""
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    _failures: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    _next_id: int = 1000
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, number: int, body: str, login: str = "someone") -> dict[str, Any]:
        """A comment already on pull request ``number``."""
        with self._lock:
            self._next_id += 1
            comment = {
                "id": self._next_id,
                "body": body,
                "user": {"login": login, "type": "User"},
                "html_url": f"https://github.test/o/r/pull/{number}#issuecomment-{self._next_id}",
            }
            self.comments.setdefault(number, []).append(comment)
            return comment

    def fail(self, method: str, status: int, message: str, times: int = 1) -> None:
        """The next ``times`` requests with ``method`` answer ``status`` with ``message``."""
        self._failures.setdefault(method, []).extend([(status, message)] * times)

    def calls(self, method: str) -> list[str]:
        return [path for m, path in self.requests if m == method]

    # ------------------------------------------------------------------ serving
    def answer(self, method: str, target: str, auth: str, body: Any) -> tuple[int, Any, str]:
        """(status, JSON body, Link header) for one request."""
        with self._lock:
            self.requests.append((method, target))
            if auth != f"Bearer {self.token}":
                return 401, {"message": "Bad credentials"}, ""
            queued = self._failures.get(method)
            if queued:
                status, message = queued.pop(0)
                return status, {"message": message}, ""
        split = urlsplit(target)
        listed, one = _LIST.fullmatch(split.path), _ONE.fullmatch(split.path)
        if method == "GET" and listed:
            return self._page(int(listed["number"]), split.path, parse_qs(split.query))
        if method == "POST" and listed and isinstance(body, dict):
            return 201, self.add(int(listed["number"]), str(body["body"]), self.login), ""
        if method == "PATCH" and one and isinstance(body, dict):
            return self._update(int(one["id"]), str(body["body"]))
        return 404, {"message": "Not Found"}, ""

    def _page(self, number: int, path: str, query: dict[str, list[str]]) -> tuple[int, Any, str]:
        size = min(int(query.get("per_page", ["30"])[0]), self.page_size)
        page = int(query.get("page", ["1"])[0])
        items = self.comments.get(number, [])
        last = max(1, -(-len(items) // size))
        link = ""
        if page < last:
            base = f"{self.link_base or self.url}{path}?per_page={size}"
            link = f'<{base}&page={page + 1}>; rel="next", <{base}&page={last}>; rel="last"'
        return 200, items[(page - 1) * size : page * size], link

    def _update(self, comment_id: int, body: str) -> tuple[int, Any, str]:
        for comment in (c for cs in self.comments.values() for c in cs):
            if comment["id"] == comment_id:
                if comment["user"]["login"] != self.login:
                    return 403, {"message": "Resource not accessible by integration"}, ""
                comment["body"] = body
                return 200, comment, ""
        return 404, {"message": "Not Found"}, ""


def _handler(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            status, answer, link = fake.answer(
                self.command, self.path, self.headers.get("Authorization", ""), body
            )
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if link:
                self.send_header("Link", link)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = _serve

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def fake_github(token: str, **kwargs: Any) -> Iterator[FakeGitHub]:
    """A :class:`FakeGitHub` served on a loopback port for the ``with`` block."""
    fake = FakeGitHub(token, **kwargs)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)
