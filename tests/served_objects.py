"""The API server's object semantics over a real SQLite store, without HTTP, for unit tests of writes:
``objects_in(path)`` with the namespace ``ns`` created, and ``rt`` to look a served resource up."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainyard.cluster.server.apiserver.objects import Objects
from trainyard.cluster.server.apiserver.registry import Registry, ResourceType
from trainyard.cluster.server.storage.store import Store


def objects_in(directory: Path) -> Objects:
    objects = Objects(Store(directory / "store.db"), Registry())
    objects.create(rt(objects, "", "namespaces"), "", {"metadata": {"name": "ns"}})
    return objects


def rt(objects: Objects, group: str, plural: str) -> ResourceType:
    return objects.registry.lookup(group, "v1", plural) or pytest.fail(f"{plural} is not served")
