"""Acting on a preemption (``preemption.Preemption``) as kube-scheduler's ``prepareCandidate`` does.

For every victim: its status first gets the ``DisruptionTarget`` condition (True, reason
``PreemptionByScheduler``, ``<scheduler>: preempting to accommodate a higher priority pod``), so
that whoever owns it can tell a preemption from a failure; then it is deleted with its own
graceful termination period (the node agent stops it with SIGTERM, SIGKILL after the period);
then the ``Preempted`` event (``Preempted by pod <uid> on node <node>``) is recorded on it. Every
preemptor gets ``status.nominatedNodeName``. A victim already gone is no error. The preemptors
are bound by a later pass, once the victims' resources are free (``loop``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from trainyard.client.events import event_body
from trainyard.client.resources import is_status
from trainyard.cluster.clients.scheduler import preemption
from trainyard.cluster.clients.scheduler.reports import POD, Reports, pod_ref
from trainyard.cluster.clients.scheduler.snapshot import PodInfo

log = logging.getLogger(__name__)


def _gone(exc: Exception) -> bool:
    return isinstance(exc, ApiError) and is_status(exc, 404)


async def evict(client: AsyncClient, reports: Reports, now: Callable[[], str], victim: PodInfo, by: PodInfo) -> None:
    """Mark ``victim`` a disruption target, delete it gracefully, and say so on it."""
    condition = {
        "type": preemption.DISRUPTION_TARGET,
        "status": "True",
        "reason": preemption.PREEMPTION_REASON,
        "message": preemption.condition_message(by),
        "lastTransitionTime": now(),
    }
    try:
        await client.patch(
            POD.Status,
            victim.name,
            {"status": {"conditions": [condition]}},
            namespace=victim.namespace,
            patch_type=PatchType.STRATEGIC,
        )
        await client.delete(POD, victim.name, namespace=victim.namespace)
    except Exception as exc:
        if not _gone(exc):
            log.warning("preempting %s/%s failed: %s", victim.namespace, victim.name, exc)
        return
    reports.emit(
        event_body(
            pod_ref(victim),
            type_="Normal",
            reason=preemption.PREEMPTED_EVENT,
            message=preemption.event_message(by, victim.node_name),
            component=by.scheduler,
            now=now(),
        )
    )


async def nominate(client: AsyncClient, pod: PodInfo, node: str) -> None:
    """``status.nominatedNodeName``: where the room being made for ``pod`` is."""
    try:
        await client.patch(
            POD.Status,
            pod.name,
            {"status": {"nominatedNodeName": node}},
            namespace=pod.namespace,
            patch_type=PatchType.MERGE,
        )
    except Exception as exc:
        if not _gone(exc):
            log.warning("nominating %s/%s to %s failed: %s", pod.namespace, pod.name, node, exc)
