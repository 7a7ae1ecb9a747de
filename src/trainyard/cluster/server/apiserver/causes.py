"""Field errors worded exactly as kube-apiserver (v1.32) words them.

A 422 ``Invalid`` Status carries one ``StatusCause`` per problem: a reason such as
``FieldValueRequired``, the field path (``spec.containers[0].name``) and a message such as
``Invalid value: "Foo": a lowercase RFC 1123 label must ...``. kubectl prints
``<field>: <message>``, so users compare these strings with what a real cluster says; this
module owns that rendering, including Go's way of printing the offending value, and the
name/label/key checks of ``k8s.io/apimachinery/pkg/util/validation`` that most messages quote.

Callers: ``schema`` (CRD structural schemas) and ``admission`` (built-in kinds, metadata).
Pure: standard library only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

Cause = tuple[str, str, str]  # (reason, field, message), as errors.invalid takes them

REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
TYPE_INVALID = "FieldValueTypeInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
DUPLICATE = "FieldValueDuplicate"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"
NOT_FOUND = "FieldValueNotFound"


# -- Go value rendering ----------------------------------------------------------------------


def go_quote(text: str) -> str:
    """Go's ``%q``/``strconv.Quote`` for the strings that occur in practice."""
    return json.dumps(text, ensure_ascii=False)


def go_float(value: float) -> str:
    """Go's ``%v`` of a float64 (``%g``, shortest digits): ``1e+06`` for a million, ``1.5``, ``0.0001``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = len(text) + exponent  # position of the decimal point relative to the digits
    x = point - 1
    prefix = "-" if sign else ""
    # strconv's %g with the shortest precision switches to %e when x < -4 || x >= 6.
    if x < -4 or x >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return f"{prefix}{text}{'0' * (point - len(text))}"
    return f"{prefix}{text[:point]}.{text[point:]}"


def go_sharp(value: Any) -> str:
    """Go's ``%#v`` of a decoded JSON value (how v1.32 prints a map or list in a message)."""
    if isinstance(value, dict):
        inner = ", ".join(f"{go_quote(str(k))}:{go_sharp(v)}" for k, v in sorted(value.items()))
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_sharp(v) for v in value) + "}"
    if value is None:
        return "interface {}(nil)"
    return go_scalar(value)


def go_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    return go_sharp(value)


def bad_value(value: Any) -> str:
    """How ``field.Error.ErrorBody`` (v1.32) prints a bad value: nil reads as the string "null"."""
    if value is None:
        return go_quote("null")
    return go_scalar(value)


# -- causes ---------------------------------------------------------------------------------


def _with_detail(body: str, detail: str) -> str:
    return f"{body}: {detail}" if detail else body


def required(field: str, detail: str = "") -> Cause:
    return REQUIRED, field, _with_detail("Required value", detail)


def forbidden(field: str, detail: str) -> Cause:
    return FORBIDDEN, field, _with_detail("Forbidden", detail)


def invalid(field: str, value: Any, detail: str) -> Cause:
    return INVALID, field, _with_detail(f"Invalid value: {bad_value(value)}", detail)


def type_invalid(field: str, value: Any, detail: str) -> Cause:
    return TYPE_INVALID, field, _with_detail(f"Invalid value: {bad_value(value)}", detail)


def not_supported(field: str, value: Any, supported: Sequence[str]) -> Cause:
    detail = "supported values: " + ", ".join(go_quote(v) for v in supported) if supported else ""
    return NOT_SUPPORTED, field, _with_detail(f"Unsupported value: {bad_value(value)}", detail)


def not_found(field: str, value: Any) -> Cause:
    return NOT_FOUND, field, f"Not found: {bad_value(value)}"


def duplicate(field: str, value: Any) -> Cause:
    return DUPLICATE, field, f"Duplicate value: {bad_value(value)}"


def too_long(field: str, max_length: int) -> Cause:
    detail = f"may not be more than {max_length} bytes" if max_length >= 0 else "value is too long"
    return TOO_LONG, field, f"Too long: {detail}"


def too_many(field: str, actual: int, max_items: int) -> Cause:
    detail = f"must have at most {max_items} items" if max_items >= 0 else "has too many items"
    shown = f": {actual}" if actual >= 0 else ""
    return TOO_MANY, field, f"Too many{shown}: {detail}"


def render(causes: Sequence[Cause]) -> str:
    """``field: message`` lines joined as ``ErrorList.ToAggregate`` does."""
    parts = [f"{f}: {m}" if f else m for _, f, m in causes]
    return parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"


# -- names, labels, keys (k8s.io/apimachinery/pkg/util/validation) -----------------------------


def regex_error(message: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_QNAME_RE = re.compile(f"^{_QNAME_FMT}$")
_LABEL_VALUE_FMT = f"({_QNAME_FMT})?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_RE = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)
_DNS1035_LABEL_RE = re.compile(f"^{_DNS1035_LABEL_FMT}$")
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY_RE = re.compile(f"^{_CONFIG_KEY_FMT}$")


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = [max_len_error(253)] if len(value) > 253 else []
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1123_label(value: str) -> list[str]:
    errs = [max_len_error(63)] if len(value) > 63 else []
    if not _DNS1123_LABEL_RE.match(value):
        if _DNS1123_SUBDOMAIN_RE.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = [max_len_error(63)] if len(value) > 63 else []
    if not _DNS1035_LABEL_RE.match(value):
        errs.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in is_dns1123_subdomain(prefix)]
    else:
        return [
            "a qualified name "
            + regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _QNAME_RE.match(name):
        errs.append("name part " + regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(value: str) -> list[str]:
    errs = [max_len_error(63)] if len(value) > 63 else []
    if not _LABEL_VALUE_RE.match(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_config_map_key(value: str) -> list[str]:
    errs = [max_len_error(253)] if len(value) > 253 else []
    if not _CONFIG_KEY_RE.match(value):
        errs.append(
            regex_error(
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                _CONFIG_KEY_FMT,
                "key.name",
                "KEY_NAME",
                "key-name",
            )
        )
    if value == ".":
        errs.append("must not be '.'")
    elif value == "..":
        errs.append("must not be '..'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


_PORT_NAME = re.compile(r"^[-a-z0-9]+$")
_LETTER = re.compile(r"[a-z]")


def is_port_name(port: str) -> list[str]:
    errs = [max_len_error(15)] if len(port) > 15 else []
    if not _PORT_NAME.match(port):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _LETTER.search(port):
        errs.append("must contain at least one letter (a-z)")
    if "--" in port:
        errs.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def is_port_number(port: Any) -> list[str]:
    ok = isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535
    return [] if ok else ["must be between 1 and 65535, inclusive"]
