"""A job the operator cannot read (written where no webhook checked it) is a permanent failure: the
pass says why with upstream's reason, and the job is told once, by a Failed condition and a Warning
event, not retried until it changes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lightkube import AsyncClient, KubeConfig

from trainyard.api.kinds import KINDS
from trainyard.client.resources import build, job_resource, plain_resource, to_dict
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.plane import ApiPlane
from trainyard.embedded import kubeconfig
from trainyard.frameworks.registry import plugin_for
from trainyard.kit.worker import Permanent
from trainyard.operator.controller import JobController
from trainyard.operator.ports import PortAllocator
from trainyard.operator.settings import OperatorSettings

PYTORCH = KINDS["PyTorchJob"]
EVENT = plain_resource("", "v1", "Event", "events")


def controller(client: AsyncClient) -> JobController:
    return JobController(
        client, plugin_for("PyTorchJob"), OperatorSettings(), ports=PortAllocator(low=30000, high=30010)
    )


def pytorchjob(name: str, replicas: Any = 1) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["true"]}
    master = {"replicas": replicas, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": PYTORCH.api_version,
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"pytorchReplicaSpecs": {"Master": master}},
    }


def test_a_job_that_does_not_parse_fails_the_pass_permanently_with_its_field_paths() -> None:
    jc = controller(AsyncClient(KubeConfig.from_dict(kubeconfig("http://127.0.0.1:1"))))  # never connected to
    jc.jobs.mutated(pytorchjob("bad", replicas="two"))

    with pytest.raises(Permanent) as raised:
        asyncio.run(jc.reconcile(("default", "bad")))

    assert raised.value.reason == "PyTorchJobFailedValidation"
    assert raised.value.message.startswith(
        "PyTorchJob failed validation because spec.pytorchReplicaSpecs.Master.replicas"
    )


def test_it_is_told_once_by_a_failed_condition_and_a_warning_event(tmp_path: Path) -> None:
    async def main() -> None:
        plane = ApiPlane(Layout(tmp_path), port=0)
        await plane.start()
        client = AsyncClient(KubeConfig.from_dict(kubeconfig(plane.url)))
        try:
            body = pytorchjob("told")
            del body["metadata"]["uid"], body["metadata"]["resourceVersion"]
            stored = to_dict(await client.create(build(job_resource(PYTORCH), body)))
            jc = controller(client)
            jc.jobs.mutated(stored)
            why = Permanent("PyTorchJobFailedValidation", "PyTorchJob failed validation because x: y")
            await jc._tell_permanent(("default", "told"), why)
            await jc._tell_permanent(("default", "told"), why)  # the next pass: already told

            job = to_dict(await client.get(job_resource(PYTORCH), "told", namespace="default"))
            (failed,) = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
            assert (failed["status"], failed["reason"], failed["message"]) == ("True", why.reason, why.message)
            events = [to_dict(e) async for e in client.list(EVENT, namespace="default")]
            told = [e for e in events if e["reason"] == why.reason]
            assert [(e["type"], e["message"], e.get("count", 1)) for e in told] == [("Warning", why.message, 1)]
        finally:
            await client.close()
            await plane.stop()

    asyncio.run(main())
