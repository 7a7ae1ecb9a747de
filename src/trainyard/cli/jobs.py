"""``yard apply | get | wait | logs | delete``: thin commands over ``TrainingClient``."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lightkube.core.exceptions import ApiError

from trainyard.api.kinds import KINDS, KindInfo
from trainyard.api.meta import parse_time
from trainyard.cli.plane import layout_of
from trainyard.sdk.client import JobFailedError, TrainingClient


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    apply = sub.add_parser("apply", help="create or update the jobs in a manifest file")
    apply.add_argument("-f", "--filename", type=Path, required=True)
    apply.set_defaults(func=cmd_apply)
    get = sub.add_parser("get", help="show jobs and their state")
    get.add_argument("kind", help="pytorchjob(s), or a short name such as ptj")
    get.add_argument("name", nargs="?")
    get.set_defaults(func=cmd_get)
    wait = sub.add_parser("wait", help="wait for a job to finish, showing its progress")
    wait.add_argument("target", help="KIND/NAME, e.g. pytorchjob/pytorch-ddp")
    wait.add_argument("--timeout", type=float, default=600)
    wait.set_defaults(func=cmd_wait)
    logs = sub.add_parser("logs", help="print a pod's log")
    logs.add_argument("pod")
    logs.add_argument("-f", "--follow", action="store_true")
    logs.add_argument("--tail", type=int, default=None)
    logs.add_argument("-c", "--container", default=None)
    logs.set_defaults(func=cmd_logs)
    delete = sub.add_parser("delete", help="delete a job (its pods and services go with it)")
    delete.add_argument("kind")
    delete.add_argument("name")
    delete.add_argument("--ignore-not-found", action="store_true")
    delete.set_defaults(func=cmd_delete)


def kind_of(text: str) -> KindInfo:
    wanted = text.lower()
    for info in KINDS.values():
        if wanted in (info.plural, info.singular, info.kind.lower(), *info.short_names):
            return info
    known = ", ".join(i.plural for i in KINDS.values())
    raise SystemExit(f"error: unknown job kind {text!r}; known kinds: {known}")


def client_of(args: argparse.Namespace) -> TrainingClient:
    kubeconfig = args.kubeconfig or layout_of(args).kubeconfig
    if not Path(kubeconfig).exists():
        raise SystemExit(
            f"error: no kubeconfig at {kubeconfig}; start the control plane with `yard up` or pass --kubeconfig"
        )
    return TrainingClient(kubeconfig, namespace=args.namespace)


def cmd_apply(args: argparse.Namespace) -> int:
    for obj, outcome in client_of(args).apply_file(args.filename):
        print(f"{obj['kind'].lower()}.{obj['apiVersion'].split('/')[0]}/{obj['metadata']['name']} {outcome}")
    return 0


def state_of(job: dict[str, Any]) -> str:
    conditions = (job.get("status") or {}).get("conditions") or []
    return str(conditions[-1]["type"]) if conditions else "Pending"


def age(since: str | None) -> str:
    if not since:
        return "?"
    seconds = int((datetime.now(UTC) - parse_time(since)).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def replicas_summary(job: dict[str, Any]) -> str:
    statuses = (job.get("status") or {}).get("replicaStatuses") or {}
    parts = []
    for rtype, rs in statuses.items():
        bits = [f"{rs.get(k)} {k}" for k in ("active", "succeeded", "failed") if rs.get(k)]
        parts.append(f"{rtype}: {', '.join(bits) or '-'}")
    return "; ".join(parts) or "-"


def print_jobs(jobs: list[dict[str, Any]]) -> None:
    rows = [("NAME", "STATE", "AGE", "REPLICAS")]
    rows += [
        (j["metadata"]["name"], state_of(j), age(j["metadata"].get("creationTimestamp")), replicas_summary(j))
        for j in jobs
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print("   ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "   " + row[3])


def cmd_get(args: argparse.Namespace) -> int:
    info = kind_of(args.kind)
    client = client_of(args)
    jobs = [client.get_job(args.name, kind=info.kind)] if args.name else client.list_jobs(kind=info.kind)
    if not jobs:
        print(f"No {info.plural} found in namespace {client.namespace}.")
        return 0
    print_jobs(jobs)
    return 0


def pod_state(pod: dict[str, Any]) -> str:
    """The phase, plus why a container is stuck, so a wait that cannot finish says so."""
    status = pod.get("status") or {}
    phase = str(status.get("phase", "Pending"))
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") not in (None, "ContainerCreating"):
            return f"{phase} ({waiting['reason']}: {waiting.get('message', '')})"
    return phase


def cmd_wait(args: argparse.Namespace) -> int:
    kind_text, _, name = args.target.partition("/")
    info = kind_of(kind_text)
    client = client_of(args)
    start = time.monotonic()
    print(f"waiting for {info.singular}/{name} (timeout {args.timeout:.0f}s)", flush=True)
    last: tuple[str, ...] = ()

    def progress(job: dict[str, Any]) -> None:
        nonlocal last
        pods = client.get_job_pods(name, kind=info.kind)
        phases = ", ".join(
            f"{p['metadata']['name'].removeprefix(name + '-')} {pod_state(p)}"
            for p in sorted(pods, key=lambda p: p["metadata"]["name"])
        )
        line = ""
        master = next(
            (p for p in pods if p["metadata"]["labels"].get("training.kubeflow.org/job-role") == "master"),
            None,
        )
        if master is not None and (master.get("status") or {}).get("phase") in (
            "Running",
            "Succeeded",
            "Failed",
        ):
            try:
                text = "".join(
                    client.stream_pod_log(master["metadata"]["name"], container=info.default_container, tail_lines=1)
                )
                line = text.strip()
            except ApiError:
                line = ""
        current = (state_of(job), phases, line)
        if current != last:
            last = current
            shown = f" | {line}" if line else ""
            print(
                f"  [{time.monotonic() - start:6.1f}s] {current[0]:<10} pods: {phases or 'none yet'}{shown}",
                flush=True,
            )

    try:
        client.wait_for_job_conditions(name, kind=info.kind, timeout=args.timeout, callback=progress)
    except JobFailedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except TimeoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{info.singular}/{name} succeeded in {time.monotonic() - start:.1f}s")
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    client = client_of(args)
    for line in client.stream_pod_log(args.pod, container=args.container, follow=args.follow, tail_lines=args.tail):
        sys.stdout.write(line)
        sys.stdout.flush()
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    info = kind_of(args.kind)
    try:
        client_of(args).delete_job(args.name, kind=info.kind)
    except ApiError as exc:
        if args.ignore_not_found and getattr(exc.status, "code", None) == 404:
            return 0
        raise
    print(f"{info.singular}.{info.group}/{args.name} deleted")
    return 0
