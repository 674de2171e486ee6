"""Counts read from fields Git sets, and the ones the controller refuses to apply.

A replica count reaches the controller from Git (a rendered workload's
``dyn-gitops.io/desired-replicas`` or ``seed-replicas`` annotation, a DGD component's
``replicas``, a scaling adapter's ``spec.replicas``). The renderer bounds them (its setting
max-replicas); the controller checks again, against its own ceiling (setting max-replicas
here too), so a hand-edited or foreign object cannot make it scale a workload to 20,000 or
to a negative count. A refused count is a permanent input error until the object changes:
the workload keeps its replicas, the DGD's Ready condition says why, it is logged once, and
the reconcile succeeds (no retry, no backoff).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dyn_gitops_operator.settings import MAX_REPLICAS_ENV

log = logging.getLogger(__name__)

#: Ready reasons of a refused count
ABOVE_CEILING = "ReplicasAboveCeiling"
INVALID = "InvalidReplicas"
#: refusals spelled out in one condition message (the rest counted)
MESSAGE_ITEMS = 10
#: digits of a found value quoted in full; longer ones are shortened
QUOTED_DIGITS = 24

_UNSIGNED = re.compile(r"[0-9]+")  # ASCII digits only (str.isdigit accepts other scripts)


@dataclass(frozen=True, order=True)
class Refusal:
    """A count not applied: where it was read, what was found, why."""

    #: ``Kind namespace/name`` of the object carrying it
    obj: str
    #: where on that object (``annotation <key>``, ``spec.replicas``, ...)
    field: str
    #: the value as quoted in messages (a number, shortened; never arbitrary text)
    found: str
    reason: str
    ceiling: int

    def message(self) -> str:
        if self.reason == ABOVE_CEILING:
            why = (
                f"is {self.found}, more than the {self.ceiling} replicas the controller applies "
                f"(its setting max-replicas: --max-replicas, {MAX_REPLICAS_ENV})"
            )
        else:
            why = f"is {self.found}"
        return f"{self.obj}: {self.field} {why}; its replicas are left as they are"


def _quoted(digits: str) -> str:
    digits = digits.lstrip("0") or "0"
    if len(digits) <= QUOTED_DIGITS:
        return digits
    return f"{digits[:12]}... ({len(digits)} digits)"


def check(value: Any, ceiling: int) -> int | tuple[str, str]:
    """``value`` as a count from 0 to ``ceiling``, else (reason, found). Text of digits (an
    annotation) or an integer (a spec field); a digit string longer than the ceiling's is
    refused before any conversion (``int()`` refuses more than 4,300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            return INVALID, f"{value}, a negative count"
        if value <= ceiling:
            return value
        if value.bit_length() > 3 * QUOTED_DIGITS:  # str() refuses more than 4,300 digits
            return ABOVE_CEILING, f"a number of {value.bit_length()} bits"
        return ABOVE_CEILING, _quoted(str(value))
    if not isinstance(value, str):
        return INVALID, f"a {type(value).__name__}, not an integer"
    negative = value.startswith("-")
    digits = value[1:] if negative else value
    if not _UNSIGNED.fullmatch(digits):
        return INVALID, f"a text of {len(value)} characters, not an integer"
    if negative:
        return INVALID, f"-{_quoted(digits)}, a negative count"
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(ceiling)):
        return ABOVE_CEILING, _quoted(digits)
    number = int(significant)
    return number if number <= ceiling else (ABOVE_CEILING, _quoted(digits))


def condition(refusals: Iterable[Refusal]) -> tuple[str, str]:
    """(Ready reason, message) of a graph with refused counts (at least one)."""
    items = sorted(refusals)
    parts = [r.message() for r in items[:MESSAGE_ITEMS]]
    if len(items) > MESSAGE_ITEMS:
        parts.append(f"and {len(items) - MESSAGE_ITEMS} more")
    return items[0].reason, "Replicas not applied: " + "; ".join(parts)


class RefusalLog:
    """Logs each graph's refusals once per change (a resync or another event of the same
    graph logs nothing new), and once when they are gone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], frozenset[Refusal]] = {}

    def report(self, key: tuple[str, str], refusals: Iterable[Refusal]) -> None:
        now = frozenset(refusals)
        with self._lock:
            before = self._seen.pop(key, frozenset())
            if now:
                self._seen[key] = now
        graph = "/".join(key)
        for r in sorted(now - before):
            log.warning(
                "replica count refused, not applied",
                extra={"object": graph, "reason": r.reason, "error": r.message()},
            )
        if before and not now:
            log.info("replica counts accepted again", extra={"object": graph})


__all__ = ["ABOVE_CEILING", "INVALID", "Refusal", "RefusalLog", "check", "condition"]
