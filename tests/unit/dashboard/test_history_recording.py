"""The recorder against a real API server (the embedded plane's, in process, no node): reports
written as the status server writes them become points (told to ``on_point``), a job's pod and
events are kept under it, a log that cannot be read is skipped without stopping anything, a
deleted job keeps its final object, and a job the history had as live that went while no
recorder watched is recorded as deleted once the watches have listed."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lightkube import AsyncClient, KubeConfig
from lightkube.types import PatchType

from conftest import eventually_async
from trainyard.api.kinds import KINDS
from trainyard.client.resources import build, job_resource, plain_resource, to_dict
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.plane import ApiPlane
from trainyard.dashboard.history.recorder import Recorder
from trainyard.dashboard.history.store import HistoryStore
from trainyard.dashboard.watching import Watched
from trainyard.embedded import kubeconfig

JOB = job_resource(KINDS["PyTorchJob"])
POD = plain_resource("", "v1", "Pod", "pods")
EVENT = plain_resource("", "v1", "Event", "events")
NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def pytorchjob(name: str) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["true"]}
    master = {"replicas": 1, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"pytorchReplicaSpecs": {"Master": master}},
    }


async def report(client: AsyncClient, epoch: int) -> None:
    # What the operator's status server writes for a replica's report.
    progress = {
        "currentEpoch": epoch,
        "totalEpochs": 3,
        "metrics": {"loss": 1 / epoch},
        "lastUpdateTime": f"2026-03-01T12:00:0{epoch}Z",
    }
    body = {"status": {"trainingProgress": progress}}
    await client.patch(JOB.Status, "j", body, namespace="default", patch_type=PatchType.MERGE)


def test_reports_pods_events_and_deletions_reach_the_history(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.db")
    ghost = {**pytorchjob("ghost"), "metadata": {"name": "ghost", "namespace": "default", "uid": "ghost-uid"}}
    store.record_job(ghost)  # recorded by an earlier run; deleted since
    told: list[tuple[str, dict[str, Any]]] = []

    async def main() -> None:
        plane = ApiPlane(Layout(tmp_path / "plane"), port=0)
        await plane.start()
        client = AsyncClient(KubeConfig.from_dict(kubeconfig(plane.url)))
        watched = Watched(client)
        recorder = Recorder(client, watched, store, clock=lambda: NOW)
        recorder.on_point.append(lambda uid, point: told.append((uid, point)))
        tasks = [asyncio.create_task(watched.run()), asyncio.create_task(recorder.run())]
        try:
            await scenario(client)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await client.close()
            await plane.stop()

    async def scenario(client: AsyncClient) -> None:
        gone = await eventually_async(
            lambda: [r for r in store.rows() if r["uid"] == "ghost-uid"],
            what="the ghost's deletion",
            interval=0.05,
            timeout=30,
        )
        assert gone[0]["deleted"] == "2026-03-01T12:00:00Z"

        job = to_dict(await client.create(build(JOB, pytorchjob("j"))))
        uid = job["metadata"]["uid"]
        await report(client, 1)
        await report(client, 2)
        await eventually_async(lambda: len(store.points(uid)) == 2, what="two points", interval=0.05, timeout=30)

        # A pod of the job whose container ended without a log the API can give: the read fails
        # (400: it never started on a node), the pod is kept all the same.
        owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "j", "uid": uid, "controller": True}
        labels = {"training.kubeflow.org/replica-type": "master"}
        meta = {"name": "j-master-0", "namespace": "default", "labels": labels, "ownerReferences": [owner]}
        pod_body = {"metadata": meta, "spec": {"containers": [{"name": "pytorch", "image": "python:3.11"}]}}
        pod = to_dict(await client.create(build(POD, pod_body)))
        ended = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2026-03-01T12:00:05Z"}}
        status = {"phase": "Failed", "containerStatuses": [{"name": "pytorch", "restartCount": 0, "state": ended}]}
        await client.patch(
            POD.Status, "j-master-0", {"status": status}, namespace="default", patch_type=PatchType.MERGE
        )
        involved = {"kind": "Pod", "name": "j-master-0", "namespace": "default", "uid": pod["metadata"]["uid"]}
        event = {
            "metadata": {"name": "j-master-0.1", "namespace": "default"},
            "involvedObject": involved,
            "type": "Warning",
            "reason": "BackOff",
            "message": "Back-off restarting failed container",
            "count": 1,
        }
        await client.create(build(EVENT, event))

        def pod_failed() -> Any:
            detail = store.detail(uid) or {}
            pods = [p for g in detail.get("replicas", []) for p in g["pods"]]
            return detail if pods and pods[0]["phase"] == "Failed" else None

        # A pod is kept as it ends; a running job's events wait for its end (its deletion, below).
        detail = await eventually_async(pod_failed, what="the failed pod", interval=0.05, timeout=30)
        assert detail["replicas"][0]["type"] == "master"
        assert detail["logs"] == []  # none could be read

        await report(client, 3)  # the recorder goes on after the failed read
        await eventually_async(lambda: len(store.points(uid)) == 3, what="the third point", interval=0.05, timeout=30)
        await client.delete(JOB, "j", namespace="default")
        row = await eventually_async(
            lambda: [r for r in store.rows() if r["uid"] == uid], what="the deletion", interval=0.05, timeout=30
        )
        assert row[0]["deleted"] == "2026-03-01T12:00:00Z" and row[0]["epoch"] == 3
        assert [p["epoch"] for p in store.points(uid)] == [1, 2, 3]
        assert [p for u, p in told if u == uid] == store.points(uid)
        events = (store.detail(uid) or {})["events"]
        assert [(e["reason"], e["object"]) for e in events] == [("BackOff", "Pod/j-master-0")]

    asyncio.run(main())
    store.close()
