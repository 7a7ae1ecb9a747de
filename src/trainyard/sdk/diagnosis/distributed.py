"""Rules about replicas that run but do not train together, or do not stop: a rendezvous that never
completes (which replica is missing), a collective that timed out (NCCL's watchdog, gloo's
``Timed out waiting ...ms``), and a script that keeps running after it reported training done.

The rendezvous and collective rules read torch's own words in the replicas' logs (c10d's
``DistStoreError``/``DistNetworkError``, torchrun's ``RendezvousTimeoutError``, ProcessGroupNCCL's
watchdog), then name the peers that are not running from the pods' states.
"""

from __future__ import annotations

import re

from trainyard.api.meta import Obj, parse_time
from trainyard.sdk.diagnosis.model import Finding, Snapshot, all_log_lines, pod_name, state_of, who
from trainyard.sdk.replicas import replica_name

_RENDEZVOUS = (
    re.compile(r"Timed out after (\d+) seconds waiting for clients\. (\d+)/(\d+) clients joined"),
    re.compile(r"The client socket has timed out after (\S+) while trying to connect to \(([^,]+), (\d+)\)"),
    re.compile(r"RendezvousTimeoutError|RendezvousConnectionError|RendezvousClosedError"),
    re.compile(r"The client socket has failed to connect to \[([^\]]+)\]:(\d+)"),
)
_COLLECTIVE = (
    re.compile(r"Watchdog caught collective operation timeout: (WorkNCCL\(.*?\)) ran for (\d+) milliseconds"),
    re.compile(r"Timed out waiting (\d+)ms for (recv|send) operation to complete"),
    re.compile(r"NCCL error|ncclSystemError|ncclInternalError|ncclRemoteError|NCCL WARN .*(?:timeout|failed)", re.I),
    re.compile(r"gloo.*(?:Connection closed by peer|Connection reset by peer)"),
)


# Words torch also prints on the way to a good start (a replica dialing a master that is not up yet,
# an NCCL warning, a peer that left an elastic group it re-forms): they count only while they are the
# last thing a replica said.
_TRANSIENT = {_RENDEZVOUS[3].pattern, _COLLECTIVE[2].pattern, _COLLECTIVE[3].pattern}
_STILL_SAYING = 5


def _first_match(snap: Snapshot, pod: Obj, patterns: tuple[re.Pattern[str], ...]) -> tuple[int, str, str] | None:
    """(rank of the pattern, where, line) of a pod's most telling line: the first pattern's last match, else
    the next pattern's."""
    lines = all_log_lines(snap, pod)
    for rank, pattern in enumerate(patterns):
        searched = lines[-_STILL_SAYING:] if pattern.pattern in _TRANSIENT else lines
        hits = [(w, line) for w, line in searched if pattern.search(line)]
        if hits:
            return rank, *hits[-1]
    return None


def _hits(
    snap: Snapshot, claimed: frozenset[str], patterns: tuple[re.Pattern[str], ...]
) -> list[tuple[int, Obj, str, str]]:
    """Every unexplained pod whose log has one of the patterns, the most telling first (then in pod order)."""
    found = [
        (hit[0], pod, hit[1], hit[2])
        for pod in snap.pods
        if pod_name(pod) not in claimed and (hit := _first_match(snap, pod, patterns)) is not None
    ]
    return sorted(found, key=lambda h: h[0])


def _not_running(snap: Snapshot, besides: set[str]) -> list[str]:
    """The wanted replicas that are not running (absent, pending, ended), as a finding names them."""
    by_replica = {replica_name(p): p for p in snap.pods}
    out = []
    for replica in snap.view.wanted(snap.job):
        pod = by_replica.get(replica)
        if pod is None:
            out.append(f"{replica} (no pod)")
            continue
        if pod_name(pod) in besides:
            continue
        cs = state_of(snap, pod)
        if cs.phase != "Running" or cs.reason:
            what = cs.reason or cs.phase
            code = f", exit code {cs.exit_code}" if cs.exit_code is not None else ""
            out.append(f"{who(pod)} {what}{code}")
    return out


def _evidence(hits: list[tuple[int, Obj, str, str]], missing: list[str]) -> tuple[str, ...]:
    return (
        *(f"{pod_name(pod)} {where}: {line.strip()}" for _, pod, where, line in hits),
        *(f"not running: {m}" for m in missing),
    )


def rendezvous(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """One finding for the job: told by the replica whose words say most (the master counting who
    joined, then torchrun, then a replica that could not reach it), with every replica's line."""
    hits = _hits(snap, claimed, _RENDEZVOUS)
    if not hits:
        return []
    _, pod, _, line = hits[0]
    telling = {pod_name(h[1]) for h in hits}
    missing = _not_running(snap, telling)
    joined = _RENDEZVOUS[0].search(line)
    dialed = _RENDEZVOUS[1].search(line)
    refused = _RENDEZVOUS[3].search(line)
    if joined:
        detail = f"{joined.group(2)} of {joined.group(3)} replicas joined within {joined.group(1)}s"
    elif dialed:
        detail = f"it could not reach the rendezvous at {dialed.group(2)}:{dialed.group(3)} in {dialed.group(1)}"
    elif refused:
        detail = f"it could not connect to the rendezvous at {refused.group(1)}:{refused.group(2)}"
    else:
        detail = "torchrun's rendezvous timed out"
    absent = (
        f"; not running: {', '.join(missing)}"
        if missing
        else "; every other replica runs, so one has not joined: it starts slowly or dials another MASTER_ADDR/PORT"
    )
    return [
        Finding(
            "RendezvousIncomplete",
            "error",
            f"The rendezvous never completes for {who(pod)}: {detail}{absent}.",
            "start the missing replicas first (their own findings say why they are not running); check that "
            "MASTER_ADDR/MASTER_PORT reach the master (`kubectl exec POD -- printenv | grep -E "
            "'MASTER|RANK|WORLD'`) and that nothing else holds the port; raise the timeout if replicas "
            "start slowly (init_process_group(timeout=...), torchrun --rdzv-conf join_timeout=...)",
            _evidence(hits, missing),
            tuple(sorted(telling)),
        )
    ]


def collective(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """One finding for the job: the replica whose collective timed out (NCCL's watchdog first), its
    peers' lines, and which peers are not running."""
    hits = _hits(snap, claimed, _COLLECTIVE)
    if not hits:
        return []
    _, pod, _, line = hits[0]
    nccl = _COLLECTIVE[0].search(line)
    gloo = _COLLECTIVE[1].search(line)
    if nccl:
        detail = f"NCCL's watchdog timed out {nccl.group(1)} after {int(nccl.group(2)) // 1000}s"
    elif gloo:
        detail = f"gloo timed out waiting {int(gloo.group(1)) // 1000}s for a {gloo.group(2)} from a peer"
    else:
        detail = "the communication backend failed"
    telling = {pod_name(h[1]) for h in hits}
    missing = _not_running(snap, telling)
    peers = f"; not running: {', '.join(missing)}" if missing else "; every other replica still runs (a hang)"
    return [
        Finding(
            "CollectiveTimeout",
            "error",
            f"A collective failed on {who(pod)}: {detail}{peers}.",
            "a peer stopped taking part: read the other replicas' logs (one that crashed, hangs or took another "
            "code path); on a cluster check the ports between pods and NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME; "
            "NCCL_DEBUG=INFO and TORCH_DISTRIBUTED_DEBUG=DETAIL say more; raise init_process_group(timeout=...) "
            "only when a step is legitimately slow",
            _evidence(hits, missing),
            tuple(sorted(telling)),
        )
    ]


def never_exits(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """Training reported done, yet the job's pods run on long after."""
    reported = snap.view.training(snap.job)
    if reported is None or snap.view.outcome(snap.job) is not None:
        return []
    done = (reported.percent or 0) >= 100
    done = done or bool(reported.total_epochs and reported.epoch and reported.epoch >= reported.total_epochs)
    done = done or bool(reported.total_steps and reported.step and reported.step >= reported.total_steps)
    if not done or not reported.updated:
        return []
    try:
        idle = (snap.now - parse_time(reported.updated)).total_seconds()
    except ValueError:
        return []
    running = [p for p in snap.pods if (p.get("status") or {}).get("phase") == "Running"]
    if idle < snap.settings.finished_grace_seconds or not running:
        return []
    verb = "runs" if len(running) == 1 else "run"
    epochs = f" (epoch {reported.epoch}/{reported.total_epochs})" if reported.total_epochs else ""
    return [
        Finding(
            "NeverExits",
            "warning",
            f"Training reported {reported.percent if reported.percent is not None else 100}% done{epochs} "
            f"{int(idle)}s ago, but {', '.join(who(p) for p in running)} still {verb}.",
            "make the script exit once training is done: dist.destroy_process_group(), join or stop its threads "
            "(data loaders, loggers, servers) or mark them daemon, close pools; as a safety net set "
            "runPolicy.activeDeadlineSeconds",
            (
                f"status.trainingProgress.lastUpdateTime {reported.updated}",
                *(f"{pod_name(p)} is Running" for p in running),
            ),
            tuple(pod_name(p) for p in running),
        )
    ]
