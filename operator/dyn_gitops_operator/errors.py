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
"""

from __future__ import annotations


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
    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(f"{status} {reason}: {message}")


class NotFoundError(ApiError):
    error_type = "not_found"


class ConflictError(ApiError):
    error_type = "conflict"


class GoneError(ApiError):
    error_type = "gone"


class InvalidError(ApiError):
    error_type = "validation"


class ForbiddenError(ApiError):
    error_type = "forbidden"


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
