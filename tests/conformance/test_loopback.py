"""The in-process route of the plane's own clients (``cluster.apiserver.loopback``) against a real ApiPlane.

A lightkube client whose requests and watches are served in-process must see exactly what it sees
over HTTPS: the same objects, the same events, the same errors as ``Status``, the same bearer-token
check; a log read whole too, while followed logs, exec and the other streams still go over the
network. The request tests run both ways in-process: through httpx and the loopback transport,
and without httpx (``Client.direct``, ``Loopback.call``), as the plane's own components send them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.resources.core_v1 import ConfigMap, Namespace, Pod
from lightkube.types import OnErrorAction, OnErrorResult

from trainyard.client.resources import lean_twin, plain_twin, to_dict
from trainyard.client.transport import Answer, Call, Client, delete, route_directly, wrap_transports
from trainyard.client.watches import WATCH_OBJECTS
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.apiserver.loopback import Loopback, Pipe
from trainyard.cluster.server.apiserver.server import COLLECTION_SLICE
from trainyard.cluster.server.plane import ApiPlane
from trainyard.embedded import kubeconfig


class Counted(httpx2.AsyncBaseTransport):
    """A network transport, counting what reaches it in ``requests`` (shared by all of a client's)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, requests: list[str]) -> None:
        self.inner = inner
        self.requests = requests

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(f"{request.method} {request.url.path}?{request.url.query.decode()}")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


Scenario = Callable[[ApiPlane, AsyncClient, AsyncClient, Counted], Awaitable[None]]


def run(tmp_path: Path, scenario: Scenario, *, token: str | None = None, direct: bool = False) -> None:
    async def main() -> None:
        plane = ApiPlane(Layout(tmp_path), port=0, secure=True)
        await plane.start()
        assert plane.credentials is not None
        config = kubeconfig(plane.url, plane.credentials)
        if token is not None:
            config["users"][0]["user"]["token"] = token  # type: ignore[index]
        kube = KubeConfig.from_dict(yaml.safe_load(yaml.safe_dump(config)))
        network = AsyncClient(kube)
        local = Client(kube, field_manager="test")
        counted: list[Counted] = []
        reached: list[str] = []

        def route(transport: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
            counted.append(Counted(transport, reached))
            return plane.loopback.transport(counted[-1])

        wrap_transports(local, route, watches=True)
        calls: list[str] = []
        if direct:

            async def call(request: Call) -> Answer:
                calls.append(f"{request.method} {request.path}")
                return await plane.loopback.call(request)

            route_directly(local, call)
        try:
            await scenario(plane, local, network, counted[0])
            assert bool(calls) == direct
        finally:
            await local.close()
            await network.close()
            await plane.stop()

    asyncio.run(main())


def configmap(name: str, data: dict[str, str]) -> ConfigMap:
    return ConfigMap.from_dict({"metadata": {"name": name, "namespace": "default"}, "data": data})


def comparable(obj: Any) -> dict[str, Any]:
    return to_dict(obj)


@pytest.mark.parametrize("direct", [False, True], ids=["httpx", "direct"])
def test_requests_are_served_in_process_and_answer_as_over_https(tmp_path: Path, direct: bool) -> None:
    async def scenario(plane: ApiPlane, local: AsyncClient, network: AsyncClient, counted: Counted) -> None:
        created = await local.create(configmap("a", {"k": "v"}))
        assert created.metadata.resourceVersion
        assert comparable(await local.get(ConfigMap, "a", namespace="default")) == comparable(
            await network.get(ConfigMap, "a", namespace="default")
        )
        patched = await local.patch(ConfigMap, "a", {"data": {"k": "w"}}, namespace="default")
        assert patched.data == {"k": "w"}
        # server-side apply: its own content type, and a boolean among the query parameters
        applied = await local.apply(configmap("a", {"k": "x"}), field_manager="other", force=True)
        assert applied.data == {"k": "x"}
        owners = [entry.manager for entry in applied.metadata.managedFields or []]
        assert "other" in owners
        names = [c.metadata.name async for c in local.list(ConfigMap, namespace="default")]
        assert "a" in names
        # DeleteOptions with a precondition: the body travels in-process too.
        assert not await delete(local, ConfigMap, "a", namespace="default", uid="not-its-uid")
        assert await delete(local, ConfigMap, "a", namespace="default", uid=created.metadata.uid)
        assert not await delete(local, ConfigMap, "a", namespace="default")
        assert counted.requests == []

    run(tmp_path, scenario, direct=direct)


@pytest.mark.parametrize("direct", [False, True], ids=["httpx", "direct"])
def test_errors_come_back_as_the_same_status(tmp_path: Path, direct: bool) -> None:
    async def scenario(plane: ApiPlane, local: AsyncClient, network: AsyncClient, counted: Counted) -> None:
        await local.create(configmap("b", {}))
        answers = []
        for client in (local, network):
            with pytest.raises(ApiError) as missing:
                await client.get(ConfigMap, "nope", namespace="default")
            with pytest.raises(ApiError) as exists:
                await client.create(configmap("b", {}))
            with pytest.raises(ApiError) as invalid:
                await client.create(configmap("Not_A_Name", {}))
            answers.append([(e.value.status.code, e.value.status.reason) for e in (missing, exists, invalid)])
        assert answers[0] == answers[1] == [(404, "NotFound"), (409, "AlreadyExists"), (422, "Invalid")]
        assert counted.requests == []

    run(tmp_path, scenario, direct=direct)


@pytest.mark.parametrize("direct", [False, True], ids=["httpx", "direct"])
def test_a_wrong_token_is_refused_in_process_too(tmp_path: Path, direct: bool) -> None:
    async def scenario(plane: ApiPlane, local: AsyncClient, network: AsyncClient, counted: Counted) -> None:
        for client in (local, network):
            with pytest.raises(ApiError) as refused:
                await client.get(ConfigMap, "x", namespace="default")
            assert refused.value.status.code == 401
        assert counted.requests == []

    run(tmp_path, scenario, token="not-the-token", direct=direct)


async def lines(client: AsyncClient, path: str) -> tuple[int, list[str]]:
    """The status and the lines of a GET that streams, read to its end."""
    http: Any = client._client._client  # type: ignore[attr-defined]
    async with http.stream("GET", path) as answer:
        return answer.status_code, [line async for line in answer.aiter_lines() if line]


async def polled(probe: Callable[[], bool], timeout: float = 30.0) -> None:
    """Until ``probe()`` holds, giving the loop a turn between looks."""
    deadline = asyncio.get_running_loop().time() + timeout
    for _ in iter(probe, True):
        assert asyncio.get_running_loop().time() < deadline, "not reached in time"
        await asyncio.sleep(0.01)


def events(answer: tuple[int, list[str]]) -> list[tuple[str, str, str]]:
    """(type, name, resourceVersion) of each watch line; a Status (a refusal, or an ERROR's) gives its reason."""
    seen = []
    for line in answer[1]:
        event = json.loads(line)
        if event.get("kind") == "Status":  # refused before the stream started
            event = {"type": f"{answer[0]} Status", "object": event}
        obj = event["object"]
        status = "metadata" not in obj or obj.get("kind") == "Status"
        name = obj.get("reason", "") if status else obj["metadata"]["name"]
        seen.append((event["type"], name, obj.get("metadata", {}).get("resourceVersion", "")))
    return seen


def test_watches_are_served_in_process_and_stream_as_over_https(tmp_path: Path) -> None:
    async def scenario(plane: ApiPlane, local: AsyncClient, network: AsyncClient, counted: Counted) -> None:
        await local.create(configmap("c", {}))
        start = (await local.get(ConfigMap, "c", namespace="default")).metadata.resourceVersion

        async def take(client: AsyncClient) -> list[tuple[str, str, str]]:
            seen = []
            async for kind, obj in client.watch(ConfigMap, namespace="default", resource_version=start):
                seen.append((kind, obj.metadata.name, obj.metadata.resourceVersion))
                if len(seen) == 3:
                    return seen
            raise AssertionError("the watch ended")

        # Live: the changes reach an open in-process watch from the hub; the network one reads them from the log.
        watching = asyncio.create_task(take(local))
        await polled(lambda: plane.hub.watchers == 1)
        await local.patch(ConfigMap, "c", {"data": {"k": "1"}}, namespace="default")
        await local.patch(ConfigMap, "c", {"data": {"k": "2"}}, namespace="default")
        await local.delete(ConfigMap, "c", namespace="default")
        seen = await asyncio.wait_for(watching, 30)
        assert [kind for kind, _, _ in seen] == ["MODIFIED", "MODIFIED", "DELETED"]
        assert seen == await asyncio.wait_for(take(network), 30)
        # From a list (resourceVersion 0) to the watch's end (timeoutSeconds), and refusals, line for line.
        path = "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1"
        for query in ("", "&labelSelector=a%3Db", "&resourceVersion=99999999", "&labelSelector=%3D%3D"):
            assert events(await lines(local, path + query)) == events(await lines(network, path + query)), query
        status, _ = await lines(local, path + "&labelSelector=%3D%3D")
        assert status == 400
        assert counted.requests == [], "nothing of a watch asked in-process reaches the network"
        # The server's side ends with the reader: its subscription is gone once the client closed.
        await polled(lambda: plane.hub.watchers == 0)

    run(tmp_path, scenario)


class Extensions(httpx2.AsyncBaseTransport):
    """Records which extensions each watch's response came with (``seen``) and each watch's
    ``resourceVersion`` and object stream (``watches``), passing everything on."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, seen: list[list[str]]) -> None:
        self.inner = inner
        self.seen = seen
        self.watches: list[tuple[str | None, Any]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if b"watch=" in request.url.query:
            self.seen.append(sorted(response.extensions))
            self.watches.append((request.url.params.get("resourceVersion"), response.extensions.get(WATCH_OBJECTS)))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_plain_watches_in_process_get_shared_objects_and_as_over_https(tmp_path: Path) -> None:
    """A watch of plain dicts asks the plane for its events as objects (``WATCH_OBJECTS``): the same
    events and objects as its lines over HTTPS give, a selector's transitions included (a label
    change out of it reads as DELETED, back into it as ADDED), a resumed watch's backlog (lines)
    and its live events (objects) in order; readers of one change share its one decoding. A lean twin's watch
    (an informer's) gets the same objects without ``managedFields``."""
    plain = plain_twin(ConfigMap)

    def without_managed_fields(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
        lean = [{**o, "metadata": {f: v for f, v in o["metadata"].items() if f != "managedFields"}} for _, o in events]
        return [(k, o) for (k, _), o in zip(events, lean, strict=True)]

    async def main() -> None:
        plane = ApiPlane(Layout(tmp_path), port=0, secure=True)
        await plane.start()
        assert plane.credentials is not None
        kube = KubeConfig.from_dict(yaml.safe_load(yaml.safe_dump(kubeconfig(plane.url, plane.credentials))))
        network, local = AsyncClient(kube), Client(kube, field_manager="test")
        responses: list[list[str]] = []
        wrap_transports(local, lambda t: Extensions(plane.loopback.transport(t), responses), watches=True)
        try:
            await local.create(configmap("c", {"k": "0"}))
            start = (await local.get(ConfigMap, "c", namespace="default")).metadata.resourceVersion
            await local.patch(ConfigMap, "c", {"data": {"k": "1"}}, namespace="default")  # the backlog

            async def take(
                client: AsyncClient, count: int, res: Any = plain, **selected: Any
            ) -> list[tuple[str, dict[str, Any]]]:
                seen = []
                watch = client.watch(res, namespace="default", resource_version=start, **selected)
                async for kind, obj in watch:
                    seen.append((kind, to_dict(obj)))
                    if len(seen) == count:
                        return seen
                raise AssertionError("the watch ended")

            everything = asyncio.create_task(take(local, 7))
            labelled = asyncio.create_task(take(local, 4, labels={"a": "b"}))
            lean = asyncio.create_task(take(local, 7, lean_twin(ConfigMap)))
            await polled(lambda: plane.hub.watchers == 3)
            for patch in ({"k": "2"}, {"k": "3"}):
                await local.patch(ConfigMap, "c", {"data": patch}, namespace="default")
            await local.patch(ConfigMap, "c", {"metadata": {"labels": {"a": "b"}}}, namespace="default")
            await local.patch(ConfigMap, "c", {"metadata": {"labels": {"a": "x"}}}, namespace="default")
            await local.patch(ConfigMap, "c", {"metadata": {"labels": {"a": "b"}}}, namespace="default")
            await local.delete(ConfigMap, "c", namespace="default")
            got, got_labelled = await asyncio.wait_for(everything, 30), await asyncio.wait_for(labelled, 30)
            assert responses == [[WATCH_OBJECTS]] * 3, "every watch took the object route"
            assert got == await asyncio.wait_for(take(network, 7), 30)
            assert all(o["metadata"]["managedFields"] for _, o in got[:-1])
            assert await asyncio.wait_for(lean, 30) == without_managed_fields(got)
            assert got_labelled == await asyncio.wait_for(take(network, 4, labels={"a": "b"}), 30)
            assert [k for k, _ in got] == ["MODIFIED"] * 6 + ["DELETED"]
            assert [(k, o["metadata"]["labels"]["a"]) for k, o in got_labelled] == [
                ("ADDED", "b"),
                ("DELETED", "x"),
                ("ADDED", "b"),
                ("DELETED", "b"),
            ]
            assert got[0][1]["data"] == {"k": "1"} and got[0][1]["kind"] == "ConfigMap"
            # The same change, as two readers got it: decoded once and shared (readers never change
            # what they are handed), each with its own top-level dict.
            mine, theirs = got[3][1], got_labelled[0][1]
            assert mine == theirs and mine is not theirs and mine["metadata"] is theirs["metadata"]
        finally:
            await local.close()
            await network.close()
            await plane.stop()

    asyncio.run(main())


def test_a_watch_of_objects_cut_off_resumes_from_the_last_object_it_read(tmp_path: Path) -> None:
    """The object route keeps the version to resume from as the line route does: a reader cut off
    (as one that fell behind is) asks again from the last event it read, and misses nothing."""

    async def main() -> None:
        plane = ApiPlane(Layout(tmp_path), port=0, secure=True)
        await plane.start()
        assert plane.credentials is not None
        kube = KubeConfig.from_dict(yaml.safe_load(yaml.safe_dump(kubeconfig(plane.url, plane.credentials))))
        local = Client(kube, field_manager="test")
        routes: list[Extensions] = []

        def route(transport: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
            routes.append(Extensions(plane.loopback.transport(transport), []))
            return routes[-1]

        def retry(exc: Exception, count: int) -> OnErrorResult:
            return OnErrorResult(OnErrorAction.RETRY)

        wrap_transports(local, route, watches=True)
        read: asyncio.Queue[str] = asyncio.Queue()

        async def consume(start: str) -> None:
            watch = local.watch(lean_twin(ConfigMap), namespace="default", resource_version=start, on_error=retry)
            async for _, obj in watch:
                await read.put(obj["data"]["k"])

        async def patched(k: str) -> str:
            answer = await local.patch(ConfigMap, "c", {"data": {"k": k}}, namespace="default")
            return str(answer.metadata.resourceVersion)

        try:
            created = await local.create(configmap("c", {"k": "0"}))
            consumer = asyncio.create_task(consume(str(created.metadata.resourceVersion)))
            await polled(lambda: plane.hub.watchers == 1)
            first = await patched("1")
            assert await asyncio.wait_for(read.get(), 30) == "1"
            watches = [w for r in routes for w in r.watches]
            assert watches[0][1] is not None, "the object route"
            watches[0][1].abort()  # as the hub cuts off a reader that fell behind
            for k in ("2", "3"):
                await patched(k)
            assert [await asyncio.wait_for(read.get(), 30) for _ in range(2)] == ["2", "3"]
            assert read.empty()
            consumer.cancel()
            again = [w for r in routes for w in r.watches][1]
            assert again[0] == first, "resumed from the last event read"
        finally:
            await local.close()
            await plane.stop()

    asyncio.run(main())


def test_an_open_watch_ends_with_the_plane_and_a_slow_reader_is_cut_off(tmp_path: Path) -> None:
    async def scenario(plane: ApiPlane, local: AsyncClient, network: AsyncClient, counted: Counted) -> None:
        http: Any = local._client._client  # type: ignore[attr-defined]
        async with http.stream("GET", "/api/v1/namespaces/default/configmaps?watch=true") as answer:
            assert plane.hub.watchers == 1
            await plane.loopback.close()  # as ApiPlane.stop does
            assert [line async for line in answer.aiter_lines()] == []
        assert plane.hub.watchers == 0
        # The hub aborts a watcher that has not taken SLOW_WATCHER_BYTES; its reader's next read fails.
        pipe = Pipe()
        pipe.write(b'{"type":"ADDED"}\n')
        assert pipe.get_write_buffer_size() == 17 and not pipe.is_closing()
        pipe.abort()
        with pytest.raises(httpx2.ReadError):
            _ = [chunk async for chunk in pipe]
        objects = Pipe(objects=True)  # a reader of objects is cut off the same way
        objects.put(("ADDED", {"metadata": {}}), 17)
        assert objects.get_write_buffer_size() == 17
        objects.abort()
        with pytest.raises(httpx2.ReadError):
            _ = [batch async for batch in objects.items()]

    run(tmp_path, scenario)


def test_followed_logs_and_other_streams_go_over_the_network(tmp_path: Path) -> None:
    async def scenario(plane: ApiPlane, local: AsyncClient, network: AsyncClient, counted: Counted) -> None:
        def request(url: str) -> httpx2.Request:
            return httpx2.Request("GET", url)

        loopback: Loopback = plane.loopback
        base = plane.url
        assert loopback.serves(request(f"{base}/api/v1/namespaces/default/pods?watch=false"))
        assert loopback.serves(request(f"{base}/api/v1/namespaces/default/pods?watch=1"))
        assert not loopback.serves(request(f"{base}/api/v1/namespaces/default/pods/p/log?follow=true"))
        assert loopback.serves(request(f"{base}/api/v1/namespaces/default/pods/p/log"))  # read whole: one answer
        assert not loopback.serves(request(f"{base}/api/v1/namespaces/default/pods/p/exec?command=ls"))
        assert not loopback.serves(request(f"https://127.0.0.2:{plane.port}/api/v1/namespaces"))
        assert not loopback.serves(request(f"https://127.0.0.1:{plane.port + 1}/api/v1/namespaces"))

    run(tmp_path, scenario)


def test_a_log_read_whole_is_served_in_process_as_over_https(tmp_path: Path) -> None:
    async def scenario(plane: ApiPlane, local: AsyncClient, network: AsyncClient, counted: Counted) -> None:
        body = {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
        pod = await network.create(Pod.from_dict(body))
        assert pod.metadata is not None and pod.metadata.uid is not None
        path = plane.layout.container_log("default", "p", pod.metadata.uid, "c")
        path.parent.mkdir(parents=True, exist_ok=True)
        stamp = "2026-03-01T12:00:00.000000000Z"
        path.write_bytes(f"{stamp} stdout F first\n{stamp} stdout P sec\n{stamp} stdout F ond\n".encode())
        here = [line async for line in local.log("p", namespace="default")]
        there = [line async for line in network.log("p", namespace="default")]
        assert here == there == ["first\n", "second\n"]
        assert not [r for r in counted.requests if "/log" in r], counted.requests
        with pytest.raises(ApiError) as refused:  # the same Status in-process
            _ = [line async for line in local.log("p", namespace="default", container="nope")]
        assert refused.value.status.code == 400

    run(tmp_path, scenario)


@pytest.mark.parametrize("direct", [False, True], ids=["httpx", "direct"])
def test_each_request_gives_the_event_loop_a_turn(tmp_path: Path, direct: bool) -> None:
    # Over a socket every round trip lets other tasks run (kubectl's requests, watches); in-process it must too.
    async def scenario(plane: ApiPlane, local: AsyncClient, network: AsyncClient, counted: Counted) -> None:
        turns = 0

        async def other() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        await asyncio.sleep(0)
        before = turns
        for i in range(20):
            await local.create(configmap(f"t{i}", {}))
        task.cancel()
        assert turns - before >= 20

    run(tmp_path, scenario, direct=direct)


def test_a_deletecollection_of_many_lets_other_requests_through_between_slices(tmp_path: Path) -> None:
    # One request deleting thousands of objects must not hold every other request until it is done.
    async def scenario(plane: ApiPlane, local: AsyncClient, network: AsyncClient, counted: Counted) -> None:
        count = COLLECTION_SLICE * 4
        for i in range(count):
            await local.create(configmap(f"bulk-{i:03d}", {}))
        bulk = asyncio.create_task(local.deletecollection(ConfigMap, namespace="default"))
        await asyncio.sleep(0)
        answered = await local.get(Namespace, "default")
        left = plane.objects.store.list("core/configmaps", "default")[0]
        assert answered.metadata.name == "default" and not bulk.done()
        assert 0 < len(left) < count  # served between two slices of the collection's deletions
        await bulk
        assert plane.objects.store.list("core/configmaps", "default")[0] == []

    run(tmp_path, scenario)
