"""Stopping the background tasks a component of the plane started."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any


async def cancel_all(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel every one of ``tasks``, then wait until each has ended; what they raise on the way
    out is theirs to log: a component stopping has no one to hand it to."""
    pending = list(tasks)
    for task in pending:
        task.cancel()
    for task in pending:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
