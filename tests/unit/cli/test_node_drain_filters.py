"""``yard node drain``'s choice of pods, as kubectl drain's filters word it."""

from __future__ import annotations

from trainyard.api.meta import Obj
from trainyard.cli.nodedrain import MIRROR, pods_to_evict


def pod(name: str, owner: str | None = "PyTorchJob", phase: str = "Running", emptydir: bool = False) -> Obj:
    meta: Obj = {"name": name, "namespace": "ns"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o", "controller": True}]
    spec: Obj = {"volumes": [{"name": "scratch", "emptyDir": {}}]} if emptydir else {}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def names(pods: list[Obj]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_daemonset_and_mirror_pods_stay_the_rest_goes() -> None:
    mirror = pod("m")
    mirror["metadata"]["annotations"] = {MIRROR: "x"}
    chosen = pods_to_evict([pod("w"), pod("d", owner="DaemonSet"), mirror], force=False, delete_emptydir_data=False)
    assert names(chosen.evict) == ["w"]
    assert chosen.warnings == ["ignoring DaemonSet-managed Pods: ns/d"] and chosen.errors == []


def test_unmanaged_and_local_storage_pods_need_their_flags() -> None:
    pods = [pod("bare", owner=None), pod("scratch", emptydir=True), pod("done", owner=None, phase="Succeeded")]
    refused = pods_to_evict(pods, force=False, delete_emptydir_data=False)
    assert names(refused.evict) == ["done"]
    assert refused.errors == [
        "cannot delete Pods that declare no controller (use --force to override): ns/bare",
        "cannot delete Pods with local storage (use --delete-emptydir-data to override): ns/scratch",
    ]
    allowed = pods_to_evict(pods, force=True, delete_emptydir_data=True)
    assert names(allowed.evict) == ["bare", "scratch", "done"]
    assert allowed.warnings == [
        "deleting Pods that declare no controller: ns/bare",
        "deleting Pods with local storage: ns/scratch",
    ]
