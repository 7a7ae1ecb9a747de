"""Replica counts and ``replicaStatuses``, recomputed from the observed pods on every pass."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trainyard.api import labels
from trainyard.api.common import ReplicaStatus, TrainingJob
from trainyard.api.core import Pod, PodPhase
from trainyard.controller.children import replica_type_of, selector_string
from trainyard.frameworks.base import Framework, ReplicaCounts


def count_replicas(job: TrainingJob, plugin: Framework, pods: Iterable[Pod]) -> dict[str, ReplicaCounts]:
    tally: dict[str, list[int]] = {rtype: [0, 0, 0] for rtype in job.replica_specs}
    done: dict[str, set[int]] = {rtype: set() for rtype in job.replica_specs}
    for pod in pods:
        rtype = replica_type_of(pod, plugin)
        if rtype not in tally:
            continue
        # A running pod that is being deleted is on its way out: it is neither active nor failed.
        if pod.phase is PodPhase.RUNNING and pod.metadata.deletion_timestamp is None:
            tally[rtype][0] += 1
        elif pod.phase is PodPhase.SUCCEEDED:
            tally[rtype][1] += 1
            index = (pod.metadata.labels or {}).get(labels.REPLICA_INDEX, "")
            if index.isdigit():
                done[rtype].add(int(index))
        elif pod.phase is PodPhase.FAILED:
            tally[rtype][2] += 1
    return {
        rtype: ReplicaCounts(
            replicas=job.replica_specs[rtype].replicas or 0,
            active=active,
            succeeded=succeeded,
            failed=failed,
            restart_policy=job.replica_specs[rtype].restart_policy or "",
            succeeded_indices=frozenset(done[rtype]),
        )
        for rtype, (active, succeeded, failed) in tally.items()
    }


def replica_statuses(
    job: TrainingJob, plugin: Framework, counts: Mapping[str, ReplicaCounts], *, finished_ok: bool
) -> dict[str, ReplicaStatus]:
    """Upstream shape; after success, still-active replicas are reported as succeeded."""
    out = {}
    for rtype, c in counts.items():
        active, succeeded = (0, c.succeeded + c.active) if finished_ok else (c.active, c.succeeded)
        out[rtype] = ReplicaStatus(
            active=active,
            succeeded=succeeded,
            failed=c.failed,
            selector=selector_string(job, plugin, rtype) if plugin.info.scale else None,
        )
    return out
