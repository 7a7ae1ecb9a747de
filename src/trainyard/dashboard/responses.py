"""The dashboard's answers: JSON bodies, Kubernetes ``Status`` failures, server-sent event streams."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 422: "Invalid"}


def body(value: Any, code: int = 200) -> web.Response:
    return web.Response(body=json.dumps(value).encode(), status=code, content_type="application/json")


def status(code: int, reason: str, message: str) -> web.Response:
    """A failure as the Kubernetes API words one, so the page shows ``message`` whatever failed."""
    return body(
        {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code},
        code,
    )


def not_found(what: str) -> web.Response:
    return status(404, "NotFound", f"{what} not found")


async def open_stream(request: web.Request) -> web.StreamResponse:
    """A ``text/event-stream`` response, headers sent; proxies are asked not to buffer it."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    return response


def event(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
