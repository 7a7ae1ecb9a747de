"""The OptimizationJob controller's caches: a trial's change enqueues its OptimizationJob, a pass reads its
trials by owner, and a TrainJob of a trial's name that is someone else's is told, never taken."""

from __future__ import annotations

import asyncio
from typing import Any

from lightkube import AsyncClient, KubeConfig

from trainyard.api import trainer
from trainyard.embedded import kubeconfig
from trainyard.kit.informer import OWNER_INDEX
from trainyard.operator.optimizationjobs import OptimizationJobController


def controller() -> OptimizationJobController:
    # Never connected to: these tests fill the caches through the informers' write-through.
    client = AsyncClient(KubeConfig.from_dict(kubeconfig("http://127.0.0.1:1")))
    return OptimizationJobController(client, namespace="*", workers=1)


def trainjob(name: str, owner: str | None, uid: str = "uid-tune", version: str = "1") -> dict[str, Any]:
    refs = [
        {
            "apiVersion": trainer.API_VERSION,
            "kind": trainer.OPTIMIZATIONJOB,
            "name": owner,
            "uid": uid,
            "controller": True,
        }
    ]
    meta = {"namespace": "ml", "name": name, "resourceVersion": version, "ownerReferences": refs if owner else []}
    return {"apiVersion": trainer.API_VERSION, "kind": trainer.TRAINJOB, "metadata": meta}


def queued(ojc: OptimizationJobController) -> set[tuple[str, str]]:
    async def drain() -> set[tuple[str, str]]:
        return {await ojc.queue.get() for _ in range(len(ojc.queue))}

    return asyncio.run(drain())


def test_a_trial_change_enqueues_its_optimizationjob_only() -> None:
    ojc = controller()
    ojc._on_trainjob("MODIFIED", trainjob("tune-trial-0", "tune"))
    ojc._on_trainjob("MODIFIED", trainjob("alone", None))
    assert queued(ojc) == {("ml", "tune")}


def test_trials_are_read_by_owner_and_a_strangers_name_is_told() -> None:
    ojc = controller()
    ojc.trainjobs.mutated(trainjob("tune-trial-0", "tune"))
    ojc.trainjobs.mutated(trainjob("tune-trial-1", "tune", uid="uid-an-older-tune"))
    ojc.trainjobs.mutated(trainjob("other-trial-0", "other", uid="uid-other"))
    owned = ojc.trainjobs.by_index(OWNER_INDEX, f"{trainer.OPTIMIZATIONJOB}/ml/tune")
    assert sorted(t["metadata"]["name"] for t in owned) == [
        "tune-trial-0",
        "tune-trial-1",
    ]  # the uid is the reconciler's
    job = {"metadata": {"namespace": "ml", "name": "tune", "uid": "uid-tune"}}
    assert ojc._taken(job, "tune-trial-0") is None  # its own, made by an earlier pass
    assert ojc._taken(job, "tune-trial-5") is None  # not cached yet: its own too
    why = ojc._taken(job, "tune-trial-1")
    assert why is not None and "is not this OptimizationJob's trial: delete or rename it" in why
