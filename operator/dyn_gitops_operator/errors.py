"""Controller error tree.

ControllerError
 +-- ApiError (an answer from the API server, or no answer)
 |    +-- NotFoundError      404
 |    +-- ConflictError      409: stale resourceVersion or a field-ownership conflict; retry
 |    +-- GoneError          410: expired watch / list resourceVersion; re-list
 |    +-- InvalidError       422 / 400: the request itself is wrong
 |    +-- ForbiddenError     401 / 403: RBAC
 |    +-- TransientError     429, 5xx, connection failures: retry with backoff
 +-- StandbyError (a write attempted after this replica stopped being the leader)
 +-- TerminalError (a reconcile that failed with a terminal ApiError, already reported)

Terminal (``ApiError.terminal``): 422 / 400 and 403, answers a retry of the same request
cannot change (controller-runtime's ``reconcile.TerminalError``, kopf's ``PermanentError``);
the key waits for the next change of its object instead of a retry with backoff. A 401 is
not: credentials are refreshed (a rotated token), and the next attempt may pass.
"""

from __future__ import annotations

import re
from http import HTTPStatus

#: the longest server message kept (an Event note's limit; a Status can quote a whole object)
DETAIL_MAX = 1024
#: Kubernetes' ``metav1.StatusReason`` per HTTP status, for an answer that carries none
#: (a proxy's or the mux's plain-text ``404 page not found``)
STATUS_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
#: a reason as Kubernetes writes them (``NotFound``, ``AlreadyExists``): one CamelCase word
_REASON = re.compile(r"[A-Z][A-Za-z0-9]{0,62}")
#: a value the API server quotes in a field error (``spec.x: Invalid value: "v": ...``)
_VALUE = re.compile(
    r"((?:(?:Invalid|Unsupported|Duplicate) value|Not found): )"
    r'("(?:[^"\\]|\\.)*"|.*?(?=: |, |\]|$))'
)


def redact(text: str) -> str:
    """The server's message with every quoted field value replaced (it may echo a value
    of the object, and the object may carry a credential)."""
    return _VALUE.sub(r'\1"<redacted>"', text)


def short_reason(status: int, reason: str) -> str:
    """The server's reason when it is one (``NotFound``), else the one of the status."""
    if _REASON.fullmatch(reason):
        return reason
    if status in STATUS_REASONS:
        return STATUS_REASONS[status]
    try:
        return HTTPStatus(status).phrase.title().replace(" ", "").replace("-", "")
    except ValueError:
        return "Unknown" if status else "ConnectionFailed"


def short_detail(message: str) -> str:
    """One line, values redacted, bounded: what a log line, a condition or an Event shows."""
    text = redact(" ".join(message.split()))
    return text if len(text) <= DETAIL_MAX else text[: DETAIL_MAX - 3] + "..."


class ControllerError(Exception):
    """Root of every error the controller raises on purpose."""

    #: value of the ``error_type`` metric label
    error_type = "internal"


class StartupError(ControllerError):
    """The controller cannot start as configured (a kubeconfig that cannot be loaded): a
    message for a person, never a traceback (exit code 2)."""


class StandbyError(ControllerError):
    """This replica may not write any more (its leadership ended mid-reconcile): the key
    waits, as on a standby replica, and no write is sent."""

    error_type = "standby"


class ApiError(ControllerError):
    #: a retry of the same request gets the same answer (see the module docstring)
    terminal = False

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        #: a short CamelCase reason (the server's, else the status's: never a body)
        self.reason = short_reason(status, reason)
        #: the server's message alone: one line, quoted values redacted, bounded
        self.detail = short_detail(message)
        #: the request that got this answer ("apply Deployment ns/name"), set by the caller
        #: that knows it (``reconcilers.base.Context``); empty otherwise
        self.call = ""
        text = f"{status} {self.reason}" if status else self.reason
        super().__init__(f"{text}: {self.detail}" if self.detail else text)


class NotFoundError(ApiError):
    error_type = "not_found"


class ConflictError(ApiError):
    error_type = "conflict"


class GoneError(ApiError):
    error_type = "gone"


class InvalidError(ApiError):
    error_type = "validation"
    terminal = True


class ForbiddenError(ApiError):
    error_type = "forbidden"

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(status, reason, message)
        self.terminal = status == 403  # 401: refreshed credentials may pass


class TerminalError(ControllerError):
    """A reconcile stopped by a terminal ``ApiError`` (``cause``), already reported on the
    object (condition, event): the work queue forgets the key instead of retrying it, and
    the next change of the object brings it back (controller-runtime's TerminalError)."""

    def __init__(self, cause: ApiError) -> None:
        self.cause = cause
        self.error_type = cause.error_type
        super().__init__(str(cause))


class TransientError(ApiError):
    error_type = "unavailable"


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidError,
    401: ForbiddenError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    422: InvalidError,
}


def api_error(status: int, reason: str, message: str) -> ApiError:
    """The error class for an HTTP status (unknown 4xx are invalid, the rest transient)."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = InvalidError if 400 <= status < 500 and status != 429 else TransientError
    return cls(status, reason, message)
