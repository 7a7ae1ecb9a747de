"""``yard apply | get | describe | delete | wait``: kubectl's verbs for training jobs, over the SDK views.

Any job kind the cluster serves works (``sdk.kinds``); ``jobs`` means all of them.
"""

from __future__ import annotations

import json
import queue
import re
import threading
from collections.abc import Callable
from typing import Annotated, Any

import typer
import yaml
from lightkube import ALL_NS, Client, operators
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Event, Pod
from rich.text import Text

from trainyard.api import jobview, training
from trainyard.api.families import default_family
from trainyard.api.jobview import COMMON_COLUMNS
from trainyard.cli.common import age, api, err, fail, handled, kinds_of, out, styled, table
from trainyard.cli.lookup import NotFoundError, find_job, split_target
from trainyard.cli.progress import pod_status_word, wait_for
from trainyard.client.resources import is_status, to_dict
from trainyard.sdk import explain, jobstate, manifests
from trainyard.sdk import replicas as pod_views
from trainyard.sdk.kinds import JobKind, builtin_kinds, default_kind, resolve

Obj = dict[str, Any]
POD_WORDS = ("pod", "pods", "po")
EVENT_WORDS = ("event", "events", "ev")
OUTPUTS = ("wide", "yaml", "json", "name")
# Examples in help and messages: trainyard's default kind (the cluster may serve more).
EXAMPLE_KIND = default_kind().singular


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


def _with_kind(obj: Obj, api_version: str, kind: str) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        **{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")},
    }


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


# -- commands -----------------------------------------------------------------------------------


def register(app: typer.Typer) -> None:
    @app.command(help="Create or update the jobs of manifest files, a directory of them, or - for stdin.")
    @handled
    def apply(
        filename: Annotated[
            list[str], typer.Option("-f", "--filename", help="a manifest file, a directory, or - (stdin); repeatable")
        ],
    ) -> None:
        # Every document is read and checked before the first is sent: a bad file changes nothing.
        docs = [doc for path in filename for doc in manifests.load(path)]
        client = api()
        kinds = kinds_of(client)
        checked = [(doc, manifests.check(doc, kinds)) for doc in docs]
        for doc, kind in checked:
            obj, outcome = manifests.apply(client, doc, kind, client.namespace)
            out.print(Text(f"{kind.singular}.{kind.group}/{obj['metadata']['name']} {outcome}"))

    @app.command(help="List jobs (any served kind, or 'jobs' for all), pods or events.")
    @handled
    def get(
        what: Annotated[
            str,
            typer.Argument(
                help=f"jobs | <kind> ({', '.join(kind_words())}, ...) | pods | events", autocompletion=complete_kind
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
        else:
            kinds = resolve(what, kinds_of(client))
            _get_jobs(client, kinds, name, ns, labels_ or None, output, wide, all_namespaces, watch, word)

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

    @app.command(help="Delete jobs (their pods and services go with them).")
    @handled
    def delete(
        target: Annotated[str, typer.Argument(help="<kind> | job | KIND/NAME")],
        names: Annotated[list[str] | None, typer.Argument(help="names of the jobs")] = None,
        ignore_not_found: Annotated[bool, typer.Option("--ignore-not-found", help="a missing job is no error")] = False,
        namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="namespace")] = None,
    ) -> None:
        client = api(namespace)
        if "/" in target:
            kind_word, first = target.split("/", 1)
            wanted = [first, *(names or [])]
        else:
            kind_word, wanted = target, list(names or [])
        if not wanted:
            fail(f"name the job(s) to delete, e.g. `yard delete {EXAMPLE_KIND} NAME`")
        for job_name in wanted:
            try:
                kind, _ = find_job(client, kind_word, job_name, client.namespace)
            except NotFoundError as exc:
                if ignore_not_found:
                    continue
                fail(str(exc))
            client.delete(kind.resource, job_name, namespace=client.namespace)
            out.print(Text(f"{kind.singular}.{kind.group}/{job_name} deleted"))

    @app.command(help="Wait for a job to finish, showing its progress (exit 1 if it fails).")
    @handled
    def wait(
        target: Annotated[str, typer.Argument(help=f"KIND/NAME, e.g. {EXAMPLE_KIND}/pytorch-ddp")],
        timeout: Annotated[float, typer.Option(help="seconds")] = 600,
        namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="namespace")] = None,
    ) -> None:
        client = api(namespace)
        kind_word, job_name = split_target(target, None)
        kind, _ = find_job(client, kind_word, job_name, client.namespace)
        raise typer.Exit(wait_for(client, kind, job_name, client.namespace, timeout=timeout))


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
        objs = [_with_kind(j, k.api_version, k.kind) for k, j in found]
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
                print_objects([_with_kind(obj, kind.api_version, kind.kind)], output, single=True)
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
    pods = [_with_kind(p, "v1", "Pod") for p in pods]
    if output in ("json", "yaml", "name") and not watch:
        print_objects(pods, output, single=bool(name))
        return
    headers = pod_headers(wide=wide, all_ns=all_ns)
    if not pods and not watch:
        err.print(Text(f"No pods found in {'any namespace' if all_ns else f'namespace {client.namespace}'}."))
        return
    if not watch:
        table(headers, [pod_row(p, wide=wide, all_ns=all_ns) for p in pods])
        return
    table(headers, [])

    def show(obj: Obj) -> None:
        if name and obj["metadata"]["name"] != name:
            return
        if output in ("json", "yaml", "name"):
            print_objects([_with_kind(obj, "v1", "Pod")], output, single=True)
        else:
            table(headers, [pod_row(obj, wide=wide, all_ns=all_ns)], header=False)

    watch_all(client, [(Pod, show)], ns, selector)


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
    events = [_with_kind(e, "v1", "Event") for e in events]
    if output in ("json", "yaml", "name") and not watch:
        print_objects(events, output, single=bool(name))
        return
    headers = event_headers(wide=wide, all_ns=all_ns)
    if not events and not watch:
        err.print(Text(f"No events found in {'any namespace' if all_ns else f'namespace {client.namespace}'}."))
        return
    if not watch:
        table(headers, [event_row(e, wide=wide, all_ns=all_ns) for e in events])
        return
    table(headers, [])

    def show(obj: Obj) -> None:
        if wanted(obj):
            table(headers, [event_row(obj, wide=wide, all_ns=all_ns)], header=False)

    watch_all(client, [(Event, show)], ns, None)


# -- describe -----------------------------------------------------------------------------------


def _field(label: str, value: str | Text) -> None:
    line = Text(f"{label + ':':<14}")
    line.append_text(value if isinstance(value, Text) else Text(value))
    out.print(line)


def describe_job(client: Client, kind: JobKind, job: Obj) -> None:
    meta = job["metadata"]
    view = kind.view
    namespace = meta.get("namespace") or client.namespace
    pods = jobstate.job_pods(client, kind, meta["name"], namespace)
    events = jobstate.pod_events(
        client,
        namespace,
        jobstate.event_names(kind, meta["name"], pods),
        {meta.get("uid", ""), *(p["metadata"].get("uid", "") for p in pods)},
    )
    _field("Name", meta["name"])
    _field("Namespace", namespace)
    _field("Kind", f"{kind.kind} ({kind.api_version})")
    _field("State", styled(jobstate.state(job, view)))
    _field("Created", f"{meta.get('creationTimestamp', '')} ({age(meta.get('creationTimestamp'))} ago)")
    for label, value in view.fields(job):
        _field(label, value)
    reasons = explain.why(job, pods, events, container=kind.default_container, view=view)
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
