"""Object metadata and the base of every typed resource model.

Models use snake_case attributes and serialise to the camelCase JSON that Kubernetes speaks.
Unknown fields are kept (``extra="allow"``) so that a manifest round-trips through the models
unchanged: the operator must never drop a field of a user's pod template just because this
version of trainyard does not model it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer
from pydantic.alias_generators import to_camel

Obj = dict[str, Any]
"""A Kubernetes object (or any part of one) as JSON: what the API server reads and writes."""

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


_LAST_FORMATTED: tuple[int, str] | None = None


def format_time(moment: datetime) -> str:
    """RFC 3339 with second precision and a ``Z``, as Kubernetes writes ``metav1.Time``."""
    # Most calls in a second format that second (every write stamps times, every model dump
    # writes its times): the last one is kept, by its POSIX second (one tuple, swapped whole).
    global _LAST_FORMATTED
    second = math.floor(moment.timestamp())
    last = _LAST_FORMATTED
    if last is not None and last[0] == second:
        return last[1]
    # isoformat, not strftime: glibc's strftime stats /etc/localtime on every call (no TZ set).
    text = moment.astimezone(UTC).replace(microsecond=0, tzinfo=None).isoformat() + "Z"
    _LAST_FORMATTED = (second, text)
    return text


def format_micro_time(moment: datetime) -> str:
    """A ``metav1.MicroTime`` as the API writes it (a Lease's ``renewTime``): RFC 3339 with microseconds, UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


Time = Annotated[datetime, PlainSerializer(format_time, return_type=str)]


class K8sModel(BaseModel):
    """Base of all resource models: camelCase on the wire, unknown fields preserved."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow", validate_assignment=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form the API server stores: aliases, no nulls."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class OwnerReference(K8sModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(K8sModel):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class TypedObject(K8sModel):
    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"
