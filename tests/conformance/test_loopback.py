"""The in-process route of the plane's own clients (``cluster.apiserver.loopback``) against a real ApiPlane.

A lightkube client whose requests are served in-process must see exactly what it sees over HTTPS:
the same objects, the same errors as ``Status``, the same bearer-token check; its watches and any
request that streams still go over the network.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.resources.core_v1 import ConfigMap

from trainyard.client import Client, delete, to_dict, wrap_transports
from trainyard.cluster.apiserver.loopback import Loopback
from trainyard.cluster.paths import Layout
from trainyard.cluster.plane import ApiPlane
from trainyard.embedded import kubeconfig


class Counted(httpx2.AsyncBaseTransport):
    """The network transport, counting what reaches it."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner
        self.requests: list[str] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(f"{request.method} {request.url.path}?{request.url.query.decode()}")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


Scenario = Callable[[ApiPlane, AsyncClient, AsyncClient, Counted], Awaitable[None]]


def run(tmp_path: Path, scenario: Scenario, *, token: str | None = None) -> None:
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

        def route(transport: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
            counted.append(Counted(transport))
            return plane.loopback.transport(counted[-1])

        wrap_transports(local, route, watches=False)
        try:
            await scenario(plane, local, network, counted[0])
        finally:
            await local.close()
            await network.close()
            await plane.stop()

    asyncio.run(main())


def configmap(name: str, data: dict[str, str]) -> ConfigMap:
    return ConfigMap.from_dict({"metadata": {"name": name, "namespace": "default"}, "data": data})


def comparable(obj: Any) -> dict[str, Any]:
    return to_dict(obj)


def test_requests_are_served_in_process_and_answer_as_over_https(tmp_path: Path) -> None:
    async def scenario(plane: ApiPlane, local: AsyncClient, network: AsyncClient, counted: Counted) -> None:
        created = await local.create(configmap("a", {"k": "v"}))
        assert created.metadata.resourceVersion
        assert comparable(await local.get(ConfigMap, "a", namespace="default")) == comparable(
            await network.get(ConfigMap, "a", namespace="default")
        )
        patched = await local.patch(ConfigMap, "a", {"data": {"k": "w"}}, namespace="default")
        assert patched.data == {"k": "w"}
        names = [c.metadata.name async for c in local.list(ConfigMap, namespace="default")]
        assert "a" in names
        # DeleteOptions with a precondition: the body travels in-process too.
        assert not await delete(local, ConfigMap, "a", namespace="default", uid="not-its-uid")
        assert await delete(local, ConfigMap, "a", namespace="default", uid=created.metadata.uid)
        assert not await delete(local, ConfigMap, "a", namespace="default")
        assert counted.requests == []

    run(tmp_path, scenario)


def test_errors_come_back_as_the_same_status(tmp_path: Path) -> None:
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

    run(tmp_path, scenario)


def test_a_wrong_token_is_refused_in_process_too(tmp_path: Path) -> None:
    async def scenario(plane: ApiPlane, local: AsyncClient, network: AsyncClient, counted: Counted) -> None:
        for client in (local, network):
            with pytest.raises(ApiError) as refused:
                await client.get(ConfigMap, "x", namespace="default")
            assert refused.value.status.code == 401
        assert counted.requests == []

    run(tmp_path, scenario, token="not-the-token")


def test_watches_and_streams_go_over_the_network(tmp_path: Path) -> None:
    async def scenario(plane: ApiPlane, local: AsyncClient, network: AsyncClient, counted: Counted) -> None:
        await local.create(configmap("c", {}))
        # A watch started through the request pool (not Client.watches) must still reach a socket.
        http: Any = local._client._client  # type: ignore[attr-defined]
        async with http.stream("GET", "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1") as answer:
            lines = [line async for line in answer.aiter_lines() if line]
        assert answer.status_code == 200 and '"ADDED"' in lines[0]
        assert counted.requests == ["GET /api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1"]

        def request(url: str) -> httpx2.Request:
            return httpx2.Request("GET", url)

        loopback: Loopback = plane.loopback
        base = plane.url
        assert loopback.serves(request(f"{base}/api/v1/namespaces/default/pods?watch=false"))
        assert not loopback.serves(request(f"{base}/api/v1/namespaces/default/pods?watch=1"))
        assert not loopback.serves(request(f"{base}/api/v1/namespaces/default/pods/p/log?follow=true"))
        assert not loopback.serves(request(f"{base}/api/v1/namespaces/default/pods/p/log"))
        assert not loopback.serves(request(f"{base}/api/v1/namespaces/default/pods/p/exec?command=ls"))
        assert not loopback.serves(request(f"https://127.0.0.2:{plane.port}/api/v1/namespaces"))
        assert not loopback.serves(request(f"https://127.0.0.1:{plane.port + 1}/api/v1/namespaces"))

    run(tmp_path, scenario)


def test_each_request_gives_the_event_loop_a_turn(tmp_path: Path) -> None:
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

    run(tmp_path, scenario)
