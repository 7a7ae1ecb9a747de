"""Field errors of admission: one problem of a written object, with its path, as Kubernetes words it.

Generic validation (``api.validation``) and each kind's own rules (``api.kubeflow.<kind>``) both
return these; the API server and the operator's webhook turn them into a 422 ``Status``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum


class ErrorType(StrEnum):
    REQUIRED = "FieldValueRequired"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    FORBIDDEN = "FieldValueForbidden"
    TYPE_INVALID = "FieldValueTypeInvalid"
    DUPLICATE = "FieldValueDuplicate"


_LABELS = {
    ErrorType.REQUIRED: "Required value",
    ErrorType.INVALID: "Invalid value",
    ErrorType.NOT_SUPPORTED: "Unsupported value",
    ErrorType.FORBIDDEN: "Forbidden",
    ErrorType.TYPE_INVALID: "Invalid value",
    ErrorType.DUPLICATE: "Duplicate value",
}


@dataclass(frozen=True)
class FieldError:
    """One problem, shaped like a Kubernetes ``StatusCause``."""

    type: ErrorType
    field: str
    detail: str

    @property
    def message(self) -> str:
        return f"{_LABELS[self.type]}: {self.detail}"

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def quote(value: object) -> str:
    """A bad value as ``field.Error`` prints it: strings quoted, nil as ``"null"``, numbers bare."""
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(str(value))
