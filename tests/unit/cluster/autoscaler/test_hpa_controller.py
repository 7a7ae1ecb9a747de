"""The autoscaler's shell against a real API server (in process, on loopback), with the custom
metrics API registered as the plane registers it: discovery lists the group, the controller reads a
job's reported metric through it, rescales the job through ``/scale``, writes the HPA's status and
events, and scales back down once the (injected) clock leaves the stabilization window."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lightkube import KubeConfig
from lightkube.core.generic_client import BasicRequest
from lightkube.types import PatchType

from trainyard.api.kinds import KINDS
from trainyard.client.resources import build, job_resource, plain_resource, to_dict
from trainyard.client.transport import Client, route_directly
from trainyard.cluster.clients.autoscaler.controller import HPA, HorizontalController
from trainyard.cluster.clients.metrics.custom import CustomMetrics
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.plane import ApiPlane
from trainyard.embedded import kubeconfig

JOB = job_resource(KINDS["PyTorchJob"])
EVENT = plain_resource("", "v1", "Event", "events")
NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
SELECTOR = "training.kubeflow.org/job-name=j,training.kubeflow.org/replica-type=worker"


def on_a_plane(tmp_path: Path, scenario: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        plane = ApiPlane(Layout(tmp_path), port=0)
        await plane.start()
        client = Client(KubeConfig.from_dict(kubeconfig(plane.url)), field_manager="test")
        route_directly(client, plane.loopback.call)
        plane.server.aggregated["custom.metrics.k8s.io"] = CustomMetrics(
            client, lambda: NOW, ["pytorchjobs.kubeflow.org"]
        )
        try:
            await scenario(client)
        finally:
            await client.close()
            await plane.stop()

    asyncio.run(main())


def job() -> dict[str, Any]:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["true"]}
    worker = {"replicas": 2, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "default"},
        "spec": {"pytorchReplicaSpecs": {"Worker": worker}},
    }


def hpa() -> dict[str, Any]:
    metric = {
        "type": "Object",
        "object": {
            "describedObject": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "j"},
            "metric": {"name": "queue_depth"},
            "target": {"type": "AverageValue", "averageValue": "10"},
        },
    }
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "j", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "j"},
            "minReplicas": 1,
            "maxReplicas": 5,
            "metrics": [metric],
        },
    }


async def report(client: Client, depth: int, active: int = 2) -> None:
    # what the operator writes (the scale's selector path) and the status server (the report)
    worker = {"Worker": {"selector": SELECTOR, "active": active}}
    status = {"status": {"replicaStatuses": worker, "trainingProgress": {"metrics": {"queue_depth": depth}}}}
    await client.patch(JOB.Status, "j", status, namespace="default", patch_type=PatchType.MERGE)


async def raw(client: Client, path: str) -> dict[str, Any]:
    answer = await client.send_prepared(BasicRequest(method="GET", url=path))
    found: dict[str, Any] = json.loads(answer.content)
    return found


def test_the_autoscaler_scales_a_job_on_its_reported_metric_through_the_api(tmp_path: Path) -> None:
    async def scenario(client: Client) -> None:
        groups = [g["name"] for g in (await raw(client, "apis"))["groups"]]
        assert "custom.metrics.k8s.io" in groups
        listed = await raw(client, "apis/custom.metrics.k8s.io/v1beta2")
        assert listed["resources"][0]["name"] == "pytorchjobs.kubeflow.org/*"
        await client.create(build(JOB, job()))
        await report(client, 25)
        await client.create(build(HPA, hpa()))
        clock = [1000.0]
        controller = HorizontalController(client, downscale_window=60, clock=lambda: NOW, monotonic=lambda: clock[0])
        informer = controller.hpas.start("test hpas")
        await controller.hpas.synced.wait()
        try:
            assert await controller.reconcile(("default", "j")) == controller.sync_period
            scaled = to_dict(await client.get(JOB, "j", namespace="default"))
            assert scaled["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
            status = to_dict(await client.get(HPA, "j", namespace="default"))["status"]
            assert (status["currentReplicas"], status["desiredReplicas"]) == (2, 3)
            assert status["currentMetrics"][0]["object"]["current"] == {"averageValue": "12500m"}
            reasons = {c["type"]: c["reason"] for c in status["conditions"]}
            assert reasons == {
                "AbleToScale": "SucceededRescale",
                "ScalingActive": "ValidMetricFound",
                "ScalingLimited": "DesiredWithinRange",
            }
            events = [to_dict(e) async for e in client.list(EVENT, namespace="default")]
            assert [e["message"] for e in events if e["reason"] == "SuccessfulRescale"] == [
                "New size: 3; reason: external metric queue_depth(nil) above target"
            ]

            # 5 asks for 1: held for the window, then taken (each pass's status write is in the informer at once).
            await report(client, 5, active=3)
            clock[0] += 30
            await controller.reconcile(("default", "j"))
            status = to_dict(await client.get(HPA, "j", namespace="default"))["status"]
            able = next(c for c in status["conditions"] if c["type"] == "AbleToScale")
            assert able["reason"] == "ScaleDownStabilized" and status["desiredReplicas"] == 3
            clock[0] += 31
            await controller.reconcile(("default", "j"))
            scaled = to_dict(await client.get(JOB, "j", namespace="default"))
            assert scaled["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
        finally:
            informer.cancel()

    on_a_plane(tmp_path, scenario)
