"""What is wrong with a job, and what to do: ``diagnose(snapshot)`` runs the rules over one job's
``Snapshot`` and returns ``Finding``s (cause, remedy, evidence), for ``yard doctor`` and the Why
of ``yard describe``.

Pure: the snapshot is gathered elsewhere (``sdk.doctor``). One small rule per failure, in one
registry (``RULES``), in order: the specific ones (a pod OOM-killed, a command not found, an
image's environment, a rendezvous, a collective) before the general one (``crash``: whatever else
exits non-zero); a pod a rule explains is not explained again by a later one. Generic over kinds:
replicas are read by their labels and a job's fields by its ``*ReplicaSpecs``, never by a kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trainyard.sdk.diagnosis import containers, distributed, scheduling
from trainyard.sdk.diagnosis.model import Finding, Settings, Snapshot

Rule = Callable[[Snapshot, frozenset[str]], list[Finding]]
"""A rule reads a snapshot and the pods earlier rules explained (to leave them alone)."""

RULES: tuple[tuple[str, Rule], ...] = (
    ("queue", scheduling.queue),
    ("quota", scheduling.quota),
    ("claims", scheduling.claims),
    ("unschedulable", scheduling.unschedulable),
    ("nodes", scheduling.nodes),
    ("oom", containers.oom),
    ("environment", containers.environment),
    ("command", containers.command),
    ("config", containers.config),
    ("image-pull", containers.image_pull),
    ("rendezvous", distributed.rendezvous),
    ("collective", distributed.collective),
    ("crash", containers.crash),
    ("never-exits", distributed.never_exits),
)


def diagnose(snap: Snapshot, rules: Sequence[tuple[str, Rule]] = RULES) -> list[Finding]:
    """Every finding about the job, errors first, in the rules' order; none for a job that succeeded."""
    if snap.view.outcome(snap.job) == snap.view.succeeded:
        return []  # what failed on the way (a restart) did not stop it
    found: list[Finding] = []
    claimed: set[str] = set()
    for _, rule in rules:
        for finding in rule(snap, frozenset(claimed)):
            found.append(finding)
            claimed.update(finding.pods)
    return sorted(found, key=lambda f: f.severity != "error")


__all__ = ["RULES", "Finding", "Rule", "Settings", "Snapshot", "diagnose"]
