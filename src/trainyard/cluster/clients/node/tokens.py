"""Service-account tokens for projected volumes, asked of the API server and kept fresh as the kubelet does.

The node asks for each token a pod's projected volumes name (``podenv.token_key``: audience and
lifetime) with a TokenRequest bound to the pod, and writes it into the volume (``volumes``). While
the pod runs, its tokens are replaced before they expire, as the kubelet's token manager does:
once 80 % of a token's life has passed (``Issued.refresh_at``), or it is 24 hours old, the node
asks for a new one and rewrites the file in place, atomically (``volumes.write_tokens``), so that
training code that reads the file on each request (``trainyard.runtime``) always holds a valid
one. The life is what the API server granted (its answer's ``expirationSeconds``), which may be
shorter than the pod asked (``--service-account-max-token-expiration``). A refresh that fails is
retried, the old token staying in the file meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import ServiceAccount

from trainyard.api.meta import Obj
from trainyard.client.resources import is_status
from trainyard.cluster.clients.node import volumes
from trainyard.cluster.clients.node.podenv import token_requests

log = logging.getLogger(__name__)

Key = tuple[str, int]
REFRESH_FRACTION = 0.8
"""The kubelet's token manager: a token is replaced once this much of its life has passed..."""
MAX_AGE = timedelta(hours=24)
"""... or once it is this old, whichever comes first."""
RETRY = timedelta(seconds=10)
"""The longest wait before a failed refresh is tried again (a tenth of the token's life if shorter)."""


@dataclass(frozen=True)
class Issued:
    """A token the API server issued, with the life it granted."""

    token: str
    expires: datetime
    seconds: int

    def refresh_at(self) -> datetime:
        issued = self.expires - timedelta(seconds=self.seconds)
        return min(issued + timedelta(seconds=self.seconds * REFRESH_FRACTION), issued + MAX_AGE)

    def retry_after(self) -> timedelta:
        return min(RETRY, timedelta(seconds=self.seconds / 10))


async def request_token(client: AsyncClient, pod: Obj, audience: str, seconds: int) -> Issued | None:
    """A TokenRequest bound to the pod (its service account, ``audience``, ``seconds``); None: no such account."""
    m = pod["metadata"]
    spec: Obj = {
        "expirationSeconds": seconds,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": m["name"], "uid": m.get("uid")},
    }
    if audience:  # none: the API server's own audience
        spec["audiences"] = [audience]
    account = _account(pod)
    body = ServiceAccount.Token.from_dict(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {}, "spec": spec}
    )
    try:
        answer: Any = await client.create(body, account, namespace=m["namespace"])
    except ApiError as exc:
        if not is_status(exc, 404):
            raise
        return None
    granted = answer.spec.expirationSeconds or seconds
    return Issued(str(answer.status.token), answer.status.expirationTimestamp, int(granted))


class ProjectedTokens:
    """The tokens of the pods this node runs: issued for their volumes, then kept fresh until they stop."""

    def __init__(self, client: AsyncClient, clock: Callable[[], datetime]) -> None:
        self.client = client
        self.clock = clock
        self._issued: dict[str, dict[Key, Issued | None]] = {}
        self._refreshers: dict[str, asyncio.Task[None]] = {}

    async def issue(self, uid: str, pod: Obj) -> dict[Key, str | None]:
        """Every token the pod's projected volumes need, by ``podenv.token_key`` (None: not issued)."""
        issued = {key: await request_token(self.client, pod, *key) for key in token_requests(pod)}
        self._issued[uid] = issued
        return {key: None if held is None else held.token for key, held in issued.items()}

    def keep_fresh(self, uid: str, pod: Obj, backing: dict[str, Path]) -> None:
        """Refresh the tokens last issued for the pod in its volumes (``backing``: volume name → directory)."""
        self._stop_refresher(uid)
        issued = {key: held for key, held in self._issued.get(uid, {}).items() if held is not None}
        if issued:
            name = f"tokens {pod['metadata'].get('namespace')}/{pod['metadata'].get('name')}"
            self._refreshers[uid] = asyncio.create_task(self._refresh(pod, backing, issued), name=name)

    def forget(self, uid: str) -> None:
        """The pod's containers are gone for good: no more tokens for it."""
        self._stop_refresher(uid)
        self._issued.pop(uid, None)

    def close(self) -> None:
        for uid in list(self._refreshers):
            self.forget(uid)

    def _stop_refresher(self, uid: str) -> None:
        task = self._refreshers.pop(uid, None)
        if task is not None:
            task.cancel()

    async def _refresh(self, pod: Obj, backing: dict[str, Path], issued: dict[Key, Issued]) -> None:
        m = pod["metadata"]
        due = {key: held.refresh_at() for key, held in issued.items()}
        while True:
            await asyncio.sleep(max(0.0, (min(due.values()) - self.clock()).total_seconds()))
            now = self.clock()
            for key in [key for key, at in due.items() if at <= now]:
                try:
                    fresh = await request_token(self.client, pod, *key)
                    if fresh is None:
                        raise LookupError(f'no token issued: serviceaccount "{_account(pod)}" or the pod is gone')
                    volumes.write_tokens(pod, backing, {key: fresh.token})
                except Exception as exc:  # the refresher outlives any failure: the next attempt may succeed
                    # The old token stays until it expires; the pod's reports fail only after that.
                    log.warning("pod %s/%s: refreshing its token %r failed: %s", m["namespace"], m["name"], key, exc)
                    due[key] = now + issued[key].retry_after()
                    continue
                # Never again at once, even for a token granted less than a second (its expiry is whole seconds).
                issued[key], due[key] = fresh, max(fresh.refresh_at(), now + fresh.retry_after())


def _account(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("serviceAccountName") or "default")
