"""``yard doctor``'s reading: one job's ``diagnosis.Snapshot`` gathered through the client.

It reads what a person would before saying what is wrong: the job, its pods and the events about
them (``jobstate``), the last log lines of each replica's main container (and of its previous run,
``logs --previous``, when it restarted), the nodes and every pod bound to them (what is free), the
claims the pods mount, and the job's Kueue Workload with what ``api.kueue.views`` says of its wait.
Anything the cluster does not serve or refuses (no Kueue, RBAC) is left out, not an error:
a diagnosis works with what it could read.
"""

from __future__ import annotations

import urllib.parse
from datetime import UTC, datetime
from typing import Any

from lightkube import ALL_NS, Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node, PersistentVolumeClaim, Pod

from trainyard.api.kueue import views
from trainyard.api.kueue.integrations import queue_name
from trainyard.api.meta import Obj
from trainyard.client.resources import to_dict
from trainyard.sdk import jobstate, queues
from trainyard.sdk.diagnosis import Finding, Settings, Snapshot, diagnose
from trainyard.sdk.kinds import JobKind
from trainyard.sdk.logs import container_of

LOG_TAIL = 40  # lines read of each container; the findings quote the last few
MAX_LOGGED_PODS = 32  # a huge job's logs are not all read: the first replicas tell the story


def _listed(client: Client, res: Any, **scope: Any) -> list[Obj]:
    try:
        return [to_dict(o) for o in client.list(res, **scope)]
    except ApiError:
        return []  # not served or not allowed here: the rules that need it say nothing


def _log(client: Client, pod: Obj, container: str | None, *, previous: bool, tail: int) -> list[str]:
    meta = pod["metadata"]
    query = {"tailLines": str(tail), **({"container": container} if container else {})}
    if previous:
        query["previous"] = "true"
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/log?{urllib.parse.urlencode(query)}"
    inner = client._client  # lightkube's configured HTTP client (auth, TLS); it has no `previous` parameter
    try:
        response = inner.send(inner._client.build_request("GET", path))
    except Exception:
        return []
    return response.text.splitlines() if response.status_code == 200 else []


def _ran(pod: Obj, container: str | None) -> tuple[bool, bool]:
    """Whether the container has a log of a current run, and of a previous one."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    cs = next((c for c in statuses if c.get("name") == container), statuses[0] if statuses else {})
    state = cs.get("state") or {}
    return ("running" in state or "terminated" in state), bool(cs.get("restartCount"))


def gather(
    client: Client,
    kind: JobKind,
    job: Obj,
    *,
    now: datetime | None = None,
    settings: Settings | None = None,
    tail: int = LOG_TAIL,
) -> Snapshot:
    meta = job["metadata"]
    namespace = meta.get("namespace") or client.namespace
    pods = jobstate.job_pods(client, kind, meta["name"], namespace)
    events = jobstate.pod_events(
        client,
        namespace,
        jobstate.event_names(kind, meta["name"], pods),
        {meta.get("uid", ""), *(p["metadata"].get("uid", "") for p in pods)},
    )
    # Events from before the job was created are an older job's of the same name (pod names repeat).
    created = str(meta.get("creationTimestamp") or "")
    events = [e for e in events if str((e.get("metadata") or {}).get("creationTimestamp") or created) >= created]
    logs: dict[str, list[str]] = {}
    previous: dict[str, list[str]] = {}
    for pod in pods[:MAX_LOGGED_PODS]:
        container = container_of(pod, kind.default_container)
        current, restarted = _ran(pod, container)
        if current:
            logs[pod["metadata"]["name"]] = _log(client, pod, container, previous=False, tail=tail)
        if restarted:
            previous[pod["metadata"]["name"]] = _log(client, pod, container, previous=True, tail=tail)
    claim_names = {
        str(v["persistentVolumeClaim"]["claimName"])
        for p in pods
        for v in (p.get("spec") or {}).get("volumes") or []
        if (v.get("persistentVolumeClaim") or {}).get("claimName")
    }
    claims = (
        [c for c in _listed(client, PersistentVolumeClaim, namespace=namespace) if c["metadata"]["name"] in claim_names]
        if claim_names
        else []
    )
    workload, lines = None, []
    if queue_name(job):
        try:
            queued = queues.snapshot(client)
        except ApiError:
            queued = None
        if queued is not None:
            workload = queued.workload_of(job)
            if workload is not None:
                lines = views.waiting_lines(queued.config, queued.decision, workload)
    # What the nodes' pods use matters only to a gang that does not fit; a big cluster's pods are not
    # listed otherwise.
    waiting = any(not (p.get("spec") or {}).get("nodeName") for p in pods)
    all_pods = _listed(client, Pod, namespace=ALL_NS) if waiting else []
    return Snapshot(
        job=job,
        view=kind.view,
        now=now or datetime.now(UTC),
        container=kind.default_container,
        pods=pods,
        events=events,
        logs=logs,
        previous=previous,
        nodes=_listed(client, Node),
        node_pods=[p for p in all_pods if (p.get("spec") or {}).get("nodeName")],
        claims=claims,
        workload=workload,
        queue_lines=lines,
        settings=settings or Settings(),
    )


def examine(client: Client, kind: JobKind, job: Obj, *, settings: Settings | None = None) -> list[Finding]:
    """The findings about one job, read now."""
    return diagnose(gather(client, kind, job, settings=settings))
