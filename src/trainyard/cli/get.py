"""``yard get``: kubectl's listing of jobs (any served kind, or ``jobs`` for all), pods and events,
with label selectors and ``--watch``.
"""

from __future__ import annotations

import functools
import queue
import re
import threading
from collections.abc import Callable
from typing import Annotated, Any

import typer
from lightkube import ALL_NS, Client, operators
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Event, Pod
from rich.text import Text

from trainyard.api.families import default_family
from trainyard.api.kueue import views
from trainyard.api.meta import Obj
from trainyard.cli.common import api, err, fail, handled, kinds_of, out, table
from trainyard.cli.lookup import NotFoundError, find_job, split_target
from trainyard.cli.tables import (
    event_headers,
    event_row,
    job_columns,
    job_headers,
    job_row,
    pod_headers,
    pod_row,
    print_objects,
    with_kind,
)
from trainyard.client.resources import is_status, to_dict
from trainyard.sdk import jobstate, queues
from trainyard.sdk.kinds import JobKind, builtin_kinds, resolve

POD_WORDS = ("pod", "pods", "po")
EVENT_WORDS = ("event", "events", "ev")
QUEUE_WORDS = ("queue", "queues")
OUTPUTS = ("wide", "yaml", "json", "name")


def kind_words() -> list[str]:
    """The words of trainyard's own kinds that completion offers: plurals and short names."""
    return [word for kind in builtin_kinds() for word in (kind.plural, *kind.short_names)]


def complete_kind(incomplete: str) -> list[str]:
    words = ["jobs", *POD_WORDS[1:2], *EVENT_WORDS[1:2], *kind_words()]
    return [w for w in words if w.startswith(incomplete)]


def complete_output(incomplete: str) -> list[str]:
    return [o for o in OUTPUTS if o.startswith(incomplete)]


# -- label selectors ----------------------------------------------------------------------------

_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def parse_selector(text: str | None) -> dict[str, Any] | None:
    """kubectl's ``-l`` syntax (``a=b,c!=d,e,!f,g in (x,y)``) as lightkube's selector dict."""
    if not text:
        return None
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    out_: dict[str, Any] = {}
    for raw in (p.strip() for p in parts):
        if not raw:
            continue
        if m := _SET.match(raw):
            values = [v.strip() for v in m.group(3).split(",") if v.strip()]
            out_[m.group(1)] = operators.in_(values) if m.group(2) == "in" else operators.not_in(values)
        elif "!=" in raw:
            key, value = raw.split("!=", 1)
            out_[key.strip()] = operators.not_equal(value.strip())
        elif "=" in raw:
            key, value = raw.replace("==", "=").split("=", 1)
            out_[key.strip()] = value.strip()
        elif raw.startswith("!"):
            out_[raw[1:].strip()] = operators.not_exists()
        else:
            out_[raw] = operators.exists()
    return out_


# -- watching -----------------------------------------------------------------------------------


def watch_all(client: Client, sources: list[tuple[Any, Callable[[Obj], None]]], namespace: Any, selector: Any) -> None:
    """Print every change of several resources as it comes (Ctrl-C ends it)."""
    changes: queue.Queue[tuple[Callable[[Obj], None], Obj]] = queue.Queue()

    def pump(res: Any, show: Callable[[Obj], None]) -> None:
        for _kind, obj in client.watch(res, namespace=namespace, labels=selector):
            changes.put((show, to_dict(obj)))

    for res, show in sources:
        threading.Thread(target=pump, args=(res, show), daemon=True).start()
    try:
        while True:
            try:
                show, obj = changes.get(timeout=0.5)  # a timeout keeps Ctrl-C prompt
            except queue.Empty:
                continue
            show(obj)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


# -- the command --------------------------------------------------------------------------------


def register(app: typer.Typer) -> None:
    @app.command(help="List jobs (any served kind, or 'jobs' for all), pods, events or Kueue queues.")
    @handled
    def get(
        what: Annotated[
            str,
            typer.Argument(
                help=f"jobs | <kind> ({', '.join(kind_words())}, ...) | pods | events | queues",
                autocompletion=complete_kind,
            ),
        ],
        name: Annotated[str | None, typer.Argument(help="only this one")] = None,
        output: Annotated[
            str | None, typer.Option("-o", "--output", help="wide | yaml | json | name", autocompletion=complete_output)
        ] = None,
        watch: Annotated[bool, typer.Option("-w", "--watch", help="after listing, print every change")] = False,
        all_namespaces: Annotated[bool, typer.Option("-A", "--all-namespaces", help="across all namespaces")] = False,
        selector: Annotated[
            str | None, typer.Option("-l", "--selector", help="label selector, e.g. app=x,tier!=y")
        ] = None,
        job: Annotated[str | None, typer.Option("--job", help="pods or events of this job only")] = None,
        namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="namespace")] = None,
    ) -> None:
        if output not in (None, *OUTPUTS):
            fail(f"--output {output!r}: expected one of {', '.join(OUTPUTS)}")
        client = api(namespace)
        ns: Any = ALL_NS if all_namespaces else client.namespace
        wide = output == "wide"
        labels_ = parse_selector(selector) or {}
        word = what.lower().split(".")[0]
        if word in POD_WORDS:
            if job:
                labels_.update(_job_pod_labels(client, job))
            _get_pods(client, name, ns, labels_ or None, output, wide, all_namespaces, watch)
        elif word in EVENT_WORDS:
            _get_events(client, name, ns, job, output, wide, all_namespaces, watch)
        elif word in QUEUE_WORDS:
            _get_queues(client, None if all_namespaces else client.namespace)
        else:
            kinds = resolve(what, kinds_of(client))
            _get_jobs(client, kinds, name, ns, labels_ or None, output, wide, all_namespaces, watch, word)


def _get_jobs(
    client: Client,
    kinds: list[JobKind],
    name: str | None,
    ns: Any,
    selector: Any,
    output: str | None,
    wide: bool,
    all_ns: bool,
    watch: bool,
    word: str,
) -> None:
    found: list[tuple[JobKind, Obj]] = []
    for kind in kinds:
        if name:
            try:
                found.append((kind, to_dict(client.get(kind.resource, name, namespace=client.namespace))))
            except ApiError as exc:
                if not is_status(exc, 404):
                    raise
        else:
            found += [(kind, to_dict(j)) for j in client.list(kind.resource, namespace=ns, labels=selector)]
    if name and not found and not watch:
        what = kinds[0].singular if len(kinds) == 1 else "job"
        fail(f'{what} "{name}" not found in namespace {client.namespace}')
    show_kind = len(kinds) > 1
    if output in ("json", "yaml", "name") and not watch:
        objs = [with_kind(j, k.api_version, k.kind) for k, j in found]
        print_objects(objs, output, single=bool(name))
        return
    columns = job_columns(kinds, wide=wide)
    headers = job_headers(columns, wide=wide, all_ns=all_ns, show_kind=show_kind)
    if not found and not watch:
        where = "any namespace" if all_ns else f"namespace {client.namespace}"
        err.print(Text(f"No {kinds[0].plural if len(kinds) == 1 else 'jobs'} found in {where}."))
        return
    if not watch:
        table(headers, [job_row(j, k, columns, wide=wide, all_ns=all_ns, show_kind=show_kind) for k, j in found])
        return
    table(headers, [])

    def shower(kind: JobKind) -> Callable[[Obj], None]:
        def show(obj: Obj) -> None:
            if name and obj["metadata"]["name"] != name:
                return
            if output in ("json", "yaml", "name"):
                print_objects([with_kind(obj, kind.api_version, kind.kind)], output, single=True)
            else:
                row = job_row(obj, kind, columns, wide=wide, all_ns=all_ns, show_kind=show_kind)
                table(headers, [row], header=False)

        return show

    watch_all(client, [(k.resource, shower(k)) for k in kinds], ns, selector)


def _job_pod_labels(client: Client, job: str) -> dict[str, str]:
    """``--job [KIND/]NAME``: the labels its family puts on its pods (the default family's when none is found)."""
    kind_word, name = split_target(job, None)
    try:
        kind, _ = find_job(client, kind_word, name, client.namespace)
    except NotFoundError:
        return dict(default_family().view.pod_labels(name))
    return dict(kind.view.pod_labels(name))


def _get_pods(
    client: Client,
    name: str | None,
    ns: Any,
    selector: Any,
    output: str | None,
    wide: bool,
    all_ns: bool,
    watch: bool,
) -> None:
    if name and not watch:
        try:
            pods = [to_dict(client.get(Pod, name, namespace=client.namespace))]
        except ApiError as exc:
            if is_status(exc, 404):
                fail(f'pod "{name}" not found in namespace {client.namespace}')
            raise
    else:
        pods = [to_dict(p) for p in client.list(Pod, namespace=ns, labels=selector)]
    pods = [with_kind(p, "v1", "Pod") for p in pods]
    headers = pod_headers(wide=wide, all_ns=all_ns)
    row = functools.partial(pod_row, wide=wide, all_ns=all_ns)
    if _listed(client, "pods", pods, row, headers, output, single=bool(name), all_ns=all_ns, watch=watch):
        return

    def show(obj: Obj) -> None:
        if name and obj["metadata"]["name"] != name:
            return
        if output in ("json", "yaml", "name"):
            print_objects([with_kind(obj, "v1", "Pod")], output, single=True)
        else:
            table(headers, [pod_row(obj, wide=wide, all_ns=all_ns)], header=False)

    watch_all(client, [(Pod, show)], ns, selector)


def _listed(
    client: Client,
    word: str,
    objs: list[Obj],
    row: Callable[[Obj], list[str | Text]],
    headers: list[str],
    output: str | None,
    *,
    single: bool,
    all_ns: bool,
    watch: bool,
) -> bool:
    """Print a listing of pods or events as kubectl does; True when done (no watch follows),
    else the table's header is printed for the watch's rows."""
    if output in ("json", "yaml", "name") and not watch:
        print_objects(objs, output, single=single)
        return True
    if not objs and not watch:
        err.print(Text(f"No {word} found in {'any namespace' if all_ns else f'namespace {client.namespace}'}."))
        return True
    table(headers, [] if watch else [row(o) for o in objs])
    return not watch


def _get_queues(client: Client, namespace: str | None) -> None:
    """Kueue's ClusterQueues with their usage, then the LocalQueues (of one namespace, or all)."""
    queued = queues.snapshot(client)
    if not queued.config.cluster_queues and not queued.config.local_queues:
        err.print(Text("No queues found (no Kueue ClusterQueue or LocalQueue exists)."))
        return
    table(views.CLUSTER_QUEUE_HEADERS, views.cluster_queue_rows(queued.config, queued.decision))
    local = views.local_queue_rows(queued.config, queued.decision, namespace)
    if local:
        out.print()
        table(views.LOCAL_QUEUE_HEADERS, local)


def _get_events(
    client: Client,
    name: str | None,
    ns: Any,
    job: str | None,
    output: str | None,
    wide: bool,
    all_ns: bool,
    watch: bool,
) -> None:
    def wanted(e: Obj) -> bool:
        involved = (e.get("involvedObject") or {}).get("name", "")
        if name and e["metadata"]["name"] != name:
            return False
        return not job or involved == job or involved.startswith(f"{job}-")

    events = sorted(
        (e for e in (to_dict(x) for x in client.list(Event, namespace=ns)) if wanted(e)), key=jobstate.event_time
    )
    events = [with_kind(e, "v1", "Event") for e in events]
    headers = event_headers(wide=wide, all_ns=all_ns)
    row = functools.partial(event_row, wide=wide, all_ns=all_ns)
    if _listed(client, "events", events, row, headers, output, single=bool(name), all_ns=all_ns, watch=watch):
        return

    def show(obj: Obj) -> None:
        if wanted(obj):
            table(headers, [row(obj)], header=False)

    watch_all(client, [(Event, show)], ns, None)
