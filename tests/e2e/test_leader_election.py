"""Lease leader election, step by step: real lightkube clients against an in-process API server,
with each candidate's monotonic clock injected so that expiry is exact rather than waited for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import AsyncClient, KubeConfig
from lightkube.resources.coordination_v1 import Lease

from trainyard.cluster.paths import Layout
from trainyard.cluster.server.plane import ApiPlane
from trainyard.embedded import kubeconfig
from trainyard.operator.leader import LeaderElectionConfig, LeaderElector

pytestmark = pytest.mark.e2e


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


Scenario = Callable[[AsyncClient, Callable[[str, Clock], LeaderElector]], Awaitable[None]]


def run(tmp_path: Path, scenario: Scenario) -> None:
    async def main() -> None:
        plane = ApiPlane(Layout(tmp_path), port=0)
        await plane.start()
        config = KubeConfig.from_dict(yaml.safe_load(yaml.safe_dump(kubeconfig(plane.url))))
        client = AsyncClient(config)
        try:

            def candidate(identity: str, clock: Clock) -> LeaderElector:
                cfg = LeaderElectionConfig("default", "the-lease", identity)
                return LeaderElector(client, cfg, monotonic=clock)

            await scenario(client, candidate)
        finally:
            await client.close()
            await plane.stop()

    asyncio.run(main())


async def spec(client: AsyncClient) -> dict[str, Any]:
    lease = await client.get(Lease, "the-lease", namespace="default")
    return dict(lease.to_dict()["spec"])


def test_first_candidate_creates_the_lease_and_renews_it(tmp_path: Path) -> None:
    async def scenario(client: AsyncClient, candidate: Callable[[str, Clock], LeaderElector]) -> None:
        clock = Clock()
        a = candidate("a", clock)
        assert not a.is_leading()
        assert await a.try_acquire_or_renew()
        assert a.is_leading()
        first = await spec(client)
        assert first["holderIdentity"] == "a" and first["leaseDurationSeconds"] == 15
        assert first["leaseTransitions"] == 0 and first["acquireTime"] == first["renewTime"]
        assert first["renewTime"].endswith("Z") and "." in first["renewTime"]  # MicroTime
        await asyncio.sleep(0.01)
        clock.now += 2
        assert await a.try_acquire_or_renew()
        second = await spec(client)
        # A renewal keeps the acquisition and the transition count; only renewTime moves.
        assert second["acquireTime"] == first["acquireTime"] and second["leaseTransitions"] == 0
        assert second["renewTime"] > first["renewTime"]

    run(tmp_path, scenario)


def test_a_held_lease_is_taken_only_after_a_full_unchanged_duration(tmp_path: Path) -> None:
    async def scenario(client: AsyncClient, candidate: Callable[[str, Clock], LeaderElector]) -> None:
        a_clock, b_clock = Clock(), Clock()
        a, b = candidate("a", a_clock), candidate("b", b_clock)
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
        assert b.holder == "a" and not b.is_leading()
        # b's own clock decides: 14 s after it first saw the record, the lease is still a's.
        b_clock.now += 14
        assert not await b.try_acquire_or_renew()
        # a renews: the record changed, so b's wait starts over.
        a_clock.now += 14
        assert await a.try_acquire_or_renew()
        b_clock.now += 14
        assert not await b.try_acquire_or_renew()
        # a falls silent; 15 s after b saw the last renewal, b takes over.
        b_clock.now += 15.5
        assert await b.try_acquire_or_renew()
        taken = await spec(client)
        assert taken["holderIdentity"] == "b" and taken["leaseTransitions"] == 1
        assert taken["acquireTime"] == taken["renewTime"]
        # a cannot renew any more: it sees b, and fences itself past the renew deadline.
        assert not await a.try_acquire_or_renew()
        assert a.holder == "b"
        a_clock.now += 10
        assert not a.is_leading()

    run(tmp_path, scenario)


def test_a_leader_past_its_renew_deadline_stops_leading_by_itself(tmp_path: Path) -> None:
    async def scenario(client: AsyncClient, candidate: Callable[[str, Clock], LeaderElector]) -> None:
        clock = Clock()
        a = candidate("a", clock)
        assert await a.try_acquire_or_renew()
        clock.now += 9.9
        assert a.is_leading()
        clock.now += 0.2  # frozen past the renew deadline: no write may follow
        assert not a.is_leading()
        await a.hold()  # returns at once: leadership is over
        assert not a.is_leading()

    run(tmp_path, scenario)


def test_release_lets_a_standby_take_over_at_once(tmp_path: Path) -> None:
    async def scenario(client: AsyncClient, candidate: Callable[[str, Clock], LeaderElector]) -> None:
        a, b = candidate("a", Clock()), candidate("b", Clock())
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
        await a.release()
        released = await spec(client)
        assert released.get("holderIdentity", "") == "" and released["leaseDurationSeconds"] == 1
        assert not a.is_leading()
        assert await b.try_acquire_or_renew()  # no wait: nobody holds it
        assert (await spec(client))["leaseTransitions"] == 1

    run(tmp_path, scenario)


def test_racing_candidates_never_both_win(tmp_path: Path) -> None:
    async def scenario(client: AsyncClient, candidate: Callable[[str, Clock], LeaderElector]) -> None:
        for round_ in range(5):
            clocks = [Clock() for _ in range(4)]
            electors = [candidate(f"c{round_}-{i}", c) for i, c in enumerate(clocks)]
            if round_:
                # Expire the previous holder in every candidate's eyes: each sees it once first.
                await asyncio.gather(*(e.try_acquire_or_renew() for e in electors))
                for c in clocks:
                    c.now += 16
            won = await asyncio.gather(*(e.try_acquire_or_renew() for e in electors))
            assert sum(won) == 1, won
            winner = electors[won.index(True)].config.identity
            assert (await spec(client))["holderIdentity"] == winner

    run(tmp_path, scenario)
