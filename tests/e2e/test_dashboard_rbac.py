"""deploy/dashboard's ClusterRole grants exactly what the dashboard asks of the API, no more.

``python -m trainyard.dashboard serve`` runs as its own process, as the cluster's Deployment runs
it, against a plane through a recording proxy (``recording_proxy``: the kubeconfig it is given
points there). Every page and action that reaches the API is driven over plain HTTP with a
session cookie: the overview, the jobs list and its stream, a training job's page and stream and
its pod's log, the history the recorder keeps when that job finishes (the log it reads then), an
elastic job scaled through its scale subresource, suspended, resumed and deleted, the queues and
the runtimes. Each request becomes the (group, resource, verb) a real API server's authorizer
checks; ``manifests.rules()`` must grant all of them and every grant must have been asked for.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_jobs import pytorchjob
from recording_proxy import Recorder, differences, grants, proxied, recording

from conftest import REPO, Kubectl, Plane, eventually, free_port, own_plane
from trainyard.dashboard import manifests, views

pytestmark = pytest.mark.e2e

JOB_PLURALS = {(k.group, k.plural) for k in views.job_kinds()}
PYTORCHJOBS = ("kubeflow.org", "pytorchjobs")
JOBS = "/dashboard/api/jobs/default/pytorchjobs"
WRITE = {"X-Yard-Dashboard": "1", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    # plain http: the recording proxy in front of the plane is a plain http one
    yield from own_plane(tmp_path_factory, "dash-rbac", secure=False)


@pytest.fixture(scope="module")
def kube(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("dash-rbac-kube-cache"))


class Dashboard:
    """``python -m trainyard.dashboard serve`` through ``plane``'s kubeconfig, and a session on it."""

    def __init__(self, plane: Plane, home: Path) -> None:
        self.port = free_port()
        self.token_file = home / "token"
        self.token_file.write_text("the-owners-token\n")
        self.log = home / "dashboard.log"
        argv = [sys.executable, "-m", "trainyard.dashboard", "serve", "--kubeconfig", str(plane.kubeconfig)]
        argv += ["--address", "127.0.0.1", "--port", str(self.port), "--history", str(home / "history.db")]
        argv += ["--token-file", str(self.token_file)]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO, start_new_session=True
            )
        self.cookie = ""

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def _listening(self) -> bool:
        assert self.process.poll() is None, self.log.read_text()
        try:
            return self.call("GET", "/dashboard/api/jobs")[0] == 401
        except OSError:
            return False

    def log_in(self) -> None:
        eventually(self._listening, timeout=60, what="the dashboard listening")
        cmd = [sys.executable, "-m", "trainyard.dashboard", "login", "--port", str(self.port)]
        printed = subprocess.run(
            [*cmd, "--token-file", str(self.token_file)], capture_output=True, text=True, timeout=60, check=True
        )
        conn = self.connection()
        conn.request("GET", printed.stdout.strip())
        answer = conn.getresponse()
        assert answer.status == 303, answer.read()
        self.cookie = answer.getheader("Set-Cookie", "").partition(";")[0]
        conn.close()

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        conn = self.connection()
        headers = {"Cookie": self.cookie, **(WRITE if method != "GET" else {})}
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        conn.close()
        text = data.decode()
        kind = answer.getheader("Content-Type", "")
        return answer.status, json.loads(text) if kind.startswith("application/json") else text

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        code, found = self.call(method, path, body)
        assert code == 200, f"{method} {path}: {code} {found}"
        return found

    def first_event(self, path: str, event: str) -> Any:
        """The data of the first ``event`` that the server-sent stream at ``path`` sends."""
        conn = self.connection()
        conn.request("GET", path, headers={"Cookie": self.cookie, "Accept": "text/event-stream"})
        answer = conn.getresponse()
        assert answer.status == 200, answer.read()
        name = ""
        try:
            while line := answer.fp.readline():
                text = line.decode().rstrip("\n")
                if text.startswith("event:"):
                    name = text.partition(":")[2].strip()
                elif text.startswith("data:") and name == event:
                    return json.loads(text.partition(":")[2])
        finally:
            conn.close()
        raise AssertionError(f"{path} ended before a {event!r} event")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def recorder(plane: Plane) -> Iterator[Recorder]:
    with recording(plane) as server:
        yield server


def elastic(name: str) -> dict[str, Any]:
    sleep = ["python3", "-c", "import time; time.sleep(3600)"]
    container = {"name": "pytorch", "image": "python:3.11", "command": sleep}
    pod = {"terminationGracePeriodSeconds": 1, "containers": [container]}
    worker = {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": pod}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d"},
            "pytorchReplicaSpecs": {"Worker": worker},
        },
    }


def worker_pods(detail: dict[str, Any]) -> list[dict[str, Any]]:
    return [pod for r in detail["replicas"] if r["type"].lower() == "worker" for pod in r["pods"]]


def history_row(dash: Dashboard, name: str, field: str) -> dict[str, Any] | None:
    rows = dash.ok("GET", "/dashboard/api/history?namespace=default")["items"]
    return next((r for r in rows if r["name"] == name and r[field]), None)


def test_the_dashboards_role_grants_exactly_what_it_asks_for(
    plane: Plane, kube: Kubectl, recorder: Recorder, tmp_path: Path
) -> None:
    dash = Dashboard(proxied(plane, recorder, tmp_path / "proxied"), tmp_path)
    try:
        dash.log_in()
        kube("create", "-f", "-", input=json.dumps(pytorchjob("train", 3, 0.5)))
        kube("create", "-f", "-", input=json.dumps(elastic("stretch")))
        overview = dash.ok("GET", "/dashboard/api/overview")  # lists the queues and the runtimes too
        assert {"kind": "PyTorchJob", "scalable": True}.items() <= next(
            k for k in overview["kinds"] if k["kind"] == "PyTorchJob"
        ).items()
        eventually(
            lambda: {"train", "stretch"} <= {r["name"] for r in dash.ok("GET", "/dashboard/api/jobs")["items"]},
            timeout=60,
            what="both jobs in the dashboard's list",
        )
        snapshot = dash.first_event("/dashboard/api/jobs/stream", "snapshot")
        assert {"train", "stretch"} <= {r["name"] for r in snapshot["items"]}
        dash.ok("GET", "/dashboard/api/queues")
        dash.ok("GET", "/dashboard/api/runtimes")

        # a training job: its page, its stream, its pod's log; finished, its history with the log kept
        assert dash.ok("GET", f"{JOBS}/train")["row"]["name"] == "train"
        assert dash.first_event(f"{JOBS}/train/stream", "detail")["row"]["name"] == "train"
        pod = "train-master-0"
        eventually(
            lambda: "epoch 1/3" in str(dash.call("GET", f"/dashboard/api/logs/default/{pod}?follow=false")[1]),
            timeout=60,
            what=f"{pod}'s log through the dashboard",
        )
        done = eventually(lambda: history_row(dash, "train", "finished"), timeout=90, what="train in the history")
        uid = done["uid"]

        def kept_log() -> list[dict[str, Any]]:
            return [log for log in dash.ok("GET", f"/dashboard/api/history/{uid}")["logs"] if log["pod"] == pod]

        (kept,) = eventually(kept_log, timeout=60, what="the recorder's copy of the finished pod's log")
        assert "training done" in dash.ok("GET", f"/dashboard/api/history/{uid}/logs/{pod}/{kept['container']}")
        assert dash.ok("GET", f"/dashboard/api/metrics/{uid}")["row"]["name"] == "train"

        # an elastic job: scaled to 2 Workers (the scale subresource), suspended, resumed, deleted
        eventually(
            lambda: (dash.ok("GET", f"{JOBS}/stretch")["actions"]["scale"] or {}).get("replicas") == 1,
            timeout=60,
            what="stretch scalable from 1 Worker",
        )
        assert dash.ok("POST", f"{JOBS}/stretch/scale", {"replicas": 2})["name"] == "stretch"
        eventually(
            lambda: len(worker_pods(dash.ok("GET", f"{JOBS}/stretch"))) == 2, timeout=60, what="stretch's 2 Workers"
        )
        assert dash.ok("POST", f"{JOBS}/stretch/suspend")["suspended"] is True
        assert dash.ok("POST", f"{JOBS}/stretch/resume")["suspended"] is False
        assert dash.ok("DELETE", f"{JOBS}/stretch") == {}
        eventually(lambda: history_row(dash, "stretch", "deleted"), timeout=60, what="stretch deleted, in the history")
    finally:
        dash.stop()

    print(recorder.summary())
    observed = recorder.authorizations()
    missing, unused = differences(observed, grants(manifests.rules()), plurals=JOB_PLURALS, template=PYTORCHJOBS)
    assert not missing, f"the dashboard asked for what deploy/dashboard does not grant: {sorted(missing)}"
    assert not unused, f"deploy/dashboard grants what the dashboard never asked for: {sorted(unused)}"
