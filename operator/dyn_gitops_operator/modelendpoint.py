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

Plain ``http.client``: no dependency, and nothing here talks to the API server.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

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


class LoraClient:
    """The LoRA management calls of one controller."""

    def __init__(self, request_timeout: float, total_timeout: float, concurrency: int) -> None:
        self.request_timeout = request_timeout
        self.total_timeout = total_timeout
        self.concurrency = concurrency

    # ------------------------------------------------------------------ one call
    def _call(self, method: str, url: str, body: bytes | None) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise EndpointError(f"not an http address: {url}")
        conn = http.client.HTTPConnection(
            parts.hostname, parts.port or 80, timeout=self.request_timeout
        )
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, parts.path or "/", body=body, headers=headers)
            resp = conn.getresponse()
            raw = resp.read(ERROR_BODY_MAX * 4)
        except (OSError, http.client.HTTPException) as exc:
            raise EndpointError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
        finally:
            conn.close()
        if not 200 <= resp.status < 300:
            text = raw.decode("utf-8", "replace").strip()[:ERROR_BODY_MAX]
            raise EndpointError(f"{method} {url}: status {resp.status}: {text}")

    def load(self, address: str, model_name: str, uri: str) -> None:
        body = json.dumps({"lora_name": model_name, "source": {"uri": uri}}).encode()
        self._call("POST", _join(address, "v1/loras"), body)

    def unload(self, address: str, model_name: str) -> None:
        self._call("DELETE", _join(address, "v1/loras/" + quote(model_name, safe="")), None)

    # ------------------------------------------------------------------ a batch
    def run_all(
        self, addresses: Sequence[str], call: Callable[[str], None]
    ) -> dict[str, str | None]:
        """``call(address)`` for every address, in parallel (bounded); address -> None on
        success or the error. A call still running at the total timeout has failed; it is
        left to end by its own request timeout and never holds the caller."""
        results: dict[str, str | None] = {}
        lock = threading.Lock()

        def one(address: str) -> None:
            try:
                call(address)
                outcome: str | None = None
            except EndpointError as exc:
                outcome = str(exc)
            except Exception as exc:  # a bug in one call must not lose the others
                log.exception("endpoint call crashed", extra={"address": address})
                outcome = f"{type(exc).__name__}: {exc}"
            with lock:
                results[address] = outcome

        if not addresses:
            return {}
        pool = ThreadPoolExecutor(
            max_workers=min(self.concurrency, len(addresses)), thread_name_prefix="lora"
        )
        futures = [pool.submit(one, a) for a in addresses]
        deadline = time.monotonic() + self.total_timeout
        for f in futures:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                f.result(timeout=left)
            except Exception:  # the timeout; ``one`` itself never raises
                break
        pool.shutdown(wait=False, cancel_futures=True)
        with lock:
            out = dict(results)
        for a in addresses:
            out.setdefault(a, f"no answer within the total timeout of {self.total_timeout:g} s")
        return out


def _join(address: str, path: str) -> str:
    """``url.JoinPath(address, ...)``: keeps a path already in the address."""
    return address.rstrip("/") + "/" + path


__all__ = ["Candidate", "EndpointError", "LoraClient", "extract_candidates", "pod_ready"]
