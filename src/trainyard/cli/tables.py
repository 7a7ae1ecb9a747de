"""The tables and object dumps of ``yard get`` and ``yard describe``: columns, rows and headers of jobs,
pods and events (over ``api.jobview`` and ``sdk.replicas``), and ``-o yaml|json|name``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import yaml
from rich.text import Text

from trainyard.api import training
from trainyard.api.families import default_family
from trainyard.api.jobview import COMMON_COLUMNS
from trainyard.api.meta import Obj
from trainyard.cli.common import age, out, styled
from trainyard.cli.progress import pod_status_word
from trainyard.sdk import jobstate
from trainyard.sdk import replicas as pod_views
from trainyard.sdk.kinds import JobKind

# -- rows ----------------------------------------------------------------------------------------


Cell = Callable[[Obj, JobKind], str]


def _of_job(read: Callable[[Obj], str]) -> Cell:
    return lambda job, _kind: read(job)


def _summary(job: Obj, kind: JobKind) -> str:
    return kind.view.summary(job)


def _training(header: str) -> Cell:
    """A training column of a table of several families: each job read by its own family's shape."""

    def cell(job: Obj, kind: JobKind) -> str:
        return training.cell(header, kind.view.training(job), over=kind.view.outcome(job) is not None)

    return cell


def job_columns(kinds: list[JobKind], *, wide: bool) -> list[tuple[str, Cell]]:
    """The columns after NAME and STATE: a family's own when every kind listed is of it, else the
    common ones (training progress read per family, each job's summary as REPLICAS; ``api.jobview``)."""
    families = {id(k.view): k.view for k in kinds}
    if len(families) == 1:
        (view,) = families.values()
        return [(header, _of_job(read)) for header, read in (*view.columns, *(view.wide_columns if wide else ()))]
    common = [(header, _training(header)) for header in training.COLUMNS]
    common += [(header, _of_job(read)) for header, read in COMMON_COLUMNS]
    common.append(("REPLICAS", _summary))
    if wide:
        common += [(header, _training(header)) for header in training.WIDE_COLUMNS]
        own = set(training.COLUMNS + training.WIDE_COLUMNS)
        common += [(header, _of_job(read)) for header, read in default_family().view.wide_columns if header not in own]
    return common


def job_row(
    job: Obj, kind: JobKind, columns: list[tuple[str, Cell]], *, wide: bool, all_ns: bool, show_kind: bool
) -> list[str | Text]:
    meta = job["metadata"]
    row: list[str | Text] = [meta["name"], styled(jobstate.state(job, kind.view))]
    row += [cell(job, kind) for _header, cell in columns]
    if show_kind or wide:
        row.append(kind.kind)
    return ([meta.get("namespace", "")] if all_ns else []) + row


def job_headers(columns: list[tuple[str, Cell]], *, wide: bool, all_ns: bool, show_kind: bool) -> list[str]:
    headers = ["NAME", "STATE", *(header for header, _cell in columns)]
    if show_kind or wide:
        headers.append("KIND")
    return (["NAMESPACE"] if all_ns else []) + headers


def pod_row(pod: Obj, *, wide: bool, all_ns: bool) -> list[str | Text]:
    meta, status = pod["metadata"], pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    containers = (pod.get("spec") or {}).get("containers") or []
    ready = f"{sum(1 for c in statuses if c.get('ready'))}/{len(containers)}"
    restarts = str(sum(int(c.get("restartCount") or 0) for c in statuses))
    row: list[str | Text] = [
        meta["name"],
        ready,
        styled(pod_status_word(pod)),
        restarts,
        age(meta.get("creationTimestamp")),
    ]
    if wide:
        row += [
            status.get("podIP") or "<none>",
            (pod.get("spec") or {}).get("nodeName") or "<none>",
            pod_views.job_of(pod) or "<none>",
            jobstate.replica_name(pod) if pod_views.is_replica(pod) else "<none>",
        ]
    return ([meta.get("namespace", "")] if all_ns else []) + row


def pod_headers(*, wide: bool, all_ns: bool) -> list[str]:
    headers = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    if wide:
        headers += ["IP", "NODE", "JOB", "REPLICA"]
    return (["NAMESPACE"] if all_ns else []) + headers


def event_row(event: Obj, *, wide: bool, all_ns: bool) -> list[str | Text]:
    involved = event.get("involvedObject") or {}
    obj = f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"
    row: list[str | Text] = [
        age(jobstate.event_time(event)),
        styled(str(event.get("type", ""))),
        str(event.get("reason", "")),
        obj,
    ]
    if wide:
        source = event.get("source") or {}
        row += [str(source.get("component") or event.get("reportingComponent") or ""), str(event.get("count") or 1)]
    row.append(str(event.get("message", "")).replace("\n", " "))
    return ([event["metadata"].get("namespace", "")] if all_ns else []) + row


def event_headers(*, wide: bool, all_ns: bool) -> list[str]:
    headers = ["LAST SEEN", "TYPE", "REASON", "OBJECT"] + (["SOURCE", "COUNT"] if wide else []) + ["MESSAGE"]
    return (["NAMESPACE"] if all_ns else []) + headers


# -- printing -----------------------------------------------------------------------------------


def _clean(obj: Obj) -> Obj:
    return dict(json.loads(json.dumps(obj, default=str)))


def print_objects(objs: list[Obj], output: str, *, single: bool) -> None:
    if output == "name":
        for o in objs:
            group = o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else ""
            out.print(Text(f"{o['kind'].lower()}{'.' + group if group else ''}/{o['metadata']['name']}"))
        return
    body: Obj = objs[0] if single and len(objs) == 1 else {"apiVersion": "v1", "kind": "List", "items": objs}
    body = _clean(body)
    if output == "json":
        out.print(Text(json.dumps(body, indent=4)))
    else:
        out.print(Text(yaml.safe_dump(body, sort_keys=False).rstrip("\n")))


def with_kind(obj: Obj, api_version: str, kind: str) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        **{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")},
    }
