"""The node's pod status writer: newest wins, and a held status gives way to a newer one."""

from __future__ import annotations

import asyncio
from typing import Any

from trainyard.cluster.node.podstatus import StatusWriter

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
