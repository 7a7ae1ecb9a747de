"""The ``format`` of OpenAPI string schemas: which formats kube-apiserver keeps, and their checks.

apiextensions-apiserver strips the formats it does not support from a CRD's schema before
validating (``kept``), so an unknown format means no format. Of the kept string formats,
``valid`` checks dates and date-times (RFC 3339), ``byte`` (standard base64), IPs, CIDRs, UUIDs
of a version, MACs, host names, e-mail addresses, URIs, colours, BSON object ids and durations;
the others (ISBNs, credit cards, SSNs, passwords) pass as they are. ``int32``, ``int64``,
``float`` and ``double`` are kept for numbers, whose types ``schema`` checks.

Callers: ``schema`` (validation). Pure: standard library only.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable
from datetime import date
from typing import Any

Schema = dict[str, Any]

_SUPPORTED_STRING_FORMATS = frozenset(
    {
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
    }
)


def _ip(version: int) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            parsed = ipaddress.ip_address(text)
        except ValueError:
            return False
        return parsed.version == version or (version == 6 and ":" in text)

    return check


def _cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


def _date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", text))


_TIME = re.compile(r"([01]\d|2[0-3]):[0-5]\d(:([0-5]\d|60)(\.\d+)?)?(z|[+-]([01]\d|2[0-3]):?[0-5]\d)?")


def _datetime(text: str) -> bool:
    head, sep, tail = text.lower().partition("t")
    return bool(sep) and _date(head) and bool(_TIME.fullmatch(tail))


def _base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _regex(pattern: str, flags: int = 0) -> Callable[[str], bool]:
    compiled = re.compile(pattern, flags)
    return lambda text: bool(compiled.fullmatch(text))


_UUID = r"[0-9a-f]{8}-?[0-9a-f]{4}-?%s[0-9a-f]{3}-?%s[0-9a-f]{3}-?[0-9a-f]{12}"
_FORMAT_CHECKS: dict[str, Callable[[str], bool]] = {
    "datetime": _datetime,
    "date": _date,
    "byte": _base64,
    "ipv4": _ip(4),
    "ipv6": _ip(6),
    "cidr": _cidr,
    "uuid": _regex(_UUID % ("[0-9a-f]", "[0-9a-f]"), re.I),
    "uuid3": _regex(_UUID % ("3", "[0-9a-f]"), re.I),
    "uuid4": _regex(_UUID % ("4", "[89ab]"), re.I),
    "uuid5": _regex(_UUID % ("5", "[89ab]"), re.I),
    "mac": _regex(r"([0-9a-f]{2}[:-]){5}[0-9a-f]{2}|([0-9a-f]{4}\.){2}[0-9a-f]{4}", re.I),
    "hostname": _regex(r"(?=.{1,255}$)%s(\.%s)*\.?" % ((r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",) * 2), re.I),
    "email": _regex(r"[^@\s]+@[^@\s]+"),
    "uri": _regex(r"([a-z][a-z0-9+.-]*:|/)\S*", re.I),
    "hexcolor": _regex(r"#?([0-9a-f]{3}|[0-9a-f]{6})", re.I),
    "rgbcolor": _regex(r"rgb\(\s*\d{1,3}\s*,\s*\d{1,3}\s*,\s*\d{1,3}\s*\)"),
    "bsonobjectid": _regex(r"[0-9a-f]{24}", re.I),
    "duration": _regex(r"\s*[-+]?(\d+(\.\d*)?\s*[a-zµμ]+\s*)+", re.I),
}


def kept(s: Schema) -> str:
    """The format kube-apiserver keeps after stripping the ones it does not support."""
    fmt = s.get("format")
    if not isinstance(fmt, str) or not fmt:
        return ""
    kind = s.get("type") or ""
    if kind in ("", "string"):
        return fmt if fmt.replace("-", "") in _SUPPORTED_STRING_FORMATS else ""
    if kind == "integer":
        return fmt if fmt in ("int32", "int64") else ""
    if kind == "number":
        return fmt if fmt in ("float", "double") else ""
    return ""


def valid(fmt: str, text: str) -> bool:
    """Whether ``text`` is a ``fmt`` string (``kept`` made ``fmt``); formats without a check accept anything."""
    check = _FORMAT_CHECKS.get(fmt.replace("-", ""))
    return check is None or check(text)
