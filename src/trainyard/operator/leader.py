"""Leader election through a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Replicas compete for one Lease. The holder renews it every ``retry_period``; the others may take
it only after they have seen the same record, unchanged, for ``lease_duration`` by their *own*
clock (so clock skew between machines does not matter). Every write is a resourceVersion-guarded
create or update, so two replicas can never both win one round. A leader that cannot renew
within ``renew_deadline`` (or that sees another holder) has lost, and ``is_leading`` turns false
at once; it also turns false by itself when the last renewal is older than ``renew_deadline``,
so a replica that was frozen (SIGSTOP, a long GC pause) fences itself before it writes again.
On a clean stop the leader releases the lease (holder cleared, duration 1 s) so a standby takes
over without waiting out the lease.

Defaults are client-go's and controller-runtime's: 15 s lease, 10 s renew deadline, 2 s retry.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.coordination_v1 import Lease

from trainyard.api.meta import format_micro_time
from trainyard.client.resources import build, is_status, to_dict
from trainyard.operator.metrics import OperatorMetrics

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2  # client-go's: a candidate waits retry_period * (1 + rand * 1.2) between tries


@dataclass(frozen=True)
class LeaderElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        # client-go refuses the same combinations.
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("the lease duration must be greater than the renew deadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"the renew deadline must be greater than {JITTER_FACTOR} x the retry period")
        if self.retry_period <= 0:
            raise ValueError("the retry period must be greater than zero")
        if not self.identity:
            raise ValueError("the leader election identity must not be empty")


class LeaderElector:
    def __init__(
        self,
        client: AsyncClient,
        config: LeaderElectionConfig,
        *,
        metrics: OperatorMetrics | None = None,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.metrics = metrics
        self._wall = wall
        self._monotonic = monotonic
        self._rng = rng or random.Random()
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._leading = False
        self._renewed_at = 0.0
        self._set_leading(False)

    # -- what the operator asks ------------------------------------------------------------------

    def is_leading(self) -> bool:
        """True only while this replica holds the lease and renewed it within the renew deadline."""
        return self._leading and self._monotonic() - self._renewed_at < self.config.renew_deadline

    @property
    def holder(self) -> str:
        """The holder this replica last saw in the lease (``""`` if none)."""
        return str((self._observed or {}).get("holderIdentity") or "")

    async def acquire(self) -> None:
        """Return once this replica holds the lease; retries with client-go's jittered period."""
        log.info("attempting to acquire leader lease %s/%s...", self.config.namespace, self.config.name)
        while True:
            if await self.try_acquire_or_renew():
                log.info("successfully acquired lease %s/%s as %s", *self._lease_id(), self.config.identity)
                return
            period = self.config.retry_period
            await asyncio.sleep(period + self._rng.random() * JITTER_FACTOR * period)

    async def hold(self) -> None:
        """Renew the lease until it is lost; return then (``is_leading`` is already false)."""
        while True:
            await asyncio.sleep(self.config.retry_period)
            if not self.is_leading():
                break
            if await self.try_acquire_or_renew():
                continue
            if self.holder and self.holder != self.config.identity:
                log.warning("leader lease %s/%s is now held by %s", *self._lease_id(), self.holder)
                break
            if self._monotonic() - self._renewed_at >= self.config.renew_deadline:
                break
        self._set_leading(False)
        log.error("leader election lost: lease %s/%s not renewed in time", *self._lease_id())

    async def release(self) -> None:
        """Give the lease up (clean shutdown): a standby can take it over at once."""
        if not self._leading:
            return
        self._set_leading(False)
        try:
            current = to_dict(await self.client.get(Lease, self.config.name, namespace=self.config.namespace))
            spec = current.get("spec") or {}
            if spec.get("holderIdentity") != self.config.identity:
                return
            now = format_micro_time(self._wall())
            current["spec"] = {
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": spec.get("leaseTransitions") or 0,
            }
            await self.client.replace(build(Lease, current))
            log.info("released leader lease %s/%s", *self._lease_id())
        except Exception as exc:  # best effort: the lease expires by itself anyway
            log.warning("could not release leader lease %s/%s: %s", *self._lease_id(), exc)

    # -- one try, as client-go's tryAcquireOrRenew -----------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        """One round: take or renew the lease if that is allowed now; False on refusal or error."""
        try:
            return await asyncio.wait_for(self._round(), timeout=self.config.renew_deadline)
        except asyncio.CancelledError:
            raise
        except (TimeoutError, ApiError, OSError) as exc:
            log.warning("error acquiring or renewing lease %s/%s: %s", *self._lease_id(), exc)
            return False
        except Exception as exc:  # transport errors of the client (httpx) must not end the election
            log.warning("error acquiring or renewing lease %s/%s: %s", *self._lease_id(), exc)
            return False

    async def _round(self) -> bool:
        cfg = self.config
        # Renewal counts from before the request: the lease may have been written any time after.
        started = self._monotonic()
        now = format_micro_time(self._wall())
        mine = {
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": max(1, round(cfg.lease_duration)),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        try:
            current = to_dict(await self.client.get(Lease, cfg.name, namespace=cfg.namespace))
        except ApiError as exc:
            if not is_status(exc, 404):
                raise
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": mine,
            }
            try:
                created = to_dict(await self.client.create(build(Lease, body)))
            except ApiError as create_exc:
                if is_status(create_exc, 409):  # another replica created it first
                    return False
                raise
            self._observe(created.get("spec") or {})
            self._renewed(started)
            return True

        spec = dict(current.get("spec") or {})
        if spec != self._observed:
            self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        # A lease held by someone else is theirs until we have seen it unchanged for its duration.
        duration = float(spec.get("leaseDurationSeconds") or cfg.lease_duration)
        if holder and holder != cfg.identity and self._monotonic() < self._observed_at + duration:
            return False
        if holder == cfg.identity:
            mine["acquireTime"] = spec.get("acquireTime") or now
            mine["leaseTransitions"] = spec.get("leaseTransitions") or 0
        else:
            mine["leaseTransitions"] = (spec.get("leaseTransitions") or 0) + 1
        current["spec"] = mine
        try:
            # The resourceVersion read above guards the write: a concurrent winner makes it a 409.
            updated = to_dict(await self.client.replace(build(Lease, current)))
        except ApiError as exc:
            if is_status(exc, 409):
                return False
            raise
        self._observe(updated.get("spec") or {})
        self._renewed(started)
        return True

    def _observe(self, spec: dict[str, Any]) -> None:
        self._observed = dict(spec)
        self._observed_at = self._monotonic()

    def _renewed(self, at: float) -> None:
        self._renewed_at = at
        if not self._leading:
            self._set_leading(True)

    def _set_leading(self, value: bool) -> None:
        self._leading = value
        if self.metrics is not None:
            self.metrics.leading(self.config.name, value)

    def _lease_id(self) -> tuple[str, str]:
        return self.config.namespace, self.config.name
