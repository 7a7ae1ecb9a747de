"""Helpers for tests that run the operator as its own process against a ``yard up --no-operator`` plane.

``OperatorProcess`` starts ``python -m trainyard.operator`` exactly as a user would and kills it
by pid only; ``Api`` is plain HTTP against the plane (the tests' own client, not the operator's).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from conftest import REPO, Plane, free_port


class Api:
    def __init__(self, plane: Plane) -> None:
        self.plane = plane
        self.base = plane.url

    def call(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.base + path, method=method, data=data, headers={"Content-Type": content_type}
        )
        with self.plane.urlopen(request, timeout=60) as response:
            return json.loads(response.read() or b"null")

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        return self.call("GET", path + query)

    def jobs(self, namespace: str, **params: str) -> list[dict[str, Any]]:
        return list(self.get(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", **params)["items"])

    def pods(self, namespace: str, **params: str) -> list[dict[str, Any]]:
        return list(self.get(f"/api/v1/namespaces/{namespace}/pods", **params)["items"])

    def services(self, namespace: str, **params: str) -> list[dict[str, Any]]:
        return list(self.get(f"/api/v1/namespaces/{namespace}/services", **params)["items"])

    def create_job(self, namespace: str, job: dict[str, Any]) -> Any:
        return self.call("POST", f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", job)

    def ensure_namespace(self, name: str) -> None:
        try:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            self.call("POST", "/api/v1/namespaces", body)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise


def sleeper_job(name: str, *, workers: int, seconds: list[float], labels: dict[str, str] | None = None) -> Any:
    """A PyTorchJob whose replicas only ``sleep``: cheap processes, real pods."""

    def spec(replicas: int, index: int) -> dict[str, Any]:
        command = ["sleep", f"{seconds[index]:.2f}"]
        container = {"name": "pytorch", "image": "python:3.11", "command": command}
        return {"replicas": replicas, "template": {"spec": {"containers": [container]}}}

    specs = {"Master": spec(1, 0)}
    if workers:
        specs["Worker"] = spec(workers, 1)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"pytorchReplicaSpecs": specs},
    }


def condition(job: dict[str, Any], ctype: str) -> bool:
    return any(
        c.get("type") == ctype and c.get("status") == "True" for c in (job.get("status") or {}).get("conditions") or []
    )


class OperatorProcess:
    """One ``python -m trainyard.operator`` against ``plane``; its log is appended to ``log``."""

    def __init__(self, plane: Plane, log: Path, *flags: str, metrics: bool = True) -> None:
        self.plane = plane
        self.log = log
        self.flags = list(flags)
        self.metrics_port = free_port() if metrics else 0
        self.probes_port = free_port() if metrics else 0
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> OperatorProcess:
        argv = [
            sys.executable,
            "-m",
            "trainyard.operator",
            "--kubeconfig",
            str(self.plane.kubeconfig),
            "--network-mode",
            "host",
            "--metrics-bind-address",
            f"127.0.0.1:{self.metrics_port}" if self.metrics_port else "0",
            "--health-probe-bind-address",
            f"127.0.0.1:{self.probes_port}" if self.probes_port else "0",
            # as `yard operator` runs it against a local plane: its client is not rate-limited
            "--kube-api-qps",
            "0",
            *self.flags,
        ]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO, start_new_session=True
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: int) -> None:
        assert self.process is not None
        os.kill(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is flushed, released or cleaned up."""
        if self.alive():
            self.signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=30)

    def stop(self) -> int | None:
        if self.alive():
            self.signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=30) if self.process else None
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode if self.process else None

    def scrape(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return str(response.read().decode())
        except OSError:
            return ""

    def probe(self, path: str) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.probes_port}{path}", timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return 0


def sample(text: str, name: str, /, **labels: str) -> float | None:
    """The value of one Prometheus sample in an exposition, None when absent."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, raw_labels = head.partition("{")
        if metric != name:
            continue
        found = dict(part.split("=", 1) for part in raw_labels.rstrip("}").split(",") if part)
        if {k: v.strip('"') for k, v in found.items()} == labels:
            return float(value)
    return None
