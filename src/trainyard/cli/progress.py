"""A running job as the terminal shows it: the one-line progress, log lines with replica prefixes,
and following a job to its end (``yard run`` and ``yard wait``).

The progress line is the job's state, what its training code reported (``api.training``: percent,
epoch, loss, accuracy, ETA) once it has, and its replicas' states.
"""

from __future__ import annotations

import time
from typing import Any

from lightkube import Client
from rich.text import Text

from trainyard.api import training
from trainyard.api.meta import Obj
from trainyard.cli.common import err, out
from trainyard.client.resources import to_dict
from trainyard.sdk import explain, jobstate, logs
from trainyard.sdk.kinds import JobKind

PREFIX_STYLES = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")


class Prefixes:
    """A stable colour per replica, and the prefixes padded to one width so the lines align."""

    def __init__(self, replicas: list[str]) -> None:
        self.styles: dict[str, str] = {}
        self.width = max((len(r) for r in replicas), default=0)
        for r in replicas:
            self.style(r)

    def style(self, replica: str) -> str:
        if replica not in self.styles:
            self.styles[replica] = PREFIX_STYLES[len(self.styles) % len(PREFIX_STYLES)]
            self.width = max(self.width, len(replica))
        return self.styles[replica]

    def line(self, line: logs.LogLine) -> Text:
        text = Text(f"[{line.replica}]".ljust(self.width + 2), style=self.style(line.replica))
        text.append(" " + line.text)
        return text


def print_line(line: logs.LogLine, prefixes: Prefixes | None) -> None:
    out.print(prefixes.line(line) if prefixes else Text(line.text), overflow="ignore", crop=False)


def pod_status_word(pod: Obj) -> str:
    """kubectl's STATUS column: a waiting or terminated reason, else the phase."""
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    cs = jobstate.container_state(pod)
    if (cs.reason and cs.reason not in ("Completed",)) or (cs.phase == "Pending" and cs.reason):
        return cs.reason
    if cs.phase == "Succeeded":
        return "Completed"
    return cs.phase


def pods_line(pods: list[Obj]) -> str:
    return ", ".join(f"{jobstate.replica_name(p)} {pod_status_word(p)}" for p in pods) or "no pods yet"


def progress_line(kind: JobKind, name: str, job: Obj, pods: list[Obj]) -> str:
    """``pytorchjob/ddp: Running  45%  epoch 2/10  loss 0.451  acc 0.892  ETA 3m10s  (master-0 Running)``."""
    view = kind.view
    reported = training.summary(view.training(job), over=view.outcome(job) is not None)
    state = jobstate.state(job, view) + (f"  {reported}  " if reported else " ")
    return f"{kind.singular}/{name}: {state}({pods_line(pods)})"


class Progress:
    """The job's state, training and replicas in one line: a live status on a terminal, else a line per change."""

    def __init__(self, kind: JobKind, name: str) -> None:
        self.kind, self.name = kind, name
        self.start = time.monotonic()
        self.last = ""
        self.status = err.status("") if err.is_terminal else None
        if self.status is not None:
            self.status.start()

    def update(self, job: Obj, pods: list[Obj]) -> None:
        # Off a terminal every change is a new line: a new report (loss, epoch) is one.
        text = progress_line(self.kind, self.name, job, pods)
        if text == self.last:
            if self.status is not None:
                self.status.update(f"{text} [{time.monotonic() - self.start:.0f}s]")
            return
        self.last = text
        if self.status is not None:
            self.status.update(f"{text} [{time.monotonic() - self.start:.0f}s]")
        else:
            err.print(Text(f"--- [{time.monotonic() - self.start:6.1f}s] {text}", style="dim"))

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()


def follow_run(client: Client, kind: JobKind, name: str, ns: str, *, timeout: float, show_logs: bool) -> int:
    """Stream the job's logs until it finishes; the exit code its outcome deserves."""
    deadline = time.monotonic() + timeout
    progress = Progress(kind, name)
    seen: dict[str, Any] = {"job": None, "pods": []}

    def job_done() -> bool:
        job = to_dict(client.get(kind.resource, name, namespace=ns))
        pods = jobstate.job_pods(client, kind, name, ns)
        seen["job"], seen["pods"] = job, pods
        progress.update(job, pods)
        if time.monotonic() > deadline and not jobstate.finished(job, kind.view):
            raise TimeoutError
        return jobstate.finished(job, kind.view) is not None

    try:
        if show_logs:
            prefixes = Prefixes([])
            stream = logs.follow(client, lambda: seen["pods"], job_done, container=kind.default_container)
            for line in stream:
                # On a terminal the live status redirects stdout, so log lines scroll above it.
                print_line(line, prefixes)
        else:
            while not job_done():
                time.sleep(1.0)
    except TimeoutError:
        progress.stop()
        err.print(
            Text(f"error: {kind.singular}/{name} did not finish in {timeout:.0f}s; it is still there", style="red")
        )
        return 2
    finally:
        progress.stop()
    job = seen["job"] or to_dict(client.get(kind.resource, name, namespace=ns))
    elapsed = time.monotonic() - progress.start
    if jobstate.finished(job, kind.view) == kind.view.succeeded:
        err.print(Text(f"{kind.singular}/{name} succeeded in {elapsed:.1f}s", style="green"))
        return 0
    failed = jobstate.condition(job, kind.view.failed) or {}
    err.print(
        Text(f"error: {kind.singular}/{name} failed: {failed.get('message') or failed.get('reason')}", style="red")
    )
    events = jobstate.pod_events(client, ns, jobstate.event_names(kind, name, seen["pods"]), set())
    for reason in (explain.why(job, seen["pods"], events, container=kind.default_container, view=kind.view) or [])[1:]:
        err.print(Text(f"  {reason}"))
    return 1


def wait_for(client: Client, kind: JobKind, name: str, ns: str, *, timeout: float) -> int:
    """``yard wait``: progress lines until the job finishes; 0 Succeeded, 1 Failed, 2 timed out."""
    out.print(Text(f"waiting for {kind.singular}/{name} (timeout {timeout:.0f}s)"))
    try:
        return follow_run(client, kind, name, ns, timeout=timeout, show_logs=False)
    except KeyboardInterrupt:
        return 130
