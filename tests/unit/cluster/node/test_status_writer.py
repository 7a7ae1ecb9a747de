"""The node's pod status writer: newest wins, a held status gives way to a newer one, and a status the
server could not store (a 5xx: its disk is full) is written again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import Status

from trainyard.cluster.clients.node.podstatus import StatusWriter, server_failed

Obj = dict[str, Any]


class Recorder:
    """The API side of the writer: records each write; a write can be kept in flight until released."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str, str]] = []
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()

    async def __call__(self, namespace: str, name: str, status: Obj) -> None:
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        self.writes.append((namespace, name, status["phase"]))


def test_a_held_running_status_gives_way_to_the_final_one() -> None:
    async def scenario() -> list[tuple[str, str, str]]:
        api = Recorder()
        writer = StatusWriter(api, 4)
        # Held far longer than the test: only the final status, put without hold, releases it.
        running = writer.put("ns", "p", {"phase": "Running"}, hold=60)
        done = writer.put("ns", "p", {"phase": "Succeeded"})
        await asyncio.wait_for(asyncio.gather(running, done), 10)
        return api.writes

    assert asyncio.run(scenario()) == [("ns", "p", "Succeeded")]


def test_a_held_status_alone_is_written_after_its_hold() -> None:
    async def scenario() -> list[tuple[str, str, str]]:
        api = Recorder()
        writer = StatusWriter(api, 4)
        await asyncio.wait_for(writer.put("ns", "p", {"phase": "Running"}, hold=0.01), 10)
        return api.writes

    assert asyncio.run(scenario()) == [("ns", "p", "Running")]


def test_statuses_queued_behind_a_write_in_flight_collapse_to_the_newest() -> None:
    async def scenario() -> list[tuple[str, str, str]]:
        api = Recorder()
        api.gate = asyncio.Event()
        writer = StatusWriter(api, 4)
        first = writer.put("ns", "p", {"phase": "Pending"})
        await asyncio.wait_for(api.entered.wait(), 10)
        others = [writer.put("ns", "p", {"phase": phase}) for phase in ("Running", "Succeeded")]
        api.gate.set()
        await asyncio.wait_for(asyncio.gather(first, *others), 10)
        return api.writes

    assert asyncio.run(scenario()) == [("ns", "p", "Pending"), ("ns", "p", "Succeeded")]


def api_error(code: int) -> ApiError:
    return ApiError(status=Status(code=code, status="Failure", message=f"answered {code}"))


def test_a_status_the_server_could_not_store_is_written_again_newest_first() -> None:
    async def scenario() -> tuple[list[tuple[str, str, str]], int]:
        api = Recorder()
        failures = [api_error(507)]  # a full disk: the first write is refused, the next one stored
        tries = 0

        async def write(namespace: str, name: str, status: Obj) -> None:
            nonlocal tries
            tries += 1
            if failures:
                # Meanwhile the pod moved on: the newer status is the one written again.
                writer.put(namespace, name, {"phase": "Succeeded"})
                raise failures.pop()
            await api(namespace, name, status)

        writer = StatusWriter(write, 4, retryable=server_failed, retry_after=0)
        running = writer.put("ns", "p", {"phase": "Running"})
        await asyncio.wait_for(running, 10)
        return api.writes, tries

    assert asyncio.run(scenario()) == ([("ns", "p", "Succeeded")], 2)


def test_only_server_failures_are_written_again() -> None:
    assert server_failed(api_error(507)) and server_failed(api_error(500))
    assert not server_failed(api_error(422)) and not server_failed(api_error(409)) and not server_failed(OSError())

    async def scenario() -> None:
        async def write(namespace: str, name: str, status: Obj) -> None:
            raise api_error(422)

        await StatusWriter(write, 4, retryable=server_failed, retry_after=0).put("ns", "p", {"phase": "Running"})

    with pytest.raises(ApiError, match="answered 422"):
        asyncio.run(scenario())
