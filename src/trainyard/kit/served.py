"""Whether the cluster serves a kind, and waiting until it does: what a controller checks before it watches.

A real cluster serves a custom kind only once its CRD is installed; a controller whose kind is not
served waits (saying so once) instead of failing, as controller-runtime's managers wait for their
CRDs. A list of one object answers it: 404 means not served.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError

from trainyard.client.resources import is_status

log = logging.getLogger(__name__)


async def served(client: AsyncClient, res: Any, namespace: str | None) -> bool:
    try:
        async for _ in client.list(res, namespace=namespace, chunk_size=1):
            break
    except ApiError as exc:
        if is_status(exc, 404):
            return False
        raise
    return True


async def wait_served(
    client: AsyncClient, res: Any, kind: str, namespace: str | None, *, recheck: float, install: str
) -> None:
    """Until ``res`` is served; ``install`` says what to install, in the one warning."""
    told = False
    while not await served(client, res, namespace):
        if not told:
            log.warning("%s not served by this cluster: install %s", kind, install)
            told = True
        await asyncio.sleep(recheck)
