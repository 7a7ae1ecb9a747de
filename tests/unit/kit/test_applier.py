"""The kit's applier against a real API server (the embedded plane's, in process, on loopback):
idempotent creates and deletes, replaces and status writes refused when stale, what another writer
owns never written, and the status server and the reconciler racing on one job's status."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from trainyard.api.kinds import KINDS
from trainyard.client.resources import is_status, job_resource, plain_resource, to_dict
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.plane import ApiPlane
from trainyard.embedded import kubeconfig
from trainyard.kit.applier import Applier, merge_patch, owned_by
from trainyard.kit.informer import Informer
from trainyard.kit.plans import Event
from trainyard.operator.statusserver import StatusHandler

CONFIGMAP = plain_resource("", "v1", "ConfigMap", "configmaps")
EVENT = plain_resource("", "v1", "Event", "events")
PYTORCH = KINDS["PyTorchJob"]
JOB = job_resource(PYTORCH)

Scenario = Callable[[AsyncClient], Awaitable[None]]


def on_a_plane(tmp_path: Path, scenario: Scenario) -> None:
    async def main() -> None:
        plane = ApiPlane(Layout(tmp_path), port=0)
        await plane.start()
        client = AsyncClient(KubeConfig.from_dict(kubeconfig(plane.url)))
        try:
            await scenario(client)
        finally:
            await client.close()
            await plane.stop()

    asyncio.run(main())


def pytorchjob(name: str) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["true"]}
    return {
        "apiVersion": PYTORCH.api_version,
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}}}},
    }


def test_the_merge_patch_removes_what_the_new_value_dropped_at_every_level() -> None:
    old = {"best": {"metric": "accuracy", "value": 0.9}, "lastCheckpoint": {"path": "/a", "epoch": 1}, "x": 1}
    new = {"lastCheckpoint": {"path": "/b"}, "x": 2}
    assert merge_patch(old, new) == {"best": None, "lastCheckpoint": {"path": "/b", "epoch": None}, "x": 2}
    assert merge_patch(None, new) == new


def test_creates_and_deletes_are_idempotent_and_answers_reach_the_cache(tmp_path: Path) -> None:
    async def scenario(client: AsyncClient) -> None:
        applier = Applier(client, component="test-controller")
        cache = Informer(client, CONFIGMAP)
        body = {"metadata": {"name": "cm", "namespace": "default"}, "data": {"a": "1"}}
        created = await applier.create(CONFIGMAP, body, cache)
        assert created is not None and version(cache.get("default", "cm")) == version(created)
        assert await applier.create(CONFIGMAP, body, cache) is None  # already there: success, nothing new

        stale = {**created, "data": {"a": "2"}}
        await applier.replace(CONFIGMAP, stale, cache)
        with pytest.raises(ApiError) as refused:
            await applier.replace(CONFIGMAP, {**stale, "data": {"a": "3"}}, cache)  # the older version
        assert is_status(refused.value, 409)

        other_uid = "00000000-0000-0000-0000-000000000000"
        gone = await applier.delete(CONFIGMAP, "cm", namespace="default", uid=other_uid, cache=cache)
        assert gone is None and await applier.get(CONFIGMAP, "cm", namespace="default") is not None
        uid = created["metadata"]["uid"]
        assert await applier.delete(CONFIGMAP, "cm", namespace="default", uid=uid, cache=cache) is not None
        assert cache.get("default", "cm") is None
        assert await applier.delete(CONFIGMAP, "cm", namespace="default", uid=uid, cache=cache) is None

    on_a_plane(tmp_path, scenario)


def test_the_status_write_is_refused_when_stale_and_never_sends_another_writers_field(tmp_path: Path) -> None:
    async def scenario(client: AsyncClient) -> None:
        applier = Applier(client, component="test-controller", owned_elsewhere=("trainingProgress",))
        cache = Informer(client, JOB)
        job = to_dict(await client.create(JOB(pytorchjob("job"))))  # type: ignore[operator]
        progress = {"metadata": {"resourceVersion": job["metadata"]["resourceVersion"]}}
        progress["status"] = {"trainingProgress": {"currentEpoch": 3}, "replicaStatuses": {"Master": {"active": 1}}}
        seeded = to_dict(
            await client.patch(JOB.Status, "job", progress, namespace="default", patch_type=PatchType.MERGE)
        )

        with pytest.raises(ApiError) as refused:
            await applier.write_status(JOB, job, {"conditions": []}, cache)  # computed from the older copy
        assert is_status(refused.value, 409)

        # A whole status that lacks the other writer's field, and one that carries an old copy of it.
        mine = {"replicaStatuses": {}, "conditions": [{"type": "Created", "status": "True", "reason": "Made"}]}
        written = await applier.write_status(JOB, seeded, mine, cache, whole=True)
        assert written["status"]["trainingProgress"] == {"currentEpoch": 3}
        assert written["status"]["replicaStatuses"] == {}
        again = {**mine, "trainingProgress": {"currentEpoch": 1}}
        written = await applier.write_status(JOB, written, again, cache)
        assert written["status"]["trainingProgress"] == {"currentEpoch": 3}
        assert version(cache.get("default", "job")) == version(written)

        await applier.emit(owner_ref(written), [Event.normal("Made", "job made"), Event.warning("Odd", "odd")])
        events = [to_dict(e) async for e in client.list(EVENT, namespace="default")]
        assert sorted((e["type"], e["reason"], e["source"]["component"]) for e in events) == [
            ("Normal", "Made", "test-controller"),
            ("Warning", "Odd", "test-controller"),
        ]

    on_a_plane(tmp_path, scenario)


def version(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion"))


def owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], **{k: m[k] for k in ("name", "namespace", "uid")}}


def test_the_status_server_and_the_reconciler_never_undo_each_other(tmp_path: Path) -> None:
    """One status truth: training code's reports (the status server's ``trainingProgress``) and the
    reconciler's status (conditions), written concurrently many times, both end as last written."""
    rounds = 25

    async def scenario(client: AsyncClient) -> None:
        applier = Applier(client, component="test-controller", owned_elsewhere=("trainingProgress",))
        cache = Informer(client, JOB)
        await client.create(JOB(pytorchjob("raced")))  # type: ignore[operator]
        server = StatusHandler(client)

        async def reports() -> None:
            for step in range(1, rounds + 1):
                answer = None
                while answer is None:
                    answer = await server._merge_once(PYTORCH, "default", "raced", {"epoch": step, "step": step})
                assert answer.status == 200

        async def passes() -> None:
            for n in range(1, rounds + 1):
                while True:
                    # Each pass reads the job afresh and writes a whole status from what it read,
                    # which carries the progress as it then was (a pass computes from its copy).
                    job = to_dict(await client.get(JOB, "raced", namespace="default"))
                    status = {**(job.get("status") or {}), "conditions": [{"type": "Created", "status": "True"}]}
                    status["conditions"][0]["reason"] = f"Pass{n}"
                    try:
                        await applier.write_status(JOB, job, status, cache, whole=True)
                        break
                    except ApiError as exc:
                        if not is_status(exc, 409):
                            raise
                await asyncio.sleep(0)

        await asyncio.gather(reports(), passes())
        final = to_dict(await client.get(JOB, "raced", namespace="default"))["status"]
        assert final["trainingProgress"]["currentEpoch"] == rounds
        assert final["conditions"][0]["reason"] == f"Pass{rounds}"

    on_a_plane(tmp_path, scenario)


def test_owned_by_puts_the_child_in_its_owners_namespace_under_its_control() -> None:
    owner = {"metadata": {"name": "tj", "namespace": "team", "uid": "u1"}}
    child = owned_by({"kind": "JobSet", "metadata": {"name": "tj"}}, owner, "trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert child["metadata"]["namespace"] == "team"
    assert child["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "tj",
            "uid": "u1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
