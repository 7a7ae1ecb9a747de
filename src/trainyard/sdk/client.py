"""``TrainingClient``: create, inspect, wait for, read logs of and delete training jobs.

Method names follow the official Kubeflow training SDK (``create_job``, ``get_job``,
``wait_for_job_conditions``, ``get_job_logs``, ``delete_job``) so code written against it reads
the same. It talks to whatever cluster the kubeconfig names: the embedded plane or a real one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Pod

from trainyard.api import labels
from trainyard.api.kinds import KINDS
from trainyard.client import build, is_status, resource_for_kind, selector, to_dict

Job = dict[str, Any]


class JobFailedError(RuntimeError):
    """The job reached Failed while the caller waited for something else."""


class TrainingClient:
    def __init__(self, kubeconfig: Path | str | None = None, *, namespace: str | None = None) -> None:
        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
        self.client = Client(config, namespace=namespace, field_manager="trainyard-sdk")
        self.namespace = namespace or self.client.namespace

    # -- jobs ------------------------------------------------------------------------------------

    def create_job(self, job: Job, *, namespace: str | None = None) -> Job:
        res = resource_for_kind(job["kind"])
        created = self.client.create(
            build(res, job),
            namespace=namespace or job.get("metadata", {}).get("namespace") or self.namespace,
        )
        return to_dict(created)

    def apply_file(self, path: Path, *, namespace: str | None = None) -> list[tuple[Job, str]]:
        """Create or update every document of a manifest file; returns (object, "created"|"configured"|"unchanged")."""
        out = []
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            res = resource_for_kind(doc["kind"])
            ns = namespace or doc.get("metadata", {}).get("namespace") or self.namespace
            name = doc["metadata"]["name"]
            try:
                current = to_dict(self.client.get(res, name, namespace=ns))
            except ApiError as exc:
                if not is_status(exc, 404):
                    raise
                out.append((to_dict(self.client.create(build(res, doc), namespace=ns)), "created"))
                continue
            merged = {**current, "spec": doc.get("spec", {})}
            merged["metadata"] = {
                **current["metadata"],
                **{k: v for k, v in doc["metadata"].items() if k in ("labels", "annotations")},
            }
            updated = to_dict(self.client.replace(build(res, merged)))
            rv_same = updated["metadata"].get("resourceVersion") == current["metadata"].get("resourceVersion")
            out.append((updated, "unchanged" if rv_same else "configured"))
        return out

    def get_job(self, name: str, *, kind: str = "PyTorchJob", namespace: str | None = None) -> Job:
        return to_dict(self.client.get(resource_for_kind(kind), name, namespace=namespace or self.namespace))

    def list_jobs(self, *, kind: str = "PyTorchJob", namespace: str | None = None) -> list[Job]:
        return [to_dict(j) for j in self.client.list(resource_for_kind(kind), namespace=namespace or self.namespace)]

    def delete_job(self, name: str, *, kind: str = "PyTorchJob", namespace: str | None = None) -> None:
        self.client.delete(resource_for_kind(kind), name, namespace=namespace or self.namespace)

    def get_job_conditions(
        self, name: str, *, kind: str = "PyTorchJob", namespace: str | None = None
    ) -> list[dict[str, Any]]:
        return list((self.get_job(name, kind=kind, namespace=namespace).get("status") or {}).get("conditions") or [])

    def wait_for_job_conditions(
        self,
        name: str,
        *,
        kind: str = "PyTorchJob",
        namespace: str | None = None,
        expected_conditions: frozenset[str] = frozenset({"Succeeded"}),
        timeout: float = 600,
        polling_interval: float = 1.0,
        callback: Callable[[Job], None] | None = None,
    ) -> Job:
        """Poll until one of ``expected_conditions`` is True; raise on Failed or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.get_job(name, kind=kind, namespace=namespace)
            if callback is not None:
                callback(job)
            true = {c["type"] for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
            if true & expected_conditions:
                return job
            if "Failed" in true:
                message = next(c.get("message", "") for c in job["status"]["conditions"] if c["type"] == "Failed")
                raise JobFailedError(f"{kind} {name} failed: {message}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"timed out after {timeout:.0f}s waiting for {kind} {name} to reach {sorted(expected_conditions)}"
                )
            time.sleep(polling_interval)

    # -- pods and logs ---------------------------------------------------------------------------

    def get_job_pods(
        self, name: str, *, kind: str = "PyTorchJob", namespace: str | None = None
    ) -> list[dict[str, Any]]:
        sel = {labels.OPERATOR_NAME: KINDS[kind].controller_name, labels.JOB_NAME: name}
        return [to_dict(p) for p in self.client.list(Pod, namespace=namespace or self.namespace, labels=selector(sel))]

    def get_job_logs(
        self,
        name: str,
        *,
        kind: str = "PyTorchJob",
        namespace: str | None = None,
        is_master: bool = True,
        container: str | None = None,
        follow: bool = False,
        tail_lines: int | None = None,
    ) -> dict[str, str]:
        """Logs per pod name; by default only the master-role pod's, as the Kubeflow SDK does."""
        out = {}
        for pod in self.get_job_pods(name, kind=kind, namespace=namespace):
            if is_master and pod["metadata"]["labels"].get(labels.JOB_ROLE) != "master":
                continue
            out[pod["metadata"]["name"]] = "".join(
                self.stream_pod_log(
                    pod["metadata"]["name"],
                    namespace=namespace,
                    container=container or KINDS[kind].default_container,
                    follow=follow,
                    tail_lines=tail_lines,
                )
            )
        return out

    def stream_pod_log(
        self,
        pod: str,
        *,
        namespace: str | None = None,
        container: str | None = None,
        follow: bool = False,
        tail_lines: int | None = None,
    ) -> Iterator[str]:
        yield from self.client.log(
            pod,
            namespace=namespace or self.namespace,
            container=container,
            follow=follow,
            tail_lines=tail_lines,
        )
