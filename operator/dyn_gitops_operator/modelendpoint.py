"""The workers that serve a base model, and their LoRA management API.

Behaviour of the Dynamo operator's ``internal/modelendpoint`` (1.5 line), ported:

* discovery: the worker pods of the base model, as ``http://<pod ip>:<system port>``; the
  operator reads them from the EndpointSlices of the headless ``dynamo-model-<hash>``
  Service, we read the pods that Service selects (the base model's hash label) directly
  (docs/operator.md says why);
* load: ``POST <address>/v1/loras`` with ``{"lora_name": <modelName>, "source": {"uri":
  <uri>}}``; any 2xx is success; unload: ``DELETE <address>/v1/loras/<modelName>`` (the
  name path-escaped); redirects are not followed;
* one model's calls run in parallel, at most ``concurrency`` at once, each bounded by the
  request timeout and all of them by the total timeout (a call still unanswered then has
  failed).

Ours: the request timeout is a deadline for the whole call (connect, send, every read of
the answer), checked before each read and bounding each read by the time left, so a worker
that trickles its answer a byte at a time fails at the deadline like one that does not
answer (a per-read timeout would wait forever). The calls run on the controller's
``fairpool.FairPool``: a bounded number of threads, none idle, none outliving its call,
and one namespace's calls never take more than its share of the pool.

Plain ``http.client``: no dependency, and nothing here talks to the API server.
"""

from __future__ import annotations

import functools
import http.client
import io
import json
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from dyn_gitops_operator.fairpool import FairPool

log = logging.getLogger(__name__)

Obj = dict[str, Any]


#: at most this many characters of a worker's error answer are kept (status, logs)
ERROR_BODY_MAX = 200


@dataclass(frozen=True)
class Candidate:
    """One worker pod of the base model."""

    address: str
    pod_name: str
    #: the pod's uid (its name when it has none): a replaced pod is a new candidate
    pod_key: str
    #: the pod's Ready condition (what the Service's EndpointSlice reports as ready)
    ready: bool


def pod_ready(pod: Obj) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def extract_candidates(pods: Iterable[Obj], port: int) -> list[Candidate]:
    """The workers among ``pods`` (those of the base model's hash label: what its headless
    Service selects): running or pending pods with an IP, not terminating, as
    ``http://<pod IP>:<port>``, sorted by pod name."""
    found: list[Candidate] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        ip = status.get("podIP")
        if not ip or not meta.get("name") or meta.get("deletionTimestamp"):
            continue  # no address yet, or on its way out: nothing to load, nothing to count
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        host = f"[{ip}]" if ":" in str(ip) else str(ip)
        found.append(
            Candidate(
                f"http://{host}:{port}",
                str(meta["name"]),
                str(meta.get("uid") or meta["name"]),
                pod_ready(pod),
            )
        )
    return sorted(found, key=lambda c: (c.pod_name, c.address))


class EndpointError(Exception):
    """A worker did not load or unload the adapter (no answer, or not 2xx)."""


class DeadlineExceeded(TimeoutError):
    """The call's deadline passed before the whole answer came."""


class _DeadlineReader(io.RawIOBase):
    """The answer's bytes, each read bounded by the time left until the deadline (over
    the socket's own unbuffered file, which keeps the socket open until it is closed)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded()
        self._sock.settimeout(left)
        try:
            return int(self._raw.readinto(buffer) or 0)
        except TimeoutError:  # socket.timeout: this read used up the time left
            raise DeadlineExceeded() from None

    def close(self) -> None:
        self._raw.close()
        super().close()


class _DeadlineSocket:
    """What ``http.client`` uses of a socket (sendall, makefile, close), within a deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def sendall(self, data: bytes) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded()
        self._sock.settimeout(left)
        self._sock.sendall(data)

    def makefile(self, mode: str = "rb", *args: Any, **kw: Any) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))

    def close(self) -> None:
        self._sock.close()


class _DeadlineConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, deadline: float) -> None:
        super().__init__(host, port, timeout=max(0.001, deadline - time.monotonic()))
        self._deadline = deadline

    def connect(self) -> None:
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self._deadline)


class LoraClient:
    """The LoRA management calls of one controller; batches (``run_all``) on ``pool``
    (the controller's, shared with the loads; a pool of ``concurrency`` of its own when
    none is given)."""

    def __init__(
        self,
        request_timeout: float,
        total_timeout: float,
        concurrency: int,
        pool: FairPool | None = None,
    ) -> None:
        self.request_timeout = request_timeout
        self.total_timeout = total_timeout
        self.concurrency = concurrency
        self.pool = pool or FairPool(concurrency, concurrency)

    # ------------------------------------------------------------------ one call
    def _call(self, method: str, url: str, body: bytes | None) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise EndpointError(f"not an http address: {url}")
        deadline = time.monotonic() + self.request_timeout
        conn = _DeadlineConnection(parts.hostname, parts.port or 80, deadline)
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, parts.path or "/", body=body, headers=headers)
            resp = conn.getresponse()
            raw = resp.read(ERROR_BODY_MAX * 4)
        except (OSError, http.client.HTTPException) as exc:
            if isinstance(exc, TimeoutError) or time.monotonic() >= deadline:
                raise EndpointError(
                    f"{method} {url}: no whole answer within the call deadline of "
                    f"{self.request_timeout:g} s"
                ) from exc
            raise EndpointError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
        finally:
            conn.close()
        if not 200 <= resp.status < 300:
            # the worker's own explanation, on one line (a condition message, a log field)
            text = " ".join(raw.decode("utf-8", "replace").split())[:ERROR_BODY_MAX]
            raise EndpointError(f"{method} {url}: status {resp.status}: {text}")

    def load(self, address: str, model_name: str, uri: str) -> None:
        body = json.dumps({"lora_name": model_name, "source": {"uri": uri}}).encode()
        self._call("POST", _join(address, "v1/loras"), body)

    def unload(self, address: str, model_name: str) -> None:
        self._call("DELETE", _join(address, "v1/loras/" + quote(model_name, safe="")), None)

    # ------------------------------------------------------------------ a batch
    def run_all(
        self, addresses: Sequence[str], call: Callable[[str], None], group: str = ""
    ) -> dict[str, str | None]:
        """``call(address)`` for every address on the pool (as ``group``), at most
        ``concurrency`` at once; address -> None on success or the error. A call not
        answered at the total timeout has failed: one not started yet never starts, one
        under way ends by its deadline and never holds the caller."""
        batch = _Batch(addresses, call, self.concurrency, self.pool, group)
        return batch.wait(self.total_timeout)


class _Batch:
    """One ``run_all``: feeds the pool ``limit`` calls at a time, collects the outcomes."""

    def __init__(
        self,
        addresses: Sequence[str],
        call: Callable[[str], None],
        limit: int,
        pool: FairPool,
        group: str,
    ) -> None:
        self.addresses = list(addresses)
        self.call, self.limit, self.pool, self.group = call, limit, pool, group
        self.todo = deque(self.addresses)
        self.results: dict[str, str | None] = {}
        self.active = 0
        self.over = False
        self.cond = threading.Condition()

    def wait(self, total_timeout: float) -> dict[str, str | None]:
        deadline = time.monotonic() + total_timeout
        with self.cond:
            self._feed()
            while len(self.results) < len(self.addresses):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            self.over = True  # nothing more starts
            self.todo.clear()
            out = dict(self.results)
        for a in self.addresses:
            out.setdefault(a, f"no answer within the total timeout of {total_timeout:g} s")
        return out

    def _feed(self) -> None:
        """Under the lock: start calls up to the limit."""
        while self.todo and self.active < self.limit and not self.over:
            address = self.todo.popleft()
            self.active += 1
            if not self.pool.submit(self.group, functools.partial(self._one, address)):
                self.active -= 1
                self.results[address] = "the controller is stopping"

    def _one(self, address: str) -> None:
        with self.cond:
            if self.over:  # waited in the pool past the total timeout
                self.active -= 1
                return
        try:
            self.call(address)
            outcome: str | None = None
        except EndpointError as exc:
            outcome = str(exc)
        except Exception as exc:  # a bug in one call must not lose the others
            log.exception("endpoint call crashed", extra={"address": address})
            outcome = f"{type(exc).__name__}: {exc}"
        with self.cond:
            self.results[address] = outcome
            self.active -= 1
            self._feed()
            self.cond.notify_all()


def _join(address: str, path: str) -> str:
    """``url.JoinPath(address, ...)``: keeps a path already in the address."""
    return address.rstrip("/") + "/" + path


__all__ = [
    "Candidate",
    "DeadlineExceeded",
    "EndpointError",
    "LoraClient",
    "extract_candidates",
    "pod_ready",
]
