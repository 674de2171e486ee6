"""A bounded, fair pool for the calls to model workers (LoRA load / unload).

* at most ``size`` calls run at once, each on a thread of its own that ends as soon as no
  call is waiting that it may start: no idle thread is kept, and the number of threads is
  the number of calls running (never more than ``size``);
* at most ``per_group`` of them for one group (a namespace): one namespace's slow workers
  cannot take every slot, the others' calls still start;
* waiting calls start round-robin over their groups (one of each group in turn), in order
  within a group.

A call itself must end: the LoRA client bounds each by its deadline
(``modelendpoint.LoraClient``), so a slot is held at most that long.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from collections.abc import Callable

log = logging.getLogger(__name__)

Call = Callable[[], None]


class FairPool:
    def __init__(self, size: int, per_group: int, name: str = "lora-call") -> None:
        if size < 1 or per_group < 1:
            raise ValueError("pool size and per-group share must be at least 1")
        self.size = size
        self.per_group = min(per_group, size)
        self.name = name
        self._cond = threading.Condition()
        #: group -> calls waiting; dict order is the round-robin order
        self._waiting: dict[str, deque[Call]] = {}
        self._running: Counter[str] = Counter()
        self._closed = False

    # ------------------------------------------------------------------ callers
    def submit(self, group: str, call: Call) -> bool:
        """Queue ``call`` for ``group``; False when the pool is closed (never started)."""
        with self._cond:
            if self._closed:
                return False
            self._waiting.setdefault(group, deque()).append(call)
            self._start_threads()
        return True

    def running(self, group: str | None = None) -> int:
        with self._cond:
            return self._running[group] if group is not None else sum(self._running.values())

    def waiting(self) -> int:
        with self._cond:
            return sum(len(q) for q in self._waiting.values())

    def close(self) -> None:
        """Start nothing more (waiting calls are dropped); running calls end by their
        own deadline, and their threads with them."""
        with self._cond:
            self._closed = True
            self._waiting.clear()

    # ------------------------------------------------------------------ inside
    def _start_threads(self) -> None:
        """Under the lock: a thread for each call that may start now."""
        while sum(self._running.values()) < self.size:
            picked = self._next()
            if picked is None:
                return
            threading.Thread(target=self._work, args=picked, name=self.name, daemon=True).start()

    def _next(self) -> tuple[str, Call] | None:
        """Under the lock: the first group in turn below its share, its oldest call (the
        group moves to the end of the turn); counted as running."""
        for group, calls in self._waiting.items():
            if self._running[group] >= self.per_group:
                continue
            call = calls.popleft()
            del self._waiting[group]
            if calls:
                self._waiting[group] = calls
            self._running[group] += 1
            return group, call
        return None

    def _work(self, group: str, call: Call) -> None:
        """Run calls until none may start; then the thread ends."""
        while True:
            try:
                call()
            except Exception:  # a bug in one call must not stop the pool
                log.exception("pooled call crashed", extra={"group": group})
            with self._cond:
                self._running[group] -= 1
                if self._running[group] <= 0:
                    del self._running[group]
                picked = None if self._closed else self._next()
                if picked is None:
                    return
            group, call = picked


__all__ = ["FairPool"]
