"""The kit's work queue: de-duplicated keys, one worker per key, delays that keep the sooner, backoff."""

from __future__ import annotations

import asyncio

from trainyard.kit.queue import WorkQueue


def test_a_key_is_queued_once_and_never_handed_to_two_workers() -> None:
    async def go() -> None:
        queue: WorkQueue[str] = WorkQueue()
        queue.add("a")
        queue.add("a")
        assert len(queue) == 1
        key = await queue.get()
        queue.add("a")  # changed while being worked on: queued again only when that work is done
        assert len(queue) == 0
        queue.done(key)
        assert len(queue) == 1 and await queue.get() == "a"

    asyncio.run(go())


def test_add_after_keeps_the_sooner_time() -> None:
    async def go() -> None:
        queue: WorkQueue[str] = WorkQueue()
        loop = asyncio.get_running_loop()
        queue.add_after("a", 0.05)
        queue.add_after("a", 30)  # a later reason does not put off the earlier one
        started = loop.time()
        assert await asyncio.wait_for(queue.get(), 5) == "a"
        assert loop.time() - started < 5
        queue.done("a")
        queue.add_after("b", 30)
        queue.add_after("b", 0.05)  # a sooner reason brings it forward
        assert await asyncio.wait_for(queue.get(), 5) == "b"
        assert queue.waiting() == 0

    asyncio.run(go())


def test_failures_back_off_per_key_until_forgotten() -> None:
    async def go() -> None:
        queue: WorkQueue[str] = WorkQueue(base_delay=1.0, max_delay=5.0)
        assert [queue.add_rate_limited("a") for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
        assert queue.failures("a") == 5 and queue.failures("b") == 0
        queue.forget("a")
        assert queue.add_rate_limited("a", at_once=True) == 0.0  # a conflict: once at once
        assert queue.add_rate_limited("a", at_once=True) == 2.0  # then backing off
        queue.close()
        assert queue.waiting() == 0

    asyncio.run(go())
