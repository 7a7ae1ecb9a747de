"""Watches through the client: the stream of a watch split into lines as bytes (or, from a server
in this process, its events as objects: ``WATCH_OBJECTS``), and ``watch_forever``, a watch that
reconnects for as long as its reader iterates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from lightkube import ALL_NS, AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.core.generic_client import BasicRequest, WatchDriver
from lightkube.types import OnErrorAction, OnErrorHandler, OnErrorResult, on_error_raise

from trainyard.client.resources import to_dict

log = logging.getLogger(__name__)


WATCH_OBJECTS = "trainyard.watch_objects"
"""A watch request's extension (never sent: httpx extensions stay in the process) asking a server
in this process for its events as objects, ``WHOLE`` or ``LEAN`` (without ``managedFields``); the
response's extension of the same name is then the stream to read them from (``items``, in
``cluster.apiserver.loopback``)."""
WHOLE, LEAN = "whole", "lean"


async def watch_lines(
    adapter: Any, br: BasicRequest, on_error: OnErrorHandler = on_error_raise
) -> AsyncIterator[tuple[str, Any]]:
    """``GenericAsyncClient.watch`` (pinned lightkube's: the same driver, the same answers to
    ``on_error``, a 410 starting over without a version), with the stream's lines split as bytes:
    httpx's text decoding and line splitting cost an informer as much as decoding the events.

    A watch of plain objects asks a server in this process for them decoded (``WATCH_OBJECTS``):
    the events an informer reads most, without a line encoded, framed, split and parsed again.
    """
    driver: Any = WatchDriver(br, adapter._client.build_request)
    res: Any = br.response_type
    plain = isinstance(res, type) and issubclass(res, dict)
    lean = plain and getattr(res, "without_managed_fields", False)
    failures = 0
    while True:
        request = driver.get_request(timeout=adapter._watch_timeout)
        if plain:
            request.extensions[WATCH_OBJECTS] = LEAN if lean else WHOLE
        response = await adapter.send(request, stream=True)
        try:
            response.raise_for_status()
            failures = 0
            objects = response.extensions.get(WATCH_OBJECTS)
            if objects is None:
                async for line in _lines(response.aiter_bytes()):
                    yield driver.process_one_line(line)
                continue
            async for batch in objects.items():
                for item in batch:
                    if isinstance(item, bytes):  # whole lines: bookmarks, errors, a backlog
                        for line in _whole_lines(item):
                            kind, obj = driver.process_one_line(line)
                            if lean and isinstance(obj.get("metadata"), dict):
                                obj["metadata"].pop("managedFields", None)
                            yield kind, obj
                        continue
                    kind, obj = item
                    # What ``process_one_line`` keeps to resume from, as it would have read it.
                    driver._version = (obj.get("metadata") or {}).get("resourceVersion")
                    yield kind, res(obj)
        except httpx2.HTTPError as exc:
            failures += 1
            decision = on_error(exc, failures)
            if decision.action is OnErrorAction.RAISE:
                raise
            if decision.action is OnErrorAction.STOP:
                break
            if isinstance(exc, ApiError) and exc.status.code == 410:
                driver.reset_version()
            if decision.sleep > 0:
                await asyncio.sleep(decision.sleep)
        finally:
            await response.aclose()


async def _lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The non-blank lines of a byte stream (``\n``-ended, a ``\r`` before it dropped)."""
    rest = b""
    async for chunk in chunks:
        if b"\n" not in chunk:
            rest += chunk
            continue
        complete, _, rest = (rest + chunk).rpartition(b"\n")
        for line in _whole_lines(complete):
            yield line
    for line in _whole_lines(rest):
        yield line


def _whole_lines(data: bytes) -> list[bytes]:
    """The non-blank lines of ``data``, whole lines only, a ``\r`` before each end dropped."""
    return [line.rstrip(b"\r") for line in data.split(b"\n") if line.strip()]


def _retry(exc: Exception, count: int) -> OnErrorResult:
    # Reconnect from the last revision; lightkube falls back to a fresh watch on 410.
    delay = min(0.2 * 2 ** min(count, 5), 5.0)
    if count:
        log.warning("watch interrupted (%s); reconnecting in %.1fs", exc, delay)
    return OnErrorResult(OnErrorAction.RETRY, sleep=delay)


async def watch_forever(
    client: AsyncClient, res: Any, *, namespace: str | None = ALL_NS, labels: dict[str, Any] | None = None
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(event type, object dict) for every change, reconnecting for as long as the caller iterates."""
    while True:
        try:
            async for kind, obj in client.watch(res, namespace=namespace, labels=labels, on_error=_retry):
                yield kind, to_dict(obj)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a stream that ends for good is restarted, never fatal
            log.warning("watch on %s ended (%s); restarting", getattr(res, "__name__", res), exc)
            await asyncio.sleep(1.0)
