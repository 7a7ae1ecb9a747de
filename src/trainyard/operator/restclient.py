"""The operator's API client: client-go's client-side rate limit and request metrics, on lightkube's AsyncClient.

What upstream's operator gets from client-go (``--kube-api-qps``/``--kube-api-burst``, which its
``main.go`` turns into ``flowcontrol.NewTokenBucketRateLimiter``):

* A token bucket per client: ``qps`` tokens a second, at most ``burst`` saved up, full at start.
  Every HTTP request waits for a token before it is sent; a watch is one request, so it takes one
  token to start and none per event. ``qps <= 0`` means no limiter at all (client-go's ``QPS < 0``).
* ``rest_client_requests_total{code,host,method}`` for every response, ``code="<error>"`` when no
  response came (refused, reset, timed out); ``rest_client_request_duration_seconds{verb,host}``
  until the response's headers; ``rest_client_rate_limiter_duration_seconds{verb,host}``, the time
  each request waited for its token (only while a limiter is on, as client-go).

Both sit in an httpx transport that wraps the one lightkube's client built, so they see each HTTP
round trip exactly once (an auth retry or a redirect is a request of its own, as in client-go).
The built transports are wrapped in place (``trainyard.client.transport.wrap_transports``, which says why and
what private attributes that reaches). In the embedded plane the client's requests skip httpx
(``trainyard.client.transport.Client.direct``): ``MeteredDirect`` does the same there, so each request is
counted once whichever way it went.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import httpx2
from lightkube import AsyncClient, KubeConfig

from trainyard.client.transport import Answer, Call, Client, Direct, Wrap, route_directly, wrap_direct, wrap_transports
from trainyard.operator.metrics import OperatorMetrics

R = TypeVar("R")

ERROR_CODE = "<error>"
"""client-go's ``code`` for a request that got no response."""


@dataclass(frozen=True)
class RateLimit:
    """``--kube-api-qps`` / ``--kube-api-burst``; ``qps <= 0``: not limited."""

    qps: float
    burst: int

    @property
    def limited(self) -> bool:
        return self.qps > 0


# Upstream's defaults (kubeflow/trainer release-1.9, cmd/training-operator.v1/main.go).
DEFAULT_RATE_LIMIT = RateLimit(qps=20, burst=30)
UNLIMITED = RateLimit(qps=0, burst=0)


class TokenBucket:
    """client-go's token bucket (golang.org/x/time/rate's reservations): waiters are served in order.

    Each ``wait`` takes a token at once, leaving the bucket in debt when it is empty, and sleeps
    until the refill has paid its share of that debt; so the n-th request beyond the burst is sent
    n/qps seconds after the bucket ran dry, however many wait together. ``clock`` and ``sleep`` are
    injectable so a test can run the bucket without real time. A wait that is cancelled keeps its
    token (cancellations come from shutdown or a lost lease; the debt is paid back within burst/qps).
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs qps > 0 and burst >= 1 (got qps {qps}, burst {burst})")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()

    def reserve(self) -> float:
        """Take a token now; the seconds until it may be used (0: at once)."""
        now = self._clock()
        # A clock that went backwards (it should not: monotonic) refills nothing.
        elapsed = max(now - self._last, 0.0)
        self._last = max(now, self._last)
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps) - 1.0
        return -self._tokens / self.qps if self._tokens < 0 else 0.0

    async def wait(self) -> float:
        """Wait for a token; the seconds this waited for it."""
        delay = self.reserve()
        if delay > 0:
            await self._sleep(delay)
        return delay


class Meter:
    """A token before each request (when limited), client-go's metrics after it: for either way a request goes."""

    def __init__(
        self, metrics: OperatorMetrics, limiter: TokenBucket | None, *, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.metrics = metrics
        self.limiter = limiter
        self._clock = clock

    async def send(self, verb: str, host: str, send: Callable[[], Awaitable[R]], status: Callable[[R], int]) -> R:
        if self.limiter is not None:
            waiting = self._clock()
            await self.limiter.wait()
            self.metrics.api_throttled(verb, host, self._clock() - waiting)
        start = self._clock()
        try:
            answer = await send()
        except Exception:
            self.metrics.api_request(verb, host, ERROR_CODE, self._clock() - start)
            raise
        self.metrics.api_request(verb, host, str(status(answer)), self._clock() - start)
        return answer


class MeteredTransport(httpx2.AsyncBaseTransport):
    """Wraps an httpx transport in a ``Meter``."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self.meter.send(
            request.method,
            request.url.netloc.decode("ascii"),
            lambda: self.inner.handle_async_request(request),
            lambda response: response.status_code,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class MeteredDirect:
    """Wraps the requests a ``Client`` sends in-process (``trainyard.client.transport.Client.direct``) in the
    ``Meter`` of its transports: the same tokens, the same counts, once per request whichever way it went."""

    def __init__(self, inner: Direct, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter

    async def __call__(self, call: Call) -> Answer:
        return await self.meter.send(call.method, call.host, lambda: self.inner(call), lambda answer: answer.status)


def instrument(client: AsyncClient, metrics: OperatorMetrics, limit: RateLimit) -> AsyncClient:
    """Meter (and, when ``limit.limited``, rate-limit) every request ``client`` sends; one bucket for all,
    watches included where they have a pool of their own (``trainyard.client.transport.Client``)."""
    meter = Meter(metrics, TokenBucket(limit.qps, limit.burst) if limit.limited else None)

    def wrap(transport: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        if isinstance(transport, MeteredTransport):
            raise ValueError("this client is metered already")
        return MeteredTransport(transport, meter)

    wrap_transports(client, wrap, watches=True)

    def wrap_calls(direct: Direct) -> Direct:
        if isinstance(direct, MeteredDirect):
            raise ValueError("this client is metered already")
        return MeteredDirect(direct, meter)

    wrap_direct(client, wrap_calls)
    return client


def api_client(
    config: KubeConfig,
    metrics: OperatorMetrics,
    limit: RateLimit,
    *,
    field_manager: str,
    route: Wrap | None = None,
    direct: Direct | None = None,
) -> AsyncClient:
    """The operator's lightkube client for ``config``, metered into ``metrics`` and limited by ``limit``;
    ``route`` wraps its transports first and ``direct`` serves its requests (the embedded plane's
    in-process route, ``trainyard.client.transport.Client.direct``), so the meter counts those requests too."""
    client = Client(config, field_manager=field_manager)
    if route is not None:
        wrap_transports(client, route, watches=True)
    if direct is not None:
        route_directly(client, direct)
    return instrument(client, metrics, limit)


def rate_limit_from(qps: float, burst: int) -> RateLimit:
    """The flags' values, checked as client-go would refuse them: a positive qps needs a burst of at least 1."""
    if not math.isfinite(qps):
        raise ValueError(f"--kube-api-qps must be a number (got {qps}); 0 or less turns the limit off")
    if qps > 0 and burst < 1:
        raise ValueError(f"--kube-api-burst must be at least 1 when --kube-api-qps is above 0 (got {burst})")
    return RateLimit(qps=qps, burst=burst) if qps > 0 else UNLIMITED
