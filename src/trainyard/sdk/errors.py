"""The SDK's exceptions: one type per way a call can fail, each carrying the server's own message.

Every API failure is an ``ApiError`` subclass chosen by the HTTP status and the ``Status`` body's
reason (``NotFoundError`` for 404, ``InvalidError`` with per-field causes for 422, ...). They are
also ``RuntimeError``s, which is what the Kubeflow SDK raises, so code written for it keeps
catching them; and they are lightkube's ``ApiError`` too (``exc.status.code``), so callers that
used the raw client before keep working. A plane that does not answer is a ``ConnectError``
(also a ``ConnectionError``); a wait that runs out is a ``WaitTimeoutError`` (a ``TimeoutError``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
from lightkube.core import exceptions as lk
from lightkube.models.meta_v1 import Status


class TrainyardError(Exception):
    """Base of every exception the SDK raises on purpose."""


@dataclass(frozen=True)
class Cause:
    """One field the server rejected: ``field`` is a path such as ``spec.pytorchReplicaSpecs.Master.replicas``."""

    field: str
    reason: str
    message: str


class ApiError(TrainyardError, lk.ApiError, RuntimeError):
    """The API server refused a request; ``str(exc)`` is the server's message."""

    def __init__(self, status: Status) -> None:
        lk.ApiError.__init__(self, status=status)
        self.code: int = int(status.code or 0)
        self.reason: str = status.reason or ""
        self.message: str = status.message or ""
        details = status.details
        self.causes: list[Cause] = [
            Cause(c.field or "", c.reason or "", c.message or "") for c in (details.causes if details else None) or []
        ]

    def __str__(self) -> str:
        return self.message or f"{self.code} {self.reason}".strip()


class BadRequestError(ApiError):
    """400: the request itself is malformed."""


class UnauthorizedError(ApiError):
    """401: no or wrong credentials in the kubeconfig."""


class ForbiddenError(ApiError):
    """403: the credentials may not do this."""


class NotFoundError(ApiError):
    """404: no such object (or no such kind served)."""


class AlreadyExistsError(ApiError):
    """409 AlreadyExists: an object of that name exists."""


class ConflictError(ApiError):
    """409 Conflict: the object changed since it was read (stale ``resourceVersion``)."""


class InvalidError(ApiError):
    """422: the object breaks the schema or admission rules; ``causes`` names each field."""


class ServerError(ApiError):
    """5xx: the server failed."""


class ConnectError(TrainyardError, ConnectionError):
    """The API server did not answer (no plane running there, wrong address)."""


class JobFailedError(TrainyardError, RuntimeError):
    """The job reached Failed while the caller waited for something else; the message is the job's."""

    def __init__(self, message: str, *, job: dict[str, Any] | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.job = job
        self.reason = reason


class WaitTimeoutError(TrainyardError, TimeoutError):
    """A wait ran out before the job reached what was expected."""


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    422: InvalidError,
}


def from_status(status: Status) -> ApiError:
    code = int(status.code or 0)
    if code == 409 and status.reason == "AlreadyExists":
        return AlreadyExistsError(status)
    if code >= 500:
        return ServerError(status)
    return _BY_CODE.get(code, ApiError)(status)


@contextmanager
def translated(server: str = "") -> Iterator[None]:
    """Raise the SDK's typed exceptions for lightkube's and httpx's inside the block."""
    try:
        yield
    except ApiError:
        raise
    except lk.ApiError as exc:
        raise from_status(exc.status) from exc
    except httpx2.TransportError as exc:
        where = f" at {server}" if server else ""
        raise ConnectError(
            f"cannot reach the API server{where}: {exc or type(exc).__name__}"
            " (is the control plane running? start it with `yard up`)"
        ) from exc
