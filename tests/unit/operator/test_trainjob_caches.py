"""The TrainJob controller's caches: a runtime's change enqueues exactly the TrainJobs that name it
(the TrainJob cache's runtime index), and a pass reads the runtime and the children from the caches."""

from __future__ import annotations

import asyncio
from typing import Any

from lightkube import AsyncClient, KubeConfig

from trainyard.api import jobset, trainer
from trainyard.controller.trainjob import TrainJobSettings
from trainyard.embedded import kubeconfig
from trainyard.operator.ports import PortAllocator
from trainyard.operator.trainjobs import TrainJobController


def controller() -> TrainJobController:
    # Never connected to: these tests fill the caches through the informers' write-through.
    client = AsyncClient(KubeConfig.from_dict(kubeconfig("http://127.0.0.1:1")))
    return TrainJobController(
        client, TrainJobSettings(), namespace="*", workers=1, ports=PortAllocator(low=30000, high=30010)
    )


def trainjob(namespace: str, name: str, runtime: str, kind: str | None = None, version: str = "1") -> dict[str, Any]:
    ref = {"name": runtime, **({"kind": kind} if kind else {})}
    meta = {"namespace": namespace, "name": name, "uid": f"uid-{name}", "resourceVersion": version}
    return {"apiVersion": trainer.API_VERSION, "kind": trainer.TRAINJOB, "metadata": meta, "spec": {"runtimeRef": ref}}


def queued(tjc: TrainJobController) -> set[tuple[str, str]]:
    async def drain() -> set[tuple[str, str]]:
        return {await tjc.queue.get() for _ in range(len(tjc.queue))}

    return asyncio.run(drain())


def test_a_runtime_change_enqueues_only_the_trainjobs_naming_it() -> None:
    tjc = controller()
    tjc.trainjobs.mutated(trainjob("a", "cluster", "torch"))  # kind defaults to ClusterTrainingRuntime
    tjc.trainjobs.mutated(trainjob("a", "local", "torch", trainer.TRAINING_RUNTIME))
    tjc.trainjobs.mutated(trainjob("b", "other", "torch", trainer.TRAINING_RUNTIME))

    tjc._on_runtime(trainer.TRAINING_RUNTIME, "ADDED", {"metadata": {"namespace": "a", "name": "torch"}})
    assert queued(tjc) == {("a", "local")}
    tjc._on_runtime(trainer.CLUSTER_TRAINING_RUNTIME, "MODIFIED", {"metadata": {"name": "torch"}})
    assert queued(tjc) == {("a", "cluster")}

    # A TrainJob that now names another runtime is filed under that one only.
    tjc.trainjobs.mutated(trainjob("a", "local", "mpi", trainer.TRAINING_RUNTIME, version="2"))
    tjc._on_runtime(trainer.TRAINING_RUNTIME, "MODIFIED", {"metadata": {"namespace": "a", "name": "torch"}})
    assert queued(tjc) == set()


def test_a_pass_reads_its_runtime_and_children_from_the_caches() -> None:
    tjc = controller()
    tj = trainjob("a", "run", "mine", trainer.TRAINING_RUNTIME)
    tjc.runtimes[trainer.TRAINING_RUNTIME].mutated(
        {"metadata": {"namespace": "a", "name": "mine", "resourceVersion": "3"}}
    )
    owner = {
        "apiVersion": trainer.API_VERSION,
        "kind": trainer.TRAINJOB,
        "name": "run",
        "uid": "uid-run",
        "controller": True,
    }
    mine = {"metadata": {"namespace": "a", "name": "run", "resourceVersion": "4", "ownerReferences": [owner]}}
    theirs = {"metadata": {"namespace": "a", "name": "else", "resourceVersion": "5"}}
    for obj in (mine, theirs):
        tjc.child_caches[jobset.API_VERSION, jobset.KIND].mutated(obj)

    runtime = tjc._runtime(tj)
    assert runtime is not None and (runtime["kind"], runtime["metadata"]["name"]) == (trainer.TRAINING_RUNTIME, "mine")
    assert tjc._runtime(trainjob("b", "run", "mine", trainer.TRAINING_RUNTIME)) is None  # not in b
    assert list(tjc._children(("a", "run"))) == [(jobset.KIND, "run")]
