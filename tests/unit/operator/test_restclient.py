"""The operator's API client: client-go's token bucket, its flags, and its request metrics on a real lightkube client.

The bucket runs on a fake clock whose ``sleep`` advances it; the client tests run lightkube
against a small aiohttp server on loopback that answers a list, a watch stream and an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import httpx2
import pytest
from aiohttp import web
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.resources.core_v1 import Pod
from prometheus_client.parser import text_string_to_metric_families

from conftest import free_port
from trainyard.client.transport import Answer, Call
from trainyard.embedded import kubeconfig
from trainyard.operator.flags import parse
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.restclient import (
    DEFAULT_RATE_LIMIT,
    UNLIMITED,
    RateLimit,
    TokenBucket,
    api_client,
    instrument,
    rate_limit_from,
)


class FakeTime:
    """A clock for the bucket: ``sleep`` returns at once, having moved the clock on."""

    def __init__(self) -> None:
        self.now = 100.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def bucket(qps: float, burst: int) -> tuple[TokenBucket, FakeTime]:
    time = FakeTime()
    return TokenBucket(qps, burst, clock=time.clock, sleep=time.sleep), time


def test_burst_at_once_then_one_token_per_1_over_qps() -> None:
    limiter, time = bucket(qps=2, burst=3)
    assert [limiter.reserve() for _ in range(5)] == [0, 0, 0, 0.5, 1.0]
    time.now += 1.0  # two tokens refilled: the debt of two is paid, the next waits its own half second
    assert limiter.reserve() == 0.5


def test_sequential_waits_run_at_the_steady_rate() -> None:
    limiter, time = bucket(qps=4, burst=2)

    async def ten() -> list[float]:
        return [await limiter.wait() for _ in range(10)]

    start = time.now
    waits = asyncio.run(ten())
    assert waits[:2] == [0, 0] and waits[2:] == [0.25] * 8
    assert time.now - start == pytest.approx(8 / 4)


def test_an_idle_bucket_saves_up_only_burst_tokens() -> None:
    limiter, time = bucket(qps=1, burst=2)
    assert [limiter.reserve() for _ in range(2)] == [0, 0]
    time.now += 3600
    assert [limiter.reserve() for _ in range(3)] == [0, 0, 1.0]


def test_a_bucket_needs_a_rate_and_a_token() -> None:
    for qps, burst in ((0, 5), (-1, 5), (5, 0)):
        with pytest.raises(ValueError, match="qps > 0 and burst >= 1"):
            TokenBucket(qps, burst)


def test_flags_default_to_upstreams_and_parse() -> None:
    options = parse([])
    assert rate_limit_from(options.kube_api_qps, options.kube_api_burst) == DEFAULT_RATE_LIMIT == RateLimit(20, 30)
    options = parse(["--kube-api-qps", "1", "--kube-api-burst", "1"])
    assert rate_limit_from(options.kube_api_qps, options.kube_api_burst) == RateLimit(1, 1)
    options = parse(["--kube-api-qps", "2.5", "--kube-api-burst", "4"])
    assert rate_limit_from(options.kube_api_qps, options.kube_api_burst) == RateLimit(2.5, 4)


@pytest.mark.parametrize("qps", [0, -1])
def test_qps_zero_or_less_turns_the_limit_off(qps: float) -> None:
    limit = rate_limit_from(qps, 0)
    assert limit == UNLIMITED and not limit.limited


def test_a_positive_qps_needs_a_burst_and_a_number() -> None:
    with pytest.raises(ValueError, match="--kube-api-burst must be at least 1"):
        rate_limit_from(5, 0)
    with pytest.raises(ValueError, match="--kube-api-qps must be a number"):
        rate_limit_from(float("inf"), 5)


# -- a real lightkube client against a loopback server ------------------------------------------

PODS = "/api/v1/namespaces/default/pods"
EVENTS = 3


def pod(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}}


async def pods(request: web.Request) -> web.StreamResponse:
    if request.query.get("watch") != "true":
        body = {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": [pod("a")]}
        return web.json_response(body)
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    for i in range(EVENTS):
        await response.write(json.dumps({"type": "ADDED", "object": pod(f"p{i}")}).encode() + b"\n")
    return response  # the watch ends: the test stops reading after EVENTS events


async def broken(_: web.Request) -> web.Response:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError", "code": 500}
    # lightkube decodes a Status only under exactly this Content-Type, as kube-apiserver sends it
    return web.Response(body=json.dumps(status).encode(), status=500, headers={"Content-Type": "application/json"})


@contextlib.asynccontextmanager
async def loopback() -> AsyncIterator[tuple[str, str]]:
    """A loopback stand-in for the API server, in the running loop: its URL and host label."""
    app = web.Application()
    app.router.add_get(PODS, pods)
    app.router.add_get(f"{PODS}/boom", broken)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}", f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def config(server: str) -> KubeConfig:
    return KubeConfig.from_dict(kubeconfig(server))


def samples(metrics: OperatorMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            found[s.name, frozenset(s.labels.items())] = s.value
    return found


def value(metrics: OperatorMetrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, frozenset(labels.items())))


def test_a_watch_takes_one_token_and_every_response_is_counted() -> None:
    metrics = OperatorMetrics()

    async def scenario() -> str:
        async with loopback() as (server, host):
            # Two tokens and practically no refill: a third request would wait for days.
            client = api_client(config(server), metrics, RateLimit(qps=1e-6, burst=2), field_manager="t")
            try:
                seen = 0
                async for _event, _pod in client.watch(Pod, namespace="default"):
                    seen += 1
                    if seen == EVENTS:
                        break
                with pytest.raises(ApiError):
                    await client.get(Pod, "boom", namespace="default")
            finally:
                await client.close()
        return host

    host = asyncio.run(asyncio.wait_for(scenario(), timeout=10))
    assert value(metrics, "rest_client_requests_total", code="200", host=host, method="GET") == 1
    assert value(metrics, "rest_client_requests_total", code="500", host=host, method="GET") == 1
    assert value(metrics, "rest_client_rate_limiter_duration_seconds_count", verb="GET", host=host) == 2
    assert value(metrics, "rest_client_request_duration_seconds_count", verb="GET", host=host) == 2


def test_an_unlimited_client_never_waits_and_counts_transport_errors() -> None:
    metrics = OperatorMetrics()
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    async def scenario() -> None:
        async with loopback() as (server, _):
            client = api_client(config(server), metrics, UNLIMITED, field_manager="t")
            gone = api_client(config(closed), metrics, UNLIMITED, field_manager="t")
            try:
                for _ in range(50):  # far beyond any burst
                    assert [p.metadata.name async for p in client.list(Pod, namespace="default")] == ["a"]
                with pytest.raises(httpx2.ConnectError):
                    await gone.get(Pod, "x", namespace="default")
            finally:
                await client.close()
                await gone.close()

    asyncio.run(asyncio.wait_for(scenario(), timeout=30))
    found = samples(metrics)
    counts = {dict(labels)["code"]: v for (name, labels), v in found.items() if name == "rest_client_requests_total"}
    assert counts == {"200": 50, "<error>": 1}
    assert not any(name.startswith("rest_client_rate_limiter") for name, _ in found)


def test_a_client_is_metered_once() -> None:
    client = AsyncClient(config("http://127.0.0.1:1"))
    instrument(client, OperatorMetrics(), UNLIMITED)
    with pytest.raises(ValueError, match="metered already"):
        instrument(client, OperatorMetrics(), UNLIMITED)
    asyncio.run(client.close())


def test_requests_sent_in_process_wait_for_tokens_and_are_counted_as_over_http() -> None:
    """A client whose requests skip httpx (the embedded plane's, ``Client.direct``) is limited and metered
    the same: one token and one count per request. The in-process server here is scripted (the real
    one, ``Loopback.call``, is tested in tests/conformance/test_loopback.py); nothing listens at the
    client's URL, so a request that went over HTTP would fail."""
    metrics = OperatorMetrics()
    server, host = "http://127.0.0.1:1", "127.0.0.1:1"
    sent: list[Call] = []
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError", "code": 500}

    async def direct(call: Call) -> Answer:
        sent.append(call)
        if call.path.endswith("/boom"):
            return Answer(500, [("Content-Type", "application/json")], json.dumps(status).encode())
        return Answer(200, [("Content-Type", "application/json")], json.dumps(pod("a")).encode())

    async def scenario() -> None:
        limit = RateLimit(qps=1e-6, burst=2)  # two tokens; a third request would wait for days
        client = api_client(config(server), metrics, limit, field_manager="t", direct=direct)
        try:
            assert (await client.get(Pod, "a", namespace="default")).metadata.name == "a"
            with pytest.raises(ApiError) as failed:
                await client.get(Pod, "boom", namespace="default")
            assert failed.value.status.code == 500
        finally:
            await client.close()

    asyncio.run(asyncio.wait_for(scenario(), timeout=10))
    assert [(c.method, c.path, c.host) for c in sent] == [("GET", f"{PODS}/a", host), ("GET", f"{PODS}/boom", host)]
    assert value(metrics, "rest_client_requests_total", code="200", host=host, method="GET") == 1
    assert value(metrics, "rest_client_requests_total", code="500", host=host, method="GET") == 1
    assert value(metrics, "rest_client_rate_limiter_duration_seconds_count", verb="GET", host=host) == 2
    assert value(metrics, "rest_client_request_duration_seconds_count", verb="GET", host=host) == 2
