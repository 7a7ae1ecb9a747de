"""API groups served by another component through this server, as kube-aggregator's APIServices.

kube-apiserver proxies a group that an ``APIService`` registers (metrics-server's
``metrics.k8s.io``, an adapter's ``custom.metrics.k8s.io``) to the server behind it, and lists the
group in its discovery documents as if it were its own. Here the component lives in the same
process, so the proxy is a call: ``ApiServer.aggregated`` maps a group to an ``AggregatedApi``,
which answers discovery (its version's resources) and the GETs under
``/apis/<group>/<version>/...`` with a JSON body. The request's ``labelSelector`` is parsed here,
once, with kube-apiserver's grammar and errors, and handed to the component as a predicate.

Read-only (only GET is served: a write answers 405, as metrics-server's does); no watch. A
component says "not found" with ``LookupError`` (404 ``NotFound``, its message) and a bad request
with ``ValueError`` (400 ``BadRequest``), so that it needs nothing of this server to speak.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Obj = dict[str, Any]


@dataclass(frozen=True)
class MetricsQuery:
    """What a component is asked: the path under its group-version, split, and the selectors."""

    namespace: str | None
    path: tuple[str, ...]
    labels: Any  # requests.selectors.LabelSelector: ``matches(labels)``, ``str()``
    metric_labels: Any  # ``metricSelector`` of the custom and external metrics APIs, the same kind
    query: Mapping[str, str]


class AggregatedApi(Protocol):
    group: str
    version: str

    def resources(self) -> Sequence[Obj]:
        """The ``APIResource`` entries of ``<group>/<version>`` (discovery)."""
        ...

    async def get(self, query: MetricsQuery) -> Obj:
        """The answer to a GET (``LookupError``: 404; ``ValueError``: 400)."""
        ...


def split(rest: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
    """``namespaces/<ns>/<rest...>`` → (ns, rest); anything else is cluster-wide."""
    if len(rest) >= 3 and rest[0] == "namespaces":
        return rest[1], tuple(rest[2:])
    return None, tuple(rest)
