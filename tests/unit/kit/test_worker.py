"""The kit's worker: each outcome of a pass sorted by one taxonomy, and reported."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from lightkube.core.exceptions import ApiError
from lightkube.models import meta_v1

from trainyard.kit.queue import WorkQueue
from trainyard.kit.worker import Failure, NotLeading, Permanent, Waiting, classify, work

Key = tuple[str, str]
KEY: Key = ("ns", "job")


def api_error(code: int) -> ApiError:
    return ApiError(status=meta_v1.Status(code=code, message=f"answered {code}"))


def test_every_failure_has_one_class() -> None:
    assert classify(api_error(409)) is Failure.CONFLICT
    assert classify(api_error(500)) is Failure.TRANSIENT
    assert classify(api_error(403)) is Failure.TRANSIENT  # a refusal that may pass (a quota that frees)
    assert classify(NotLeading("lost the lease")) is Failure.TRANSIENT
    assert classify(Waiting("ports", 30)) is Failure.WAITING
    assert classify(Permanent("FailedValidation", "bad spec")) is Failure.PERMANENT


def one_pass(
    outcome: Callable[[], Awaitable[float | None]], passes_wanted: int = 1
) -> tuple[WorkQueue[Key], list[tuple[str, BaseException | None]], list[Permanent]]:
    """Run one worker until ``passes_wanted`` passes of KEY whose reconcile does ``outcome``; the
    queue after, what was observed and told."""
    observed: list[tuple[str, BaseException | None]] = []
    told: list[Permanent] = []

    async def go() -> WorkQueue[Key]:
        queue: WorkQueue[Key] = WorkQueue(base_delay=10.0)
        passes = 0

        async def reconcile(_: Key) -> float | None:
            nonlocal passes
            passes += 1
            return await outcome()

        async def tell(_: Key, why: Permanent) -> None:
            told.append(why)

        enough = asyncio.Event()

        def observe(result: str, seconds: float, key: Key, error: BaseException | None) -> None:
            assert key == KEY and seconds >= 0
            observed.append((result, error))
            if len(observed) == passes_wanted:
                enough.set()

        queue.add(KEY)
        worker = asyncio.create_task(work(queue, reconcile, name="test", observe=observe, on_permanent=tell))
        await asyncio.wait_for(enough.wait(), 10)
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
        assert passes == passes_wanted
        return queue

    return asyncio.run(go()), observed, told


def test_a_conflict_is_retried_at_once_then_backs_off() -> None:
    async def conflict() -> float | None:
        raise api_error(409)

    queue, observed, _ = one_pass(conflict, passes_wanted=2)  # the second pass came without delay
    assert [o[0] for o in observed] == ["error", "error"]
    assert len(queue) == 0 and queue.waiting() == 1 and queue.failures(KEY) == 2  # the third waits


def test_a_transient_failure_backs_off() -> None:
    async def down() -> float | None:
        raise api_error(503)

    queue, observed, _ = one_pass(down)
    assert observed[0][0] == "error" and len(queue) == 0 and queue.waiting() == 1 and queue.failures(KEY) == 1


def test_waiting_is_no_failure_and_comes_back_after_its_delay() -> None:
    async def wait() -> float | None:
        raise Waiting("no ports", 30)

    queue, observed, _ = one_pass(wait)
    assert observed == [("requeue_after", None)] and queue.waiting() == 1 and queue.failures(KEY) == 0


def test_a_permanent_failure_is_told_and_not_retried() -> None:
    async def invalid() -> float | None:
        raise Permanent("FailedValidation", "spec.x: Invalid value")

    queue, observed, told = one_pass(invalid)
    assert observed[0][0] == "error" and [t.reason for t in told] == ["FailedValidation"]
    assert len(queue) == 0 and queue.waiting() == 0


def test_success_forgets_the_failures_and_a_requeue_comes_later() -> None:
    async def again() -> float | None:
        return 60.0

    queue, observed, _ = one_pass(again)
    assert observed == [("requeue_after", None)] and queue.waiting() == 1 and queue.failures(KEY) == 0
