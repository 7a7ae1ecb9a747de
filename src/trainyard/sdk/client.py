"""``TrainingClient``: create, inspect, wait for, read logs of, update and delete training jobs.

Method names, positional order and behaviour follow the official Kubeflow training SDK v1
(``kubeflow-training`` 1.9: ``create_job``, ``get_job``, ``list_jobs``, ``get_job_conditions``,
``is_job_*``, ``wait_for_job_conditions``, ``get_job_pods``, ``get_job_pod_names``,
``get_job_logs``, ``update_job``, ``delete_job``), so code written against it reads the same.
Jobs, conditions and pods are returned as plain manifests (dicts), and errors are the typed
exceptions of ``trainyard.sdk.errors`` carrying the server's message. It talks to whatever
cluster the kubeconfig names: the embedded plane or a real one.

The class is built in three layers, one concern each: ``session`` (the kubeconfig, the client,
defaults, reading a job), ``pods`` (pods, logs and events) and this module (writing, listing and
waiting for jobs).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from lightkube.generic_resource import create_namespaced_resource
from lightkube.types import CascadeType, PatchType

from trainyard.api.common import ConditionType
from trainyard.client.resources import build, to_dict
from trainyard.sdk import functions
from trainyard.sdk.errors import (
    JobFailedError,
    NotFoundError,
    WaitTimeoutError,
    translated,
)
from trainyard.sdk.pods import JobPods
from trainyard.sdk.session import Job, has_condition, job_conditions

__all__ = ["TrainingClient"]

log = logging.getLogger(__name__)

CONDITION_TYPES = frozenset(c.value for c in ConditionType)


class TrainingClient(JobPods):
    """A client for training jobs (``kubeflow.org/v1``) on the cluster a kubeconfig names.

    ``config_file``/``context`` pick the kubeconfig and context (``sdk.session`` says the default);
    ``namespace`` defaults to the context's, else ``default``; ``job_kind`` is the kind used when
    a call names none. The constructor makes no request.
    """

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
        return job_conditions(functions.to_manifest(job))

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
            conditions = job_conditions(job)
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
