"""API errors as Kubernetes ``Status`` objects: the only way the server reports a failure."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainyard.cluster.qos import format_bytes
from trainyard.cluster.server.apiserver.registry import ResourceType


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.metadata: dict[str, Any] = {}  # ListMeta of the Status, e.g. a fresh continue token on 410

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.metadata),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(rt: ResourceType, name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "kind": rt.plural}
    if rt.group:
        out["group"] = rt.group
    return out


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{rt.qualified} "{name}" not found', _details(rt, name))


def unknown_path() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists', _details(rt, name))


def conflict(rt: ResourceType, name: str, why: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rt.qualified} "{name}": {why}',
        _details(rt, name),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message, {})


def unsupported_media(accepted: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {accepted}",
    )


def invalid(rt: ResourceType, name: str, causes: Sequence[tuple[str, str, str]]) -> ApiError:
    """422 with one cause per (reason, field, message), rendered the way kubectl prints them."""
    group = f".{rt.group}" if rt.group else ""
    summary = ", ".join(f"{field}: {message}" for _, field, message in causes)
    if len(causes) > 1:
        summary = f"[{summary}]"
    details = {
        "name": name,
        "kind": rt.kind,
        "causes": [{"reason": r, "field": f, "message": m} for r, f, m in causes],
    }
    if rt.group:
        details["group"] = rt.group
    return ApiError(422, "Invalid", f'{rt.kind}{group} "{name}" is invalid: {summary}', details)


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def storage_full(database: Path, detail: str, free: int | None, total: int | None) -> ApiError:
    """507 for a write the store's disk had no room for (kube-apiserver answers etcd's "database
    space exceeded" with a 500; 507 says what it is): which disk, and what to do."""
    room = f"{format_bytes(free)} free of {format_bytes(total)}" if free is not None and total is not None else ""
    home = database.parent
    return ApiError(
        507,
        "InsufficientStorage",
        f"Insufficient storage: the API server's store {database} could not be written ({detail}"
        f"{'; ' + room if room else ''}), so nothing was changed. Free space on the disk that holds {home} "
        "(the plane's $TRAINYARD_HOME) and retry",
    )
