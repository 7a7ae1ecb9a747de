"""pods/proxy and services/proxy: where a request goes, and what is forwarded there and back."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.tunnels import proxying
from trainyard.cluster.server.apiserver.tunnels.proxying import Backend


def pod(name: str, *, ready: bool = True, labels: dict[str, str] | None = None, ports: Any = ()) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels or {"app": "web"}},
        "spec": {"containers": [{"name": "c", "ports": list(ports)}]},
        "status": {"podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": str(ready)}]},
    }


SERVICE = {
    "metadata": {"name": "web", "namespace": "ns"},
    "spec": {
        "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80, "targetPort": "web"}, {"name": "raw", "port": 81, "targetPort": 9001}],
    },
}


@pytest.mark.parametrize(
    ("segment", "expected"),
    [
        ("web", ("http", "web", "")),
        ("web:8080", ("http", "web", "8080")),
        ("https:web:443", ("https", "web", "443")),
        ("http:web:", ("http", "web", "")),
    ],
)
def test_names_say_scheme_name_and_port(segment: str, expected: tuple[str, str, str]) -> None:
    assert proxying.split_name(segment) == expected


def test_a_pod_is_reached_at_the_port_asked_or_its_first_container_port() -> None:
    assert proxying.pod_backend(pod("p", ports=[{"containerPort": 8000}]), "p") == Backend("http", "127.0.0.1", 8000)
    assert proxying.pod_backend(pod("p"), "https:p:8443") == Backend("https", "127.0.0.1", 8443)
    assert proxying.pod_backend(pod("p"), "p") == Backend("http", "127.0.0.1", None)
    unplaced = {**pod("p"), "status": {}}
    with pytest.raises(errors.ApiError, match="does not have an IP address"):
        proxying.pod_backend(unplaced, "p")


def test_a_service_goes_to_its_first_ready_pod_at_the_targeted_port() -> None:
    pods = [
        pod("a-not-ready", ready=False, ports=[{"name": "web", "containerPort": 7000}]),
        pod("b-other", labels={"app": "other"}, ports=[{"name": "web", "containerPort": 7001}]),
        pod("c-unnamed", ports=[{"containerPort": 7002}]),
        pod("d-web", ports=[{"name": "web", "containerPort": 7003}]),
    ]
    assert proxying.service_backend(SERVICE, pods, "web:http") == Backend("http", "127.0.0.1", 7003)
    assert proxying.service_backend(SERVICE, pods, "web:80") == Backend("http", "127.0.0.1", 7003)
    assert proxying.service_backend(SERVICE, pods, "https:web:raw") == Backend("https", "127.0.0.1", 9001)


@pytest.mark.parametrize(
    ("segment", "message"),
    [
        ("web:82", 'no service port 82 found for service "web"'),
        ("web", 'no endpoints available for service "web"'),  # its ports are named: "" names none
        ("web:http", 'no endpoints available for service "web:http"'),
    ],
)
def test_a_service_without_a_way_to_a_pod_is_unavailable(segment: str, message: str) -> None:
    with pytest.raises(errors.ApiError, match=message) as failed:
        proxying.service_backend(SERVICE, [pod("x", ready=False, ports=[{"name": "web", "containerPort": 1}])], segment)
    assert failed.value.code == 503


def test_the_path_after_proxy_is_forwarded_still_escaped() -> None:
    assert proxying.split_path("/api/v1/namespaces/ns/pods/p:80/proxy/a%2Fb/c") == (
        "/api/v1/namespaces/ns/pods/p:80/proxy",
        "/a%2Fb/c",
    )
    assert proxying.split_path("/api/v1/namespaces/ns/services/s/proxy")[1] == "/"


async def _backend(request: web.Request) -> web.StreamResponse:
    if request.path == "/moved":
        raise web.HTTPFound("/elsewhere/")
    body = await request.read()
    said = {
        "method": request.method,
        "path": request.raw_path,
        "headers": {k: v for k, v in request.headers.items() if k.lower() != "host"},
        "body": body.decode(),
    }
    return web.json_response(said, headers={"X-From": "pod"})


def _through_proxy(call: Any) -> Any:
    async def go() -> Any:
        pod_app = web.Application()
        pod_app.router.add_route("*", "/{tail:.*}", _backend)
        async with TestServer(pod_app) as pod_server:

            async def proxy(request: web.Request) -> web.StreamResponse:
                try:
                    return await proxying.serve(request, Backend("http", "127.0.0.1", int(request.query["to"])))
                except errors.ApiError as exc:
                    return web.json_response(exc.status(), status=exc.code)

            app = web.Application()
            app.router.add_route("*", "/api/v1/namespaces/ns/pods/p/proxy/{tail:.*}", proxy)
            async with TestServer(app) as server, aiohttp.ClientSession() as client:
                return await call(client, server, pod_server.port)

    return asyncio.run(go())


def test_method_path_query_body_and_headers_are_forwarded_with_the_forwarding_headers() -> None:
    async def call(client: aiohttp.ClientSession, server: TestServer, port: int) -> Any:
        url = f"{server.make_url('/api/v1/namespaces/ns/pods/p/proxy/metrics')}?to={port}&x=1"
        headers = {"Authorization": "Bearer secret", "X-Mine": "kept"}
        async with client.post(url, data=b"payload", headers=headers) as answer:
            return answer.status, answer.headers["X-From"], json.loads(await answer.read())

    status, origin, said = _through_proxy(call)
    assert (status, origin) == (200, "pod")
    assert said["method"] == "POST" and said["body"] == "payload"
    assert said["path"].startswith("/metrics?to=") and said["path"].endswith("&x=1")
    headers = said["headers"]
    assert "Authorization" not in headers and headers["X-Mine"] == "kept"
    assert headers["X-Forwarded-Uri"] == "/api/v1/namespaces/ns/pods/p/proxy/metrics"
    assert headers["X-Forwarded-Proto"] == "http"


def test_a_redirect_to_the_pod_is_rewritten_under_the_proxy_path() -> None:
    async def call(client: aiohttp.ClientSession, server: TestServer, port: int) -> Any:
        url = f"{server.make_url('/api/v1/namespaces/ns/pods/p/proxy/moved')}?to={port}"
        async with client.get(url, allow_redirects=False) as answer:
            return answer.status, answer.headers["Location"]

    assert _through_proxy(call) == (302, "/api/v1/namespaces/ns/pods/p/proxy/elsewhere/")


def test_a_port_nothing_listens_on_is_unavailable_in_upstreams_words() -> None:
    async def call(client: aiohttp.ClientSession, server: TestServer, port: int) -> Any:
        closed = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        shut = closed.sockets[0].getsockname()[1]
        closed.close()
        await closed.wait_closed()
        async with client.get(f"{server.make_url('/api/v1/namespaces/ns/pods/p/proxy/')}?to={shut}") as answer:
            return answer.status, json.loads(await answer.read())["message"], shut

    status, message, shut = _through_proxy(call)
    assert status == 503
    assert message == f"error trying to reach service: dial tcp 127.0.0.1:{shut}: connect: connection refused"
