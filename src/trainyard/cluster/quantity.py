"""Resource amounts the scheduler counts in: millicores of CPU, whole units (bytes) of everything else.

``amount`` turns a quantity (read by ``trainyard.api.quantity``) into the integer
the scheduler adds up, as kube-scheduler does: CPU in millicores, every other resource in whole
units (bytes for memory), rounded up. ``format_amount`` writes such an integer back the way
``kubectl`` shows it. Pure: callers are the node's ``capacity`` and the scheduler's ``placement``.
"""

from __future__ import annotations

import math

from trainyard.api.quantity import BINARY_SUFFIXES, SUFFIXES, parse_quantity

_BINARY = tuple((suffix, int(SUFFIXES[suffix])) for suffix in BINARY_SUFFIXES)
CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"
EPHEMERAL_STORAGE = "ephemeral-storage"


def amount(resource: str, text: str | int | float) -> int:
    """What the scheduler counts of ``resource``: millicores of CPU, whole units (bytes) otherwise."""
    value = parse_quantity(text)
    return math.ceil(value * 1000) if resource == CPU else math.ceil(value)


def format_amount(resource: str, value: int) -> str:
    """An ``amount`` written as a quantity: ``2`` or ``1500m`` CPU, ``64Gi`` or ``16306144Ki`` memory."""
    if resource == CPU:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if resource == MEMORY and value:
        for suffix, unit in _BINARY:
            if value % unit == 0:
                return f"{value // unit}{suffix}"
    return str(value)
