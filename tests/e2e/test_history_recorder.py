"""The history recorder against the session plane: the dashboard's watches and the recorder run
in this process (as the plane will run them), a real PyTorchJob reports three epochs through
``trainyard.runtime`` and prints a long log, finishes, and is deleted; the store then holds every
point (each told to ``on_point`` too), the job's final object as deleted, its pod, its events and
the end of its log, cut at a line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from lightkube import AsyncClient, KubeConfig

from conftest import Kubectl, Plane, eventually_async
from trainyard.dashboard.history.recorder import Recorder
from trainyard.dashboard.history.store import HistoryStore
from trainyard.dashboard.watching import Watched

pytestmark = pytest.mark.e2e
LOG_BYTES = 4096

SCRIPT = """
import time
from trainyard import runtime
for epoch in (1, 2, 3):
    runtime.report(epoch=epoch, total_epochs=3, metrics={"loss": 1.0 / epoch})
    runtime.flush()
    time.sleep(0.5)  # training; each report is its own status write
for i in range(2000):
    print(f"line {i:04d} of the training log", flush=True)
"""


def job(namespace: str) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["python3", "-c", SCRIPT]}
    master = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "recorded", "namespace": namespace},
        "spec": {"pytorchReplicaSpecs": {"Master": master}},
    }


def test_a_finished_and_deleted_job_keeps_its_points_object_events_and_log(
    plane: Plane, kubectl: Kubectl, tmp_path: Path
) -> None:
    namespace = f"history-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace)
    store = HistoryStore(tmp_path / "history.db", log_bytes=LOG_BYTES)
    told: list[tuple[str, dict[str, Any]]] = []

    async def scenario() -> None:
        client = AsyncClient(KubeConfig.from_file(plane.kubeconfig))
        watched = Watched(client)
        recorder = Recorder(client, watched, store, clock=lambda: datetime.now(UTC), log_bytes=LOG_BYTES)
        recorder.on_point.append(lambda uid, point: told.append((uid, point)))
        tasks = [asyncio.create_task(watched.run()), asyncio.create_task(recorder.run())]
        try:
            await asyncio.to_thread(kubectl, "create", "-f", "-", input=json.dumps(job(namespace)))

            def ours() -> list[dict[str, Any]]:
                return [r for r in store.rows(namespace=namespace) if r["name"] == "recorded"]

            finished = (
                await eventually_async(ours, timeout=120, what="the job to finish in the history", interval=0.2)
            )[0]
            uid = finished["uid"]
            assert finished["state"] == "Succeeded" and finished["deleted"] is None

            def logged() -> bytes | None:
                data = store.log(uid, "recorded-master-0", "pytorch")
                return data if data and data.endswith(b"line 1999 of the training log\n") else None

            data = await eventually_async(logged, what="the master's log", interval=0.2, timeout=60)
            assert len(data) <= LOG_BYTES and data.startswith(b"line ")  # the tail, from a line's start
            await asyncio.to_thread(kubectl, "delete", "pytorchjob", "recorded", "-n", namespace)
            deleted = (
                await eventually_async(
                    lambda: [r for r in ours() if r["deleted"]], what="the job's deletion", interval=0.2, timeout=60
                )
            )[0]
            assert deleted["uid"] == uid and deleted["state"] == "Succeeded"
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await client.close()

        detail = store.detail(uid)
        assert detail is not None
        assert [(p["epoch"], p["metrics"]["loss"]) for p in detail["metrics"]] == [(1, 1.0), (2, 0.5), (3, 1 / 3)]
        assert [point for job_uid, point in told if job_uid == uid] == detail["metrics"]
        assert detail["row"]["epoch"] == 3 and detail["row"]["totalEpochs"] == 3
        pods = [p for group in detail["replicas"] for p in group["pods"]]
        assert [p["name"] for p in pods] == ["recorded-master-0"]
        # The job's events and its pod's (kept after the pod went).
        objects = {(e["object"], e["reason"]) for e in detail["events"]}
        assert {("PyTorchJob/recorded", "SuccessfulCreatePod"), ("Pod/recorded-master-0", "Started")} <= objects
        assert {"pod": "recorded-master-0", "container": "pytorch", "bytes": len(data)} in detail["logs"]
        assert (store.job(uid) or {}).get("status", {}).get("conditions")

    try:
        asyncio.run(scenario())
    finally:
        store.close()
        kubectl.run("delete", "namespace", namespace, "--wait=false")
