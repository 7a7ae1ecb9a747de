"""``yard logs`` and ``yard run``: a distributed job's logs as one stream, and a job run like a command.

``yard run -f job.yaml`` applies the job, streams every replica's log, keeps a progress line, and
exits 0 only if the job Succeeded (1 with the failure reason if it Failed, 2 on timeout, 130 on
Ctrl-C, after offering to delete the job).
"""

from __future__ import annotations

import re
import sys
from typing import Annotated

import typer
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Pod
from rich.text import Text

from trainyard.api.meta import Obj
from trainyard.cli.common import api, err, fail, handled, kinds_of
from trainyard.cli.lookup import NotFoundError, find_job, split_target
from trainyard.cli.progress import Prefixes, follow_run, print_line
from trainyard.client.resources import is_status, to_dict
from trainyard.sdk import jobstate, logs, manifests
from trainyard.sdk.kinds import JobKind

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s)")


def parse_since(text: str | None) -> int | None:
    """``--since 90s | 5m | 1h30m`` in whole seconds (at least 1, as the API wants)."""
    if not text:
        return None
    parts = _DURATION.findall(text)
    if not parts or "".join(f"{n}{u}" for n, u in parts) != text:
        raise typer.BadParameter(f"{text!r} is not a duration such as 30s, 5m or 1h", param_hint="--since")
    seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    return max(1, int(seconds))


def select_pods(pods: list[Obj], replica: str | None) -> list[Obj]:
    """``worker-1`` picks one replica, ``worker`` every replica of a type, a pod name that pod."""
    if not replica:
        return pods
    wanted = replica.lower()
    return [
        p
        for p in pods
        if jobstate.replica_name(p) == wanted
        or jobstate.replica_name(p).rsplit("-", 1)[0] == wanted
        or p["metadata"]["name"] == replica
    ]


def register(app: typer.Typer) -> None:
    @app.command(
        "logs",
        help="Print a job's logs: every replica interleaved with a [replica] prefix, or one with --replica. "
        "A pod's name prints that pod's log.",
    )
    @handled
    def logs_(
        target: Annotated[str, typer.Argument(help="JOB, KIND/JOB, or a pod name")],
        replica: Annotated[
            str | None, typer.Option("--replica", "-r", help="one replica (worker-1) or one type (worker)")
        ] = None,
        follow: Annotated[bool, typer.Option("-f", "--follow", help="keep printing until the job finishes")] = False,
        tail: Annotated[int | None, typer.Option("--tail", help="the last N lines of each replica")] = None,
        since: Annotated[str | None, typer.Option("--since", help="only lines newer than this (30s, 5m, 1h)")] = None,
        container: Annotated[
            str | None, typer.Option("-c", "--container", help="container (default: the job's)")
        ] = None,
        prefix: Annotated[
            bool | None, typer.Option("--prefix/--no-prefix", help="tag lines with the replica (default: when several)")
        ] = None,
        namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="namespace")] = None,
    ) -> None:
        since_s = parse_since(since)
        if tail is not None and tail < 0:
            fail("--tail must be 0 or more")
        client = api(namespace)
        kind_word, name = split_target(target, None)
        try:
            kind, job = find_job(client, kind_word, name, client.namespace)
        except NotFoundError:
            if "/" in target:
                raise
            _pod_logs(client, target, container=container, follow=follow, tail=tail, since=since_s)
            return
        ns = job["metadata"]["namespace"]
        pods = select_pods(jobstate.job_pods(client, kind, name, ns), replica)
        if replica and not pods:
            have = ", ".join(jobstate.replica_name(p) for p in jobstate.job_pods(client, kind, name, ns)) or "none"
            fail(f"{kind.singular} {name} has no replica {replica!r} (it has: {have})")
        several = prefix if prefix is not None else (len(pods) > 1 or not replica)
        prefixes = Prefixes([jobstate.replica_name(p) for p in pods]) if several else None
        chosen = container or kind.default_container
        if not follow:
            for line in logs.read(client, pods, container=chosen, tail=tail, since=since_s):
                print_line(line, prefixes)
            return

        def job_done() -> bool:
            try:
                job_now = to_dict(client.get(kind.resource, name, namespace=ns))
                return jobstate.finished(job_now, kind.view) is not None
            except ApiError as exc:
                return is_status(exc, 404)

        def current_pods() -> list[Obj]:
            return select_pods(jobstate.job_pods(client, kind, name, ns), replica)

        try:
            for line in logs.follow(client, current_pods, job_done, container=chosen, tail=tail, since=since_s):
                print_line(line, prefixes)
        except KeyboardInterrupt:
            raise typer.Exit(130) from None

    @app.command(
        help="Apply a job, stream all its replicas' logs with a progress line, and exit 0 only if it Succeeded."
    )
    @handled
    def run(
        filename: Annotated[str, typer.Option("-f", "--filename", help="the job's manifest (one job), or - for stdin")],
        timeout: Annotated[float, typer.Option(help="give up after this many seconds (exit 2)")] = 3600,
        logs_: Annotated[bool, typer.Option("--logs/--no-logs", help="stream the replicas' logs")] = True,
        namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="namespace")] = None,
    ) -> None:
        client = api(namespace)
        kinds = kinds_of(client)
        docs = manifests.load(filename)
        if len(docs) != 1:
            fail(f"{filename}: `yard run` runs one job; this holds {len(docs)} documents (use `yard apply`)")
        doc = docs[0]
        kind = manifests.check(doc, kinds)
        ns = (doc.body.get("metadata") or {}).get("namespace") or client.namespace
        name = doc.body["metadata"].get("name")
        if name:
            try:
                existing = to_dict(client.get(kind.resource, name, namespace=ns))
            except ApiError as exc:
                if not is_status(exc, 404):
                    raise
                existing = None
            over = jobstate.finished(existing, kind.view) if existing is not None else None
            if over:
                fail(
                    f"{kind.singular}/{name} already exists and {over}; delete it first "
                    f"(`yard delete {kind.singular} {name}`)"
                )
        job, outcome = manifests.apply(client, doc, kind, ns)
        name = job["metadata"]["name"]
        err.print(Text(f"{kind.singular}.{kind.group}/{name} {outcome}"))
        try:
            code = follow_run(client, kind, name, ns, timeout=timeout, show_logs=logs_)
        except KeyboardInterrupt:
            code = _interrupted(client, kind, name, ns)
        raise typer.Exit(code)


def _pod_logs(
    client: Client,
    pod: str,
    *,
    container: str | None,
    follow: bool,
    tail: int | None,
    since: int | None,
) -> None:
    try:
        found = to_dict(client.get(Pod, pod, namespace=client.namespace))
    except ApiError as exc:
        if is_status(exc, 404):
            fail(f"no job or pod named {pod!r} in namespace {client.namespace}")
        raise
    try:
        for raw in client.log(
            pod,
            namespace=client.namespace,
            container=logs.container_of(found, container),
            follow=follow,
            tail_lines=tail,
            since=since,
        ):
            sys.stdout.write(raw)
            sys.stdout.flush()
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _interrupted(client: Client, kind: JobKind, name: str, ns: str) -> int:
    err.print()
    # Asked on stderr and read from stdin directly: click's prompt writes a space to stdout.
    err.print(Text(f"Interrupted. Delete {kind.singular}/{name}? [y/N]: "), end="")
    try:
        answer = sys.stdin.readline() if sys.stdin is not None else ""
    except (KeyboardInterrupt, OSError, ValueError):
        answer = ""
    delete = answer.strip().lower() in ("y", "yes")
    if delete:
        client.delete(kind.resource, name, namespace=ns)
        err.print(Text(f"{kind.singular}.{kind.group}/{name} deleted"))
    else:
        err.print(Text(f"{kind.singular}/{name} keeps running; `yard delete {kind.singular} {name}` stops it"))
    return 130
