"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1e3``) read exactly.

The one parser shared by the controller (PodGroup ``minResources``, HPA metric targets) and the
embedded cluster (requests, capacity), so the two can never disagree on what a quantity means.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")
SUFFIXES = {
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
BINARY_SUFFIXES = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")


def parse(text: object) -> tuple[Decimal, str | None]:
    """A quantity's exact value and the suffix it was written with; ValueError when malformed."""
    match = QUANTITY.match(str(text).strip())
    if match is None:
        raise ValueError(f"quantities must match the regular expression '{QUANTITY.pattern}'")
    number, exponent, suffix = match.groups()
    try:
        value = Decimal(number)
        if exponent:
            value *= Decimal(10) ** int(exponent[1:])
    except InvalidOperation as exc:
        raise ValueError(f"invalid quantity {text!r}") from exc
    return (value * SUFFIXES[suffix] if suffix else value), suffix


def parse_quantity(text: object) -> Decimal:
    """A resource quantity as an exact number; ValueError when malformed."""
    return parse(text)[0]
