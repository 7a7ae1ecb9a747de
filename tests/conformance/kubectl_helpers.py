"""Shared pieces of the kubectl conformance suite: namespaces, manifests, table parsing, watches.

The suite drives only the real ``kubectl`` against the session's plane (``tests/conftest.py``);
these helpers build the manifests it sends and read back what kubectl prints. Nothing here
talks to the API server directly.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from conftest import REPO, Kubectl

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                "subresources": {
                    "status": {},
                    "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
                },
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
                    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }
        ],
    },
}


def manifest(obj: dict[str, Any]) -> str:
    """kubectl reads JSON as readily as YAML; JSON keeps the manifests free of quoting surprises."""
    return json.dumps(obj)


def apply(kubectl: Kubectl, obj: dict[str, Any], *args: str) -> str:
    return kubectl("apply", "-f", "-", *args, input=manifest(obj))


def create(kubectl: Kubectl, obj: dict[str, Any], *args: str) -> str:
    return kubectl("create", "-f", "-", *args, input=manifest(obj))


def new_namespace(kubectl: Kubectl, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    # `kubectl create namespace` posts protobuf; a manifest goes as JSON.
    out = apply(kubectl, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert out.strip() == f"namespace/{name} created", out
    return name


def namespace(kubectl: Kubectl, prefix: str) -> Iterator[str]:
    """Body of the per-test namespace fixtures: a fresh namespace, torn down without waiting."""
    name = new_namespace(kubectl, prefix)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def ensure_widget_crd(kubectl: Kubectl) -> None:
    apply(kubectl, WIDGET_CRD)
    out = kubectl("wait", "--for=condition=established", "crd/widgets.example.com", "--timeout=60s")
    assert "customresourcedefinition.apiextensions.k8s.io/widgets.example.com condition met" in out


def widget(name: str, ns: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def pod(
    name: str,
    ns: str,
    script: str,
    *,
    labels: dict[str, str] | None = None,
    container: str = "c",
    restart: str = "Never",
    **spec: Any,
) -> dict[str, Any]:
    """A pod the embedded node runs as a local ``python3 -c script`` process; the image is only recorded."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": container, "image": "python:3.11", "command": ["python3", "-c", script]}],
            **spec,
        },
    }


SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(600)"


def configmap(name: str, ns: str, data: dict[str, str] | None = None, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, **metadata},
        "data": data or {},
    }


def wait_running(kubectl: Kubectl, ns: str, name: str) -> None:
    out = kubectl("wait", "--for=condition=Ready", f"pod/{name}", "-n", ns, "--timeout=60s")
    assert f"pod/{name} condition met" in out


# -- reading kubectl's tables -------------------------------------------------------------------


def table(text: str) -> list[dict[str, str]]:
    """Rows of one printed table, keyed by header; columns are located by where headers start.

    kubectl's tabwriter pads every column to a common start offset with at least three spaces,
    so single spaces inside a header (``LAST SEEN``) or a cell never split a column.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "kubectl printed no table"
    header = lines[0]
    spans = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", header)]
    out = []
    for line in lines[1:]:
        row = {}
        for i, (start, name) in enumerate(spans):
            end = spans[i + 1][0] if i + 1 < len(spans) else None
            row[name] = line[start:end].strip()
        out.append(row)
    return out


def headers(text: str) -> list[str]:
    return re.findall(r"\S+(?: \S+)*", text.splitlines()[0])


def by_name(rows: list[dict[str, str]], key: str = "NAME") -> dict[str, dict[str, str]]:
    return {r[key]: r for r in rows}


# -- long-running kubectl processes ---------------------------------------------------------------


class Streamer:
    """A kubectl command that keeps printing (``get -w``, ``logs -f``), read line by line."""

    def __init__(self, kubectl: Kubectl, *args: str) -> None:
        self.args = args
        self.process = subprocess.Popen(
            ["kubectl", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=kubectl.env,
            cwd=REPO,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def _drain(self, block_for: float) -> bool:
        """Move what was printed into ``lines``; False once the stream has ended."""
        try:
            item = self._queue.get(timeout=block_for)
        except queue.Empty:
            return True
        while True:
            if item is None:
                return False
            self.lines.append(item)
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return True

    def wait_for(self, probe: Callable[[list[str]], Any], *, timeout: float = 60.0, what: str = "") -> Any:
        """Read until ``probe(lines)`` is truthy; fail with everything printed so far."""
        deadline = time.monotonic() + timeout
        alive = True
        while time.monotonic() < deadline:
            found = probe(self.lines)
            if found:
                return found
            if not alive:
                break
            alive = self._drain(0.2)
        raise AssertionError(
            f"kubectl {' '.join(self.args)}: no {what or probe} in its output:\n"
            + "\n".join(self.lines)
            + f"\nstderr: {self.stderr() if not alive else '(still running)'}"
        )

    def wait_exit(self, timeout: float = 60.0) -> int:
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        while self._drain(0):
            pass
        return code

    def running(self) -> bool:
        return self.process.poll() is None

    def stderr(self) -> str:
        assert self.process.stderr is not None
        return self.process.stderr.read() if self.process.poll() is not None else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def rows_with(lines: list[str], *words: str) -> list[str]:
    return [line for line in lines if all(re.search(rf"(^|\s){re.escape(w)}(\s|$)", line) for w in words)]
