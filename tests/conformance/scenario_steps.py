"""The two steps every official-SDK scenario uses (the scenarios run as scripts, this file beside them)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def check(what: str, ok: bool, got: object = None) -> None:
    if not ok:
        raise AssertionError(f"{what}: got {got!r}")
    print(f"ok  {what}")


def eventually(probe: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        if time.monotonic() > deadline:
            return value
        time.sleep(0.2)
    return value
