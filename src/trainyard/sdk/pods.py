"""A job's pods, their logs and the events about the job and its pods, as ``TrainingClient``
serves them (Kubeflow SDK v1's ``get_job_pods``, ``get_job_pod_names``, ``get_job_logs``, and
trainyard's ``get_job_events``, ``stream_pod_log`` and ``get_job_findings``, ``yard doctor``'s
findings): pods found by the operator's labels, master first, then by replica type and index;
logs read whole or followed across replicas.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Event, Pod

from trainyard.api import labels
from trainyard.api.kindinfo import KindInfo
from trainyard.client.resources import to_dict
from trainyard.sdk import doctor, events, logs
from trainyard.sdk.errors import NotFoundError, translated
from trainyard.sdk.kinds import builtin_kinds, by_kind, master_replica
from trainyard.sdk.session import Session, has_condition, job_conditions


class JobPods(Session):
    """The pods-and-logs half of ``TrainingClient``."""

    def get_job_pods(
        self,
        name: str,
        namespace: str | None = None,
        is_master: bool = False,
        replica_type: str | None = None,
        replica_index: int | None = None,
        timeout: float | None = None,
        *,
        job_kind: str | None = None,
        kind: str | None = None,
    ) -> list[dict[str, Any]]:
        """The job's pods, master first, then by replica type and index.

        ``is_master`` keeps the master-role pod; ``replica_type`` (``master``, ``worker``, any
        case) and ``replica_index`` narrow to one replica.
        """
        info = self._info(self._job_kind(job_kind, kind))
        sel: dict[str, Any] = {labels.JOB_NAME: name}
        if is_master:
            sel[labels.JOB_ROLE] = "master"
        if replica_type is not None:
            known = [t.lower() for t in info.replica_types]
            if replica_type.lower() not in known:
                raise ValueError(f"replica_type of a {info.kind} is one of {', '.join(known)}, not {replica_type!r}")
            sel[labels.REPLICA_TYPE] = replica_type.lower()
        if replica_index is not None:
            sel[labels.REPLICA_INDEX] = str(replica_index)
        with translated(self.server):
            pods = [to_dict(p) for p in self.client.list(Pod, namespace=self._ns(namespace), labels=sel)]
        order = {t.lower(): i for i, t in enumerate(info.replica_types)}

        def key(pod: dict[str, Any]) -> tuple[int, int, str]:
            lab = pod["metadata"].get("labels") or {}
            index = lab.get(labels.REPLICA_INDEX, "")
            return (
                order.get(lab.get(labels.REPLICA_TYPE, ""), len(order)),
                int(index) if index.isdigit() else 0,
                pod["metadata"]["name"],
            )

        return sorted(pods, key=key)

    def get_job_pod_names(
        self,
        name: str,
        namespace: str | None = None,
        is_master: bool = False,
        replica_type: str | None = None,
        replica_index: int | None = None,
        timeout: float | None = None,
        *,
        job_kind: str | None = None,
    ) -> list[str]:
        pods = self.get_job_pods(name, namespace, is_master, replica_type, replica_index, job_kind=job_kind)
        return [p["metadata"]["name"] for p in pods]

    def get_job_logs(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        is_master: bool = True,
        replica_type: str | None = None,
        replica_index: int | None = None,
        follow: bool = False,
        timeout: float | None = None,
        verbose: bool = False,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
        kind: str | None = None,
    ) -> Any:
        """Logs of the job's replicas: by default the master's; ``is_master=False`` for all of them.

        Without ``follow``: ``({pod: text}, {object: [event lines]})`` as the Kubeflow SDK returns
        (events only with ``verbose``); pods still Pending are skipped. With ``follow``: an
        iterator of ``(pod, line)`` across the selected replicas as the lines are written, which
        waits for the job's pods to exist and to start, and ends when every one has finished.
        """
        info = self._info(self._job_kind(job_kind, kind))
        ns = self._ns(namespace)
        container = container or info.default_container
        if follow:
            return self._follow(name, ns, info, is_master, replica_type, replica_index, container, tail_lines)
        texts: dict[str, str] = {}
        pods = self.get_job_pods(name, ns, is_master, replica_type, replica_index, job_kind=info.kind)
        for pod in pods:
            if (pod.get("status") or {}).get("phase", "Pending") == "Pending":
                continue
            pod_name = pod["metadata"]["name"]
            texts[pod_name] = "".join(
                self.stream_pod_log(pod_name, namespace=ns, container=container, tail_lines=tail_lines)
            )
        # Events of Pending pods too: they are what says why a pod has not started.
        found = self.get_job_events(name, ns, info.kind, pods=[p["metadata"]["name"] for p in pods]) if verbose else {}
        return texts, found

    def get_job_events(
        self, name: str, namespace: str | None = None, job_kind: str | None = None, *, pods: list[str] | None = None
    ) -> dict[str, list[str]]:
        """Events of the job and of its pods since it was created: ``{"pytorchjob/NAME": ["TIME message", ...]}``."""
        info = self._info(job_kind)
        ns = self._ns(namespace)
        job = self.get_job(name, ns, info.kind)
        created = job["metadata"].get("creationTimestamp") or ""
        if pods is None:
            pods = self.get_job_pod_names(name, ns, job_kind=info.kind)
        wanted = {(info.kind, name), *(("Pod", p) for p in pods)}
        with translated(self.server):
            items = [to_dict(e) for e in self.client.list(Event, namespace=ns)]
        return events.by_object(items, wanted, since=created)

    def get_job_findings(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> list[dict[str, Any]]:
        """What is wrong with the job and what to do, as ``yard doctor`` says it: a list of
        ``{rule, severity, cause, remedy, evidence, pods}`` (``sdk.diagnosis``); ``[]`` when nothing is."""
        info = self._info(job_kind)
        ns = self._ns(namespace)
        job = self.get_job(name, ns, info.kind)
        kind = by_kind(info.kind, builtin_kinds())
        if kind is None:
            raise ValueError(f"{info.kind} is not a job kind trainyard can read")
        with translated(self.server):
            return [f.to_dict() for f in doctor.examine(self.client, kind, job)]

    def _follow(
        self,
        name: str,
        namespace: str,
        info: KindInfo,
        is_master: bool,
        replica_type: str | None,
        replica_index: int | None,
        container: str,
        tail_lines: int | None,
    ) -> Iterator[tuple[str, str]]:
        pods = self._await_pods(name, namespace, info, is_master, replica_type, replica_index)

        def stream(client: Client, pod: str, stop: threading.Event) -> Iterator[str]:
            if self._await_start(client, pod, namespace, stop):
                with translated(self.server):
                    yield from client.log(
                        pod, namespace=namespace, container=container, follow=True, tail_lines=tail_lines
                    )

        yield from logs.follow_pods(pods, lambda: self._new_client(namespace), stream, gone=NotFoundError)

    def _await_pods(
        self,
        name: str,
        namespace: str,
        info: KindInfo,
        is_master: bool,
        replica_type: str | None,
        replica_index: int | None,
    ) -> list[str]:
        """The selected pods' names, once as many exist as the job's spec asks for (or it finished)."""
        while True:
            job = self.get_job(name, namespace, info.kind)
            specs = (job.get("spec") or {}).get(info.replica_specs_field) or {}
            wanted = 0
            for rtype, rspec in specs.items():
                if replica_type is not None and rtype.lower() != replica_type.lower():
                    continue
                count = int((rspec or {}).get("replicas", 1))
                if replica_index is not None:
                    count = 1 if replica_index < count else 0
                wanted += count
            if is_master:  # the one replica the kind's plugin gives the master role (e.g. worker 0)
                master = master_replica(job, info)
                wanted = int(
                    master is not None
                    and (replica_type is None or replica_type.lower() == master[0].lower())
                    and replica_index in (None, master[1])
                )
            pods = self.get_job_pod_names(name, namespace, is_master, replica_type, replica_index, job_kind=info.kind)
            finished = any(has_condition(job_conditions(job), t) for t in ("Succeeded", "Failed"))
            if len(pods) >= wanted or finished:
                return pods
            time.sleep(0.5)

    def _await_start(self, client: Client, pod: str, namespace: str, stop: threading.Event) -> bool:
        while not stop.is_set():
            with translated(self.server):
                phase = (to_dict(client.get(Pod, pod, namespace=namespace)).get("status") or {}).get("phase")
            if phase not in (None, "Pending"):
                return True
            time.sleep(0.5)
        return False

    def stream_pod_log(
        self,
        pod: str,
        *,
        namespace: str | None = None,
        container: str | None = None,
        follow: bool = False,
        tail_lines: int | None = None,
    ) -> Iterator[str]:
        """One pod's log, line by line (each with its newline)."""
        with translated(self.server):
            yield from self.client.log(
                pod,
                namespace=self._ns(namespace),
                container=container,
                follow=follow,
                tail_lines=tail_lines,
            )
