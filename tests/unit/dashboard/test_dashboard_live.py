"""The dashboard's live streams on a real aiohttp server, read as EventSource reads them.

The source is a real ``Watched`` whose client never connects: its informers' caches are filled
through their write-through (``mutated``/``removed``) and its subscribers are told each change as
its informers would tell them. A list stream starts with a snapshot, a burst of changes reaches it
as the latest row per job, a page stream gets new points, and ends once its job is deleted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import BaseTestServer, TestServer
from lightkube import AsyncClient, KubeConfig

from trainyard.dashboard import pages, views
from trainyard.dashboard.history.store import HistoryStore
from trainyard.dashboard.live import Live
from trainyard.dashboard.watching import Change, Watched
from trainyard.embedded import kubeconfig

WAIT = 60.0
"""Seconds a test waits for what it expects before it fails (generous: a busy 2-core machine)."""


def job(name: str, epoch: int = 0, version: int = 1) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "Running", "status": "True"}]}
    if epoch:
        status["trainingProgress"] = {
            "currentEpoch": epoch,
            "totalEpochs": 10,
            "metrics": {"loss": 1.0 / epoch},
            "lastUpdateTime": f"2026-03-01T11:{epoch:02d}:00Z",
        }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "resourceVersion": str(version),
            "creationTimestamp": "2026-03-01T11:00:00Z",
        },
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}}},
        "status": status,
    }


class Source:
    """A ``Watched`` fed by hand, as its informers would feed it."""

    def __init__(self) -> None:
        self.watched = Watched(AsyncClient(KubeConfig.from_dict(kubeconfig("http://127.0.0.1:1"))))
        self.informer = self.watched.jobs["pytorchjobs"]

    def tell(self, type_: str, obj: dict[str, Any]) -> None:
        if type_ == "DELETED":
            self.informer.removed(obj)
        else:
            self.informer.mutated(obj)
        change = Change("job", type_, obj, obj["metadata"]["uid"])
        for subscriber in list(self.watched.subscribers):
            subscriber(change)


Check = Callable[[Source, Live, aiohttp.ClientSession, BaseTestServer], Awaitable[None]]


def serve(tmp_path: Path, check: Check, *jobs: dict[str, Any]) -> None:
    async def go() -> None:
        source = Source()
        for obj in jobs:
            source.tell("ADDED", obj)
        live = Live(source.watched, coalesce=0.05, heartbeat=0.2)
        store = HistoryStore(tmp_path / "history.db")

        def detail(name: str) -> Callable[[], Awaitable[Any]]:
            async def read() -> Any:
                found = source.watched.job("default", "pytorchjobs", name)
                if found is None:
                    return None
                uid = found["metadata"]["uid"]
                return pages.detail(found, source.watched, points=store.points(uid), checkpoints=store.checkpoints(uid))

            return read

        async def page(request: web.Request) -> web.StreamResponse:
            name = request.match_info["name"]
            return await live.page(request, f"uid-{name}", detail(name))

        app = web.Application()
        app.router.add_get("/jobs/stream", live.jobs)
        app.router.add_get("/jobs/{name}/stream", page)
        async with asyncio.timeout(WAIT):
            async with TestServer(app) as server, aiohttp.ClientSession() as client:
                await check(source, live, client, server)

    asyncio.run(go())


async def events(response: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, Any]]:
    """Server-sent events as an EventSource parses them (comments skipped), until the stream ends."""
    name, data = "message", list[str]()
    async for raw in response.content:
        line = raw.decode().rstrip("\n")
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line.partition(":")[2].strip()
        elif line.startswith("data:"):
            data.append(line.partition(":")[2].strip())


def test_a_list_stream_starts_with_a_snapshot_of_every_job(tmp_path: Path) -> None:
    async def check(source: Source, live: Live, client: aiohttp.ClientSession, server: BaseTestServer) -> None:
        async with client.get(server.make_url("/jobs/stream")) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "text/event-stream"
            stream = events(response)
            name, data = await anext(stream)
            assert name == "snapshot"
            assert sorted(r["name"] for r in data["items"]) == ["a", "b", "c"]
            assert {r["name"]: r["epoch"] for r in data["items"]} == {"a": 2, "b": None, "c": None}
            source.tell("ADDED", job("d"))
            assert await anext(stream) == ("change", {"type": "ADDED", "job": _row_named(source, "d")})

    serve(tmp_path, check, job("a", epoch=2), job("b"), job("c"))


def _row_named(source: Source, name: str) -> Any:
    found = source.watched.job("default", "pytorchjobs", name)
    assert found is not None
    return views.row(found)


def test_a_burst_of_changes_arrives_as_the_latest_row_per_job(tmp_path: Path) -> None:
    names = [f"j{i:03d}" for i in range(100)]

    async def check(source: Source, live: Live, client: aiohttp.ClientSession, server: BaseTestServer) -> None:
        async with client.get(server.make_url("/jobs/stream")) as response:
            stream = events(response)
            name, data = await anext(stream)
            assert name == "snapshot" and len(data["items"]) == 100
            # 500 changes with no pause between: the stream's writer cannot run until all are told.
            for epoch in range(1, 6):
                for n in names:
                    source.tell("MODIFIED", job(n, epoch=epoch, version=1 + epoch))
            seen: list[dict[str, Any]] = []
            while len({c["job"]["name"] for c in seen}) < len(names):
                name, data = await anext(stream)
                assert name == "change"
                seen.append(data)
            assert len(seen) == len(names), "one change per job, not one per write"
            assert {c["type"] for c in seen} == {"MODIFIED"}
            assert {c["job"]["epoch"] for c in seen} == {5}, "each job's latest row"

    serve(tmp_path, check, *(job(n) for n in names))


def test_a_deleted_job_reaches_the_list_as_deleted(tmp_path: Path) -> None:
    async def check(source: Source, live: Live, client: aiohttp.ClientSession, server: BaseTestServer) -> None:
        async with client.get(server.make_url("/jobs/stream")) as response:
            stream = events(response)
            assert (await anext(stream))[0] == "snapshot"
            source.tell("DELETED", job("a", version=2))
            name, data = await anext(stream)
            assert (name, data["type"], data["job"]["uid"]) == ("change", "DELETED", "uid-a")

    serve(tmp_path, check, job("a"))


def test_a_page_stream_gets_its_jobs_points_and_changes_only(tmp_path: Path) -> None:
    point = {"time": "2026-03-01T11:03:00Z", "step": None, "epoch": 3, "metrics": {"loss": 0.33}}

    async def check(source: Source, live: Live, client: aiohttp.ClientSession, server: BaseTestServer) -> None:
        async with client.get(server.make_url("/jobs/a/stream")) as response:
            stream = events(response)
            name, data = await anext(stream)
            assert name == "detail" and data["row"]["name"] == "a" and data["actions"]["delete"] is True
            source.tell("MODIFIED", job("other", epoch=4, version=2))  # another job's: not this page's
            live.point("uid-other", point)
            live.point("uid-a", point)
            assert await anext(stream) == ("point", point)
            source.tell("MODIFIED", job("a", epoch=3, version=2))
            name, data = await anext(stream)
            assert name == "detail" and data["row"]["epoch"] == 3

    serve(tmp_path, check, job("a", epoch=2), job("other"))


def test_a_deleted_jobs_page_stream_ends_with_deleted(tmp_path: Path) -> None:
    async def check(source: Source, live: Live, client: aiohttp.ClientSession, server: BaseTestServer) -> None:
        async with client.get(server.make_url("/jobs/a/stream")) as response:
            stream = events(response)
            assert (await anext(stream))[0] == "detail"
            source.tell("DELETED", job("a", version=2))
            rest = [item async for item in stream]  # the server ends the stream
            assert rest == [("deleted", {"uid": "uid-a"})]

    serve(tmp_path, check, job("a"))
