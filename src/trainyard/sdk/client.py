"""``TrainingClient``: create, inspect, wait for, read logs of, update and delete training jobs.

Method names, positional order and behaviour follow the official Kubeflow training SDK v1
(``kubeflow-training`` 1.9: ``create_job``, ``get_job``, ``list_jobs``, ``get_job_conditions``,
``is_job_*``, ``wait_for_job_conditions``, ``get_job_pods``, ``get_job_pod_names``,
``get_job_logs``, ``update_job``, ``delete_job``), so code written against it reads the same.
Jobs, conditions and pods are returned as plain manifests (dicts), and errors are the typed
exceptions of ``trainyard.sdk.errors`` carrying the server's message. It talks to whatever
cluster the kubeconfig names: the embedded plane or a real one.

Which kubeconfig, when none is passed: ``$TRAINYARD_HOME/kubeconfig`` when ``TRAINYARD_HOME`` is
set, else ``$KUBECONFIG``, else the default plane's (``~/.trainyard/kubeconfig``) when it exists,
else ``~/.kube/config`` or the in-cluster service account.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx2
import yaml
from lightkube import Client, KubeConfig
from lightkube.config.kubeconfig import SingleConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Event, Pod
from lightkube.types import CascadeType, PatchType

from trainyard.api import labels
from trainyard.api.common import ConditionType
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kinds import DEFAULT_KIND
from trainyard.client.resources import build, resource_for_kind, to_dict
from trainyard.sdk import events, functions, logs
from trainyard.sdk.errors import (
    JobFailedError,
    NotFoundError,
    WaitTimeoutError,
    translated,
)
from trainyard.sdk.kinds import kind_info, master_replica

__all__ = ["Job", "JobFailedError", "TrainingClient"]

log = logging.getLogger(__name__)

Job = dict[str, Any]
CONDITION_TYPES = frozenset(c.value for c in ConditionType)
# The Kubeflow SDK's per-request default (seconds).
DEFAULT_REQUEST_TIMEOUT = 120.0


def default_kubeconfig() -> Path | None:
    """The kubeconfig ``TrainingClient()`` uses; None means lightkube's own default (~/.kube/config, in-cluster)."""
    # The same home as the plane's (trainyard.cluster.paths.default_home), which the SDK may not import.
    home = os.environ.get("TRAINYARD_HOME")
    if home:
        return Path(home) / "kubeconfig"
    if os.environ.get("KUBECONFIG"):
        return None
    plane = Path.home() / ".trainyard" / "kubeconfig"
    return plane if plane.exists() else None


def _conditions(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((job.get("status") or {}).get("conditions") or [])


def has_condition(conditions: Iterable[Mapping[str, Any]], type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions)


class TrainingClient:
    """A client for training jobs (``kubeflow.org/v1``) on the cluster a kubeconfig names.

    ``config_file``/``context`` pick the kubeconfig and context (see the module for the default);
    ``namespace`` defaults to the context's, else ``default``; ``job_kind`` is the kind used when
    a call names none. The constructor makes no request.
    """

    def __init__(
        self,
        config_file: Path | str | None = None,
        context: str | None = None,
        client_configuration: KubeConfig | SingleConfig | None = None,
        namespace: str | None = None,
        job_kind: str = DEFAULT_KIND,
        *,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        self.job_kind = self._info(job_kind).kind
        self.kubeconfig: Path | None = None
        config: KubeConfig | SingleConfig
        if client_configuration is not None:
            config = client_configuration
        else:
            path = Path(config_file) if config_file else default_kubeconfig()
            if path is not None and not path.exists():
                raise FileNotFoundError(
                    f"no kubeconfig at {path}; start the control plane with `yard up` or pass config_file="
                )
            self.kubeconfig = path
            config = KubeConfig.from_file(path) if path is not None else KubeConfig.from_env()
        if context is not None:
            if not isinstance(config, KubeConfig):
                raise ValueError("context= needs a kubeconfig, not a single client configuration")
            chosen = config.get(context_name=context)
            if chosen is None:
                raise ValueError(f"no context {context!r} in the kubeconfig")
            config = chosen
        self._config = config
        self._timeout = request_timeout
        self.client = self._new_client(namespace)
        self.namespace: str = namespace or self.client.namespace
        single = config if isinstance(config, SingleConfig) else config.get()
        self.server: str = single.cluster.server if single is not None else ""  # named in connection errors

    def _new_client(self, namespace: str | None = None) -> Client:
        return Client(
            self._config,
            namespace=namespace,
            field_manager="trainyard-sdk",
            timeout=httpx2.Timeout(self._timeout),
        )

    # -- helpers ---------------------------------------------------------------------------------

    def _info(self, job_kind: str | None) -> KindInfo:
        return kind_info(str(job_kind or getattr(self, "job_kind", DEFAULT_KIND)))

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    def _res(self, info: KindInfo) -> Any:
        return resource_for_kind(info.kind)

    def _job_kind(self, job_kind: str | None, kind: str | None) -> str | None:
        # ``kind=`` is the keyword earlier trainyard releases used; Kubeflow's is ``job_kind=``.
        return job_kind or kind

    # -- jobs ------------------------------------------------------------------------------------

    def create_job(
        self,
        job: Any = None,
        name: str | None = None,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        job_kind: str | None = None,
        base_image: str | None = None,
        train_func: Callable[..., Any] | None = None,
        parameters: Mapping[str, Any] | None = None,
        num_workers: int | None = 1,
        num_procs_per_worker: int | str | None = None,
        resources_per_worker: Any = None,
        num_chief_replicas: int | None = None,
        num_ps_replicas: int | None = None,
        packages_to_install: list[str] | None = None,
        pip_index_url: str = functions.DEFAULT_PIP_INDEX_URL,
        env_vars: Any = None,
        queue_name: str | None = None,
        volumes: list[Any] | None = None,
        volume_mounts: list[Any] | None = None,
    ) -> Job:
        """Create a job and return it as the server stored it (defaults filled in).

        ``job`` is a manifest: a dict, a YAML file (path) holding one, a trainyard model, or a
        Kubeflow SDK / ``kubernetes`` client model object. Without ``job``, ``name`` plus
        ``train_func`` (and/or ``base_image``) build a job of ``job_kind`` laid out by its plugin:
        a PyTorchJob of one Master and ``num_workers - 1`` Workers, ``train_func`` under
        ``torchrun`` (rendezvous from the operator's ``PET_*`` env) when ``num_workers > 1`` or
        ``num_procs_per_worker`` is set; a TFJob of ``num_workers`` Workers plus
        ``num_chief_replicas`` Chief and ``num_ps_replicas`` PS replicas, under ``python -u``.
        With ``job``, only ``namespace``, ``labels``, ``annotations`` and ``queue_name`` may be
        passed too. ``queue_name`` labels the job for Kueue (a missing LocalQueue only warns).
        """
        if job is not None:
            extra = {
                "name": name,
                "job_kind": job_kind,
                "base_image": base_image,
                "train_func": train_func,
                "parameters": parameters,
                "num_procs_per_worker": num_procs_per_worker,
                "resources_per_worker": resources_per_worker,
                "num_chief_replicas": num_chief_replicas,
                "num_ps_replicas": num_ps_replicas,
                "packages_to_install": packages_to_install,
                "env_vars": env_vars,
                "volumes": volumes,
                "volume_mounts": volume_mounts,
            }
            given = [k for k, v in extra.items() if v is not None]
            if given:
                raise ValueError(
                    f"with job= only namespace, labels, annotations and queue_name may be set; got {', '.join(given)}"
                )
            body = self._manifest(job)
            info = self._info(str(body.get("kind") or ""))
            meta = body.setdefault("metadata", {})
            if labels:
                meta["labels"] = {**(meta.get("labels") or {}), **labels}
            if annotations:
                meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        else:
            info = self._info(job_kind)
            if train_func is None and base_image is None:
                raise ValueError("create_job needs job=, or name= with train_func= and/or base_image=")
            if not name:
                raise ValueError("name= is required to build a job from a function or an image")
            plugin = functions.layout(info.kind)  # refuses a kind whose plugin cannot run a function
            extra = {"num_chief_replicas": num_chief_replicas, "num_ps_replicas": num_ps_replicas}
            asked = {k: v for k, v in extra.items() if v is not None}
            if unknown := [k for k in asked if k not in plugin.function_roles]:
                raise ValueError(f"{' and '.join(unknown)}: not a parameter of {info.kind} jobs")
            roles = {plugin.function_roles[k]: count for k, count in asked.items()}
            if num_workers is None or num_workers < 1:
                raise ValueError(f"at least one worker is needed, got num_workers={num_workers}")
            body = functions.job_from_function(
                name=name,
                namespace=self._ns(namespace),
                train_func=train_func,
                parameters=parameters,
                base_image=base_image,
                num_workers=num_workers,
                num_procs_per_worker=num_procs_per_worker,
                resources_per_worker=resources_per_worker,
                packages_to_install=packages_to_install,
                pip_index_url=pip_index_url,
                env_vars=env_vars,
                volumes=volumes,
                volume_mounts=volume_mounts,
                labels=labels,
                annotations=annotations,
                kind=info.kind,
                roles=roles,
            )
        ns = namespace or body.get("metadata", {}).get("namespace") or self.namespace
        if queue_name and queue_name.strip():
            self._check_queue(queue_name, ns)
            meta = body.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), functions.KUEUE_QUEUE_LABEL: queue_name}
        with translated(self.server):
            created = self.client.create(build(self._res(info), body), namespace=ns)
        return to_dict(created)

    def _manifest(self, job: Any) -> dict[str, Any]:
        if isinstance(job, Path) or (isinstance(job, str) and "\n" not in job):
            docs = [d for d in yaml.safe_load_all(Path(job).read_text()) if d]
            if len(docs) != 1:
                raise ValueError(f"{job}: expected one job manifest, found {len(docs)} documents (use apply_file)")
            job = docs[0]
        body = functions.to_manifest(job)
        if not isinstance(body, dict) or not body.get("kind"):
            raise ValueError("a job manifest needs apiVersion, kind, metadata and spec")
        return body

    def _check_queue(self, queue_name: str, namespace: str) -> None:
        res = create_namespaced_resource("kueue.x-k8s.io", "v1beta1", "LocalQueue", "localqueues")
        try:
            with translated(self.server):
                self.client.get(res, queue_name, namespace=namespace)
        except NotFoundError:
            log.warning("LocalQueue %s/%s not found; the job is created anyway", namespace, queue_name)

    def apply_file(self, path: Path, *, namespace: str | None = None) -> list[tuple[Job, str]]:
        """Create or update every document of a manifest file; returns (object, "created"|"configured"|"unchanged")."""
        out = []
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if not doc:
                continue
            res = self._res(self._info(doc.get("kind")))
            ns = namespace or doc.get("metadata", {}).get("namespace") or self.namespace
            name = doc["metadata"]["name"]
            try:
                with translated(self.server):
                    current = to_dict(self.client.get(res, name, namespace=ns))
            except NotFoundError:
                with translated(self.server):
                    out.append((to_dict(self.client.create(build(res, doc), namespace=ns)), "created"))
                continue
            merged = {**current, "spec": doc.get("spec", {})}
            merged["metadata"] = {
                **current["metadata"],
                **{k: v for k, v in doc["metadata"].items() if k in ("labels", "annotations")},
            }
            with translated(self.server):
                updated = to_dict(self.client.replace(build(res, merged)))
            rv_same = updated["metadata"].get("resourceVersion") == current["metadata"].get("resourceVersion")
            out.append((updated, "unchanged" if rv_same else "configured"))
        return out

    def get_job(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        timeout: float | None = None,
        *,
        kind: str | None = None,
    ) -> Job:
        """The job as stored; ``NotFoundError`` if there is none. ``timeout`` is accepted as Kubeflow's
        per-request timeout; the client's ``request_timeout`` applies to every request."""
        info = self._info(self._job_kind(job_kind, kind))
        with translated(self.server):
            return to_dict(self.client.get(self._res(info), name, namespace=self._ns(namespace)))

    def list_jobs(
        self,
        namespace: str | None = None,
        job_kind: str | None = None,
        timeout: float | None = None,
        *,
        kind: str | None = None,
    ) -> list[Job]:
        """Jobs of one kind in ``namespace`` (``"*"``: all namespaces)."""
        info = self._info(self._job_kind(job_kind, kind))
        with translated(self.server):
            return [to_dict(j) for j in self.client.list(self._res(info), namespace=self._ns(namespace))]

    def get_job_conditions(
        self,
        name: str | None = None,
        namespace: str | None = None,
        job_kind: str | None = None,
        job: Any = None,
        timeout: float | None = None,
        *,
        kind: str | None = None,
    ) -> list[dict[str, Any]]:
        """``status.conditions`` of ``job`` (or of the job called ``name``), ``[]`` before the first."""
        if job is None:
            if name is None:
                raise ValueError("get_job_conditions needs name= or job=")
            job = self.get_job(name, namespace, self._job_kind(job_kind, kind))
        return _conditions(functions.to_manifest(job))

    def _is(self, type_: str, name: str | None, namespace: str | None, job_kind: str | None, job: Any) -> bool:
        return has_condition(self.get_job_conditions(name, namespace, job_kind, job), type_)

    def is_job_created(
        self, name: str | None = None, namespace: str | None = None, job_kind: str | None = None, job: Any = None
    ) -> bool:
        return self._is("Created", name, namespace, job_kind, job)

    def is_job_running(
        self, name: str | None = None, namespace: str | None = None, job_kind: str | None = None, job: Any = None
    ) -> bool:
        return self._is("Running", name, namespace, job_kind, job)

    def is_job_restarting(
        self, name: str | None = None, namespace: str | None = None, job_kind: str | None = None, job: Any = None
    ) -> bool:
        return self._is("Restarting", name, namespace, job_kind, job)

    def is_job_succeeded(
        self, name: str | None = None, namespace: str | None = None, job_kind: str | None = None, job: Any = None
    ) -> bool:
        return self._is("Succeeded", name, namespace, job_kind, job)

    def is_job_failed(
        self, name: str | None = None, namespace: str | None = None, job_kind: str | None = None, job: Any = None
    ) -> bool:
        return self._is("Failed", name, namespace, job_kind, job)

    def wait_for_job_conditions(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        expected_conditions: Iterable[str] = frozenset({"Succeeded"}),
        wait_timeout: float = 600,
        polling_interval: float = 2,
        callback: Callable[[Job], None] | None = None,
        timeout: float | None = None,
        *,
        kind: str | None = None,
    ) -> Job:
        """Poll until one of ``expected_conditions`` is True and return the job.

        A job that fails meanwhile raises ``JobFailedError`` at once with the job's failure
        message (unless Failed is expected); ``WaitTimeoutError`` after ``wait_timeout`` seconds.
        ``callback(job)`` sees every polled state. (``timeout`` is an alias of ``wait_timeout``
        kept for earlier trainyard callers.)
        """
        expected = set(expected_conditions)
        if not expected or not expected <= CONDITION_TYPES:
            raise ValueError(f"expected_conditions must be a non-empty subset of {sorted(CONDITION_TYPES)}")
        kind_name = self._info(self._job_kind(job_kind, kind)).kind
        limit = timeout if timeout is not None else wait_timeout
        deadline = time.monotonic() + limit
        while True:
            job = self.get_job(name, namespace, kind_name)
            if callback is not None:
                callback(job)
            conditions = _conditions(job)
            if any(has_condition(conditions, t) for t in expected):
                return job
            if has_condition(conditions, "Failed"):
                failed = next(c for c in reversed(conditions) if c.get("type") == "Failed")
                raise JobFailedError(
                    f"{kind_name} {self._ns(namespace)}/{name} failed: {failed.get('message') or failed.get('reason')}",
                    job=job,
                    reason=str(failed.get("reason") or ""),
                )
            now = time.monotonic()
            if now >= deadline:
                last = conditions[-1]["type"] if conditions else "no condition yet"
                raise WaitTimeoutError(
                    f"timed out after {limit:.0f}s waiting for {kind_name} {self._ns(namespace)}/{name}"
                    f" to be {' or '.join(sorted(expected))} (last: {last})"
                )
            time.sleep(min(polling_interval, deadline - now))

    def update_job(
        self,
        job: Any,
        name: str | None = None,
        namespace: str | None = None,
        job_kind: str | None = None,
    ) -> Job:
        """Merge-patch the job with ``job`` (a whole object or a part). A ``metadata.resourceVersion``
        in it is a precondition: a job changed since it was read gives ``ConflictError``."""
        body = self._manifest(job) if isinstance(job, str | Path) else functions.to_manifest(job)
        meta = body.get("metadata") or {}
        name = name or meta.get("name")
        if not name:
            raise ValueError("update_job needs name= or a job with metadata.name")
        info = self._info(job_kind or body.get("kind"))
        with translated(self.server):
            patched = self.client.patch(
                self._res(info),
                name,
                body,
                namespace=namespace or meta.get("namespace") or self.namespace,
                patch_type=PatchType.MERGE,
            )
        return to_dict(patched)

    def delete_job(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        delete_options: Mapping[str, Any] | None = None,
        *,
        kind: str | None = None,
    ) -> None:
        """Delete the job; its pods and services go with it (ownerReferences)."""
        info = self._info(self._job_kind(job_kind, kind))
        opts = functions.to_manifest(delete_options or {})
        cascade = {"Foreground": CascadeType.FOREGROUND, "Orphan": CascadeType.ORPHAN}.get(
            opts.get("propagationPolicy", ""), CascadeType.BACKGROUND
        )
        with translated(self.server):
            self.client.delete(
                self._res(info),
                name,
                namespace=self._ns(namespace),
                grace_period=opts.get("gracePeriodSeconds"),
                cascade=cascade,
            )

    # -- pods and logs ---------------------------------------------------------------------------

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
            finished = any(has_condition(_conditions(job), t) for t in ("Succeeded", "Failed"))
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
