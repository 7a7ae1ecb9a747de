"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1e3``): parsing and the units the scheduler counts in.

``parse_quantity`` reads a quantity exactly (a ``Decimal``). ``amount`` turns it into the integer
the scheduler adds up, as kube-scheduler does: CPU in millicores, every other resource in whole
units (bytes for memory), rounded up. ``format_amount`` writes such an integer back the way
``kubectl`` shows it. Pure: callers are ``podenv``, ``capacity`` and ``scheduling``.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")
_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"
EPHEMERAL_STORAGE = "ephemeral-storage"


def parse_quantity(text: str | int | float) -> Decimal:
    """A resource quantity (``500m``, ``2Gi``, ``1e3``) as an exact number; ValueError when malformed."""
    match = _QUANTITY.match(str(text).strip())
    if match is None:
        raise ValueError(f"quantities must match the regular expression '{_QUANTITY.pattern}'")
    number, exponent, suffix = match.groups()
    try:
        value = Decimal(number)
        if exponent:
            value *= Decimal(10) ** int(exponent[1:])
    except InvalidOperation as exc:
        raise ValueError(f"invalid quantity {text!r}") from exc
    return value * _SUFFIX[suffix] if suffix else value


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
