"""A distributed job's logs as one stream: every replica's lines, tagged with the replica, in time order.

``read`` merges the replicas' logs by their timestamps; ``follow`` streams them as they are
written, picks up pods created later (recreated after a failure, scaled up) and restarted
containers, and ends when the job has finished and every stream has ended.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Pod

from trainyard.api.meta import Obj
from trainyard.sdk.jobstate import replica_name

# How long streams of a finished job's pods may go on before follow() ends anyway.
FINISH_GRACE = 3.0


@dataclass(frozen=True)
class LogLine:
    replica: str  # "worker-1"
    pod: str
    stamp: str  # RFC 3339 from the server; sorts in time order
    text: str  # without its newline


def _split(raw: str) -> tuple[str, str]:
    stamp, _, text = raw.rstrip("\n").partition(" ")
    return stamp, text


def when(stamp: str) -> str:
    """A log line's RFC 3339 stamp at one width, so that stamps compare in time order as strings.

    The server writes RFC3339Nano, which drops trailing zeros: ``05.1Z`` is later than ``05.09Z``
    but sorts before it. Padded to nanoseconds they compare right.
    """
    head, _, fraction = stamp.removesuffix("Z").partition(".")
    return f"{head}.{fraction:0<9}Z"


def container_of(pod: Obj, preferred: str | None) -> str | None:
    names = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
    if preferred in names or not names:
        return preferred if preferred in names else None
    return str(names[0])


def read(
    client: Client,
    pods: list[Obj],
    *,
    container: str | None = None,
    tail: int | None = None,
    since: int | None = None,
) -> list[LogLine]:
    """Each pod's log (the last ``tail`` lines of each), merged in time order."""
    out: list[LogLine] = []
    for pod in pods:
        name = pod["metadata"]["name"]
        try:
            lines = client.log(
                name,
                namespace=pod["metadata"]["namespace"],
                container=container_of(pod, container),
                tail_lines=tail,
                since=since,
                timestamps=True,
            )
            out += [LogLine(replica_name(pod), name, *_split(raw)) for raw in lines]
        except ApiError:
            continue  # a pod that has not started has no log yet
    return sorted(out, key=lambda line: when(line.stamp))


def follow(
    client: Client,
    list_pods: Callable[[], list[Obj]],
    job_finished: Callable[[], bool],
    *,
    container: str | None = None,
    tail: int | None = None,
    since: int | None = None,
    poll: float = 1.0,
) -> Iterator[LogLine]:
    """Lines of every pod ``list_pods`` returns, as they come, until ``job_finished`` and all streams end."""
    lines: queue.Queue[LogLine | None] = queue.Queue()
    streams: dict[str, threading.Thread] = {}
    last_seen: dict[str, str] = {}
    stop = threading.Event()

    def stream(pod: Obj) -> None:
        name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        first = True
        finished = False  # the pod had ended before the latest read: that read had its whole log
        try:
            while not stop.is_set():
                try:
                    # A re-stream (the container restarted in place) starts from the beginning; lines
                    # already shown are skipped by their timestamps.
                    raw_lines = client.log(
                        name,
                        namespace=namespace,
                        container=container_of(pod, container),
                        follow=True,
                        tail_lines=tail if first else None,
                        since=since,
                        timestamps=True,
                    )
                    first = False
                    for raw in raw_lines:
                        stamp, text = _split(raw)
                        at = when(stamp)
                        if at <= last_seen.get(name, ""):
                            continue
                        last_seen[name] = at
                        lines.put(LogLine(replica_name(pod), name, stamp, text))
                        if stop.is_set():
                            return
                except ApiError as exc:
                    if getattr(exc.status, "code", None) == 404 and "pods" in str(exc.status.message or ""):
                        return  # the pod is gone
                except Exception:
                    pass  # a dropped connection: try again below
                if finished or stop.wait(poll):
                    return
                # A pod that ended while its log could not be read yet (its container was still
                # starting: a short job) gets one more read, or its lines would never be shown.
                finished = _pod_done(client, name, namespace)
        finally:
            lines.put(None)

    def start_new() -> None:
        for pod in list_pods():
            key = pod["metadata"]["uid"] if "uid" in pod["metadata"] else pod["metadata"]["name"]
            if key not in streams:
                thread = threading.Thread(target=stream, args=(pod,), daemon=True)
                streams[key] = thread
                thread.start()

    done_at: float | None = None
    try:
        start_new()
        next_scan = time.monotonic() + poll
        while True:
            try:
                item = lines.get(timeout=max(0.05, next_scan - time.monotonic()))
            except queue.Empty:
                item = None
            if item is not None:
                yield item
                continue
            if time.monotonic() >= next_scan:
                if done_at is None and job_finished():
                    done_at = time.monotonic()
                start_new()
                # Pods may outlive a finished job (cleanPodPolicy None): their streams get a grace period.
                idle = not any(t.is_alive() for t in streams.values())
                if done_at is not None and (idle or time.monotonic() - done_at > FINISH_GRACE):
                    while not lines.empty():
                        rest = lines.get_nowait()
                        if rest is not None:
                            yield rest
                    return
                next_scan = time.monotonic() + poll
    finally:
        stop.set()


def _pod_done(client: Client, name: str, namespace: str) -> bool:
    """Whether a pod's log can grow no more: gone, or Succeeded/Failed."""
    try:
        pod = client.get(Pod, name, namespace=namespace)
    except ApiError:
        return True
    phase = getattr(pod.status, "phase", None) if pod.status else None
    return phase in ("Succeeded", "Failed")


def follow_pods(
    pods: list[str],
    new_client: Callable[[], Client],
    stream: Callable[[Client, str, threading.Event], Iterable[str]],
    *,
    gone: type[Exception],
) -> Iterator[tuple[str, str]]:
    """``(pod, line)`` from every pod's followed log at once, until every stream has ended.

    Each pod is read on a thread of its own with a client of its own (``stream`` yields its raw
    lines; it should wait for the pod to start unless the event is set). A pod that is ``gone``
    just ends its stream; any other error is raised here. Closing the iterator closes the
    clients, which unblocks a thread still reading.
    """
    lines: queue.Queue[tuple[str, str] | BaseException | None] = queue.Queue()
    clients: list[Client] = []
    stop = threading.Event()

    def pump(pod: str) -> None:
        client = new_client()
        clients.append(client)
        try:
            for line in stream(client, pod, stop):
                if stop.is_set():
                    return
                lines.put((pod, line.rstrip("\n")))
        except gone:
            pass  # the pod went away (job deleted): its stream is simply over
        except BaseException as exc:
            if not stop.is_set():
                lines.put(exc)
        finally:
            lines.put(None)

    threads = [threading.Thread(target=pump, args=(p,), daemon=True, name=f"logs-{p}") for p in pods]
    for t in threads:
        t.start()
    try:
        open_streams = len(threads)
        while open_streams:
            item = lines.get()
            if item is None:
                open_streams -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
    finally:
        stop.set()
        for client in clients:
            client.close()  # unblocks a pump still reading a follow stream
