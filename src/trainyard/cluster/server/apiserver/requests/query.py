"""What every verb reads from a request the same way: boolean and integer query parameters, and Tables.

A boolean parameter is true for the spellings Go's ``strconv.ParseBool`` reads as true; an
integer one is an int64 or a 400 ``Status``. A client that asks for ``application/json;as=Table`` first in its
``Accept`` header gets server-side printing (``tables``) instead of the objects.

Callers: ``server`` and ``streams``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.requests.incoming import ApiRequest

JSON = "application/json"
_TRUE = {"1", "t", "T", "true", "TRUE", "True"}


def flag(value: str | None) -> bool:
    return value in _TRUE


def int64(query: Mapping[str, str], name: str, *, minimum: int | None = None) -> int | None:
    """An int64 query parameter as Go's ParseInt reads it; 400 when it is not one."""
    raw = query.get(name)
    if not raw:
        return None
    if not re.fullmatch(r"[+-]?[0-9]{1,19}", raw) or not -(2**63) <= int(raw) < 2**63:
        raise errors.bad_request(f"invalid value for query parameter {name}: {raw!r} is not a 64-bit integer")
    value = int(raw)
    if minimum is not None and value < minimum:
        raise errors.bad_request(f"invalid value for query parameter {name}: {value} must be at least {minimum}")
    return value


def wants_table(request: ApiRequest) -> bool:
    accept = request.headers.get("Accept", "")
    return "as=Table" in accept.split(",")[0] or accept.startswith("application/json;as=Table")
