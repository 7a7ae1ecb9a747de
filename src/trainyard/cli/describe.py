"""``yard describe``: one job explained, kubectl-style: its fields, the Kueue queue it waits in
(its place in line and what it waits for: ``api.kueue.views``), why it is stuck (``sdk.explain``,
with ``yard doctor``'s findings: ``sdk.diagnosis``),
what its training reported, conditions, family sections, replicas and recent events.
"""

from __future__ import annotations

from typing import Annotated

import typer
from lightkube import Client
from rich.text import Text

from trainyard.api import jobview, training
from trainyard.api.kueue import views
from trainyard.api.kueue.integrations import queue_name
from trainyard.api.meta import Obj
from trainyard.cli.common import age, api, handled, out, styled, table
from trainyard.cli.lookup import find_job, split_target
from trainyard.cli.progress import pod_status_word
from trainyard.sdk import diagnosis, doctor, explain, jobstate, queues
from trainyard.sdk.kinds import JobKind


def register(app: typer.Typer) -> None:
    @app.command(help="Explain a job: conditions, replicas, recent events and, when it is stuck, why.")
    @handled
    def describe(
        target: Annotated[str, typer.Argument(help="job | <kind> | KIND/NAME | NAME")],
        name: Annotated[str | None, typer.Argument(help="the job's name")] = None,
        namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="namespace")] = None,
    ) -> None:
        client = api(namespace)
        kind_word, job_name = split_target(target, name)
        kind, job_obj = find_job(client, kind_word, job_name, client.namespace)
        describe_job(client, kind, job_obj)


# -- the description ----------------------------------------------------------------------------


def _field(label: str, value: str | Text) -> None:
    # A label as wide as the column still gets a space before its value.
    line = Text(f"{label + ':':<13} ")
    line.append_text(value if isinstance(value, Text) else Text(value))
    out.print(line)


def describe_job(client: Client, kind: JobKind, job: Obj) -> None:
    meta = job["metadata"]
    view = kind.view
    namespace = meta.get("namespace") or client.namespace
    # One reading serves the Why (``yard doctor``'s findings) and the tables below.
    snap = doctor.gather(client, kind, job)
    pods, events = list(snap.pods), list(snap.events)
    _field("Name", meta["name"])
    _field("Namespace", namespace)
    _field("Kind", f"{kind.kind} ({kind.api_version})")
    _field("State", styled(jobstate.state(job, view)))
    _field("Created", f"{meta.get('creationTimestamp', '')} ({age(meta.get('creationTimestamp'))} ago)")
    for label, value in view.fields(job):
        _field(label, value)
    if queue_name(job):
        queued = queues.snapshot(client)
        workload = queued.workload_of(job)
        if workload is not None:
            for label, value in views.waiting_lines(queued.config, queued.decision, workload):
                _field(label, value)
    reasons = explain.why(
        job, pods, events, container=kind.default_container, view=view, findings=diagnosis.diagnose(snap)
    )
    if reasons:
        out.print()
        out.print(Text("Why:", style="bold"))
        for line in reasons:
            out.print(Text(f"  {line}"))
    print_training(view, job)
    out.print()
    out.print(Text("Conditions:", style="bold"))
    rows: list[list[str | Text]] = [
        [
            styled(str(c.get("type", ""))),
            str(c.get("status", "")),
            str(c.get("reason", "")),
            age(c.get("lastTransitionTime")),
            str(c.get("message", "")),
        ]
        for c in jobstate.conditions(job)
    ]
    _indented(["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], rows)
    for title, headers, section in view.sections(job):
        out.print()
        out.print(Text(f"{title}:", style="bold"))
        _indented(headers, [list[str | Text](r) for r in section])
    out.print()
    out.print(Text(f"{view.replicas_title}:", style="bold"))
    _indented(["REPLICA", "POD", "STATUS", "RESTARTS", "EXIT", "NODE", "AGE"], _replica_rows(job, pods, kind))
    out.print()
    out.print(Text("Events:", style="bold"))
    recent = events[-15:]
    _indented(
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        [
            [
                age(jobstate.event_time(e)),
                styled(str(e.get("type", ""))),
                str(e.get("reason", "")),
                str((e.get("involvedObject") or {}).get("name", "")),
                str(e.get("message", "")).replace("\n", " "),
            ]
            for e in recent
        ],
    )


def print_training(view: jobview.JobView, job: Obj) -> None:
    """``describe``'s Training section: what the job's training code last reported, if anything."""
    reported = view.training(job)
    if reported is None:
        return
    out.print()
    out.print(Text("Training:", style="bold"))
    for label, value in training.fields(reported, over=view.outcome(job) is not None):
        # A label "" continues the one above (a metric per line), aligned under its value.
        out.print(Text(f"  {label + ':' if label else '':<14}{value}"))


def _indented(headers: list[str], rows: list[list[str | Text]]) -> None:
    if not rows:
        out.print(Text("  <none>"))
        return
    table(["  " + headers[0], *headers[1:]], [[Text("  ").append_text(_text(r[0])), *r[1:]] for r in rows])


def _text(value: str | Text) -> Text:
    return value if isinstance(value, Text) else Text(value)


def _replica_rows(job: Obj, pods: list[Obj], kind: JobKind) -> list[list[str | Text]]:
    """One row per wanted replica (``<type>-<index>``), with its pod if it has one."""
    by_replica = {jobstate.replica_name(p): p for p in pods}
    wanted = kind.view.wanted(job)
    rows: list[list[str | Text]] = []
    for replica in [*wanted, *(r for r in by_replica if r not in wanted)]:
        pod = by_replica.get(replica)
        if pod is None:
            rows.append([replica, "<none>", "-", "-", "-", "-", "-"])
            continue
        cs = jobstate.container_state(pod, kind.default_container)
        code = cs.exit_code if cs.exit_code is not None else cs.last_exit_code
        rows.append(
            [
                replica,
                pod["metadata"]["name"],
                styled(pod_status_word(pod)),
                str(cs.restarts),
                "-" if code is None else str(code),
                (pod.get("spec") or {}).get("nodeName") or "<none>",
                age(pod["metadata"].get("creationTimestamp")),
            ]
        )
    return rows
