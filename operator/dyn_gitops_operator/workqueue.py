"""A de-duplicating, rate-limited work queue (client-go ``workqueue`` semantics).

* A key is queued at most once; a key being processed is not handed to a second worker,
  and if it was added meanwhile it is queued again when ``done`` is called.
* ``add_after`` delays a key; ``add_rate_limited`` delays it by a per-key exponential
  backoff (``forget`` resets it), capped, and by a shared token bucket so a burst of
  failures cannot hammer the API server.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class TokenBucket:
    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Take a token; the delay (seconds) until it is really available."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        backoff_base: float = 0.02,
        backoff_max: float = 60.0,
        qps: float = 50.0,
        burst: int = 300,
    ) -> None:
        self._cond = threading.Condition()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._waiting: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._failures: dict[K, int] = {}
        self._base = backoff_base
        self._max = backoff_max
        self._bucket = TokenBucket(qps, burst)
        self._shutdown = False

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def add(self, key: K) -> None:
        with self._cond:
            if self._shutdown or key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            heapq.heappush(self._waiting, (time.monotonic() + delay, next(self._seq), key))
            self._cond.notify()

    def backoff(self, key: K) -> float:
        """The delay the next ``add_rate_limited`` of ``key`` would use (no side effect)."""
        with self._cond:
            n = self._failures.get(key, 0)
        return float(min(self._max, self._base * 2**n))

    def add_rate_limited(self, key: K) -> float:
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        delay = float(max(min(self._max, self._base * 2**n), self._bucket.reserve()))
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def retries(self, key: K) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    def get(self, timeout: float | None = None) -> K | None:
        """The next key, or None on shutdown / timeout. Call ``done(key)`` afterwards."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                self._promote_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._processing.add(key)
                    self._dirty.discard(key)
                    return key
                if self._shutdown:
                    return None
                now = time.monotonic()
                wait = None if not self._waiting else max(0.0, self._waiting[0][0] - now)
                if end is not None:
                    left = end - now
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def done(self, key: K) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def _promote_due(self) -> None:
        now = time.monotonic()
        while self._waiting and self._waiting[0][0] <= now:
            _, _, key = heapq.heappop(self._waiting)
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._queue.append(key)
