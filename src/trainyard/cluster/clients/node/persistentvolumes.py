"""PersistentVolumeClaims on this machine: a persistentvolume-controller and a local-path provisioner.

What k3s users know: a default StorageClass ``local-path`` (provisioner ``rancher.io/local-path``,
``volumeBindingMode: WaitForFirstConsumer``, ``reclaimPolicy: Delete``) whose claims become a
directory per claim, ``$TRAINYARD_HOME/storage/pvc-<uid>_<namespace>_<name>``, served as a
``hostPath`` PersistentVolume ``pvc-<uid>`` pinned to this node. A claim stays ``Pending``
(event ``WaitForFirstConsumer``) until the node agent starts the first pod that mounts it; the
node then provisions and binds it (events ``Provisioning``, ``ProvisioningSucceeded``) before the
pod's containers start. The directory outlives the pods that use it and goes with the claim.

The controller part (``Storage.run``) does what kube-controller-manager does for volumes: binds
claims to matching PersistentVolumes a user created (``volumeName``, or class, access modes,
size, volume mode and ``selector.matchLabels``), provisions claims of ``Immediate`` classes at once,
assigns the default class to claims without one, keeps ``kubernetes.io/pvc-protection`` (a claim
in use by a pod that has not finished stays ``Terminating``) and ``kubernetes.io/pv-protection``,
and reclaims a volume whose claim is gone: ``Retain`` leaves it ``Released``, ``Delete`` removes
the provisioned directory and the PersistentVolume.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim, Pod
from lightkube.resources.storage_v1 import StorageClass
from lightkube.types import PatchType

from trainyard.api.meta import Obj
from trainyard.api.quantity import parse_quantity
from trainyard.client.events import record_event
from trainyard.client.resources import build, is_status
from trainyard.client.watches import watch_forever

log = logging.getLogger(__name__)


CLASS = "local-path"
PROVISIONER = "rancher.io/local-path"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
CONTROLLER = "persistentvolume-controller"
# How often the controller looks again while a claim waits for its pods to finish before it can go.
RECHECK_SECONDS = 2.0
TERMINAL = ("Succeeded", "Failed")


def local_path_class() -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": CLASS, "annotations": {DEFAULT_CLASS: "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def claim_names(pod: Obj) -> list[str]:
    out = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if name and name not in out:
            out.append(name)
    return out


def _bound(claim: Obj) -> bool:
    return (claim.get("status") or {}).get("phase") == "Bound" and bool((claim.get("spec") or {}).get("volumeName"))


def _size(obj: Obj, *path: str) -> Any:
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    try:
        return parse_quantity(str(node))
    except ValueError:
        return None


def matches(claim: Obj, pv: Obj) -> bool:
    """Whether a user's PersistentVolume can satisfy ``claim`` (the controller's static binding)."""
    spec, pv_spec = claim.get("spec") or {}, pv.get("spec") or {}
    if pv_spec.get("claimRef") or (pv.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if (pv.get("status") or {}).get("phase") not in (None, "Pending", "Available"):
        return False
    if (spec.get("storageClassName") or "") != (pv_spec.get("storageClassName") or ""):
        return False
    if (spec.get("volumeMode") or "Filesystem") != (pv_spec.get("volumeMode") or "Filesystem"):
        return False
    if not set(spec.get("accessModes") or []) <= set(pv_spec.get("accessModes") or []):
        return False
    selector = spec.get("selector") or {}
    if selector.get("matchExpressions"):
        return False  # not evaluated here: never bind on a guess
    labels = (pv.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    wanted, offered = _size(claim, "spec", "resources", "requests", "storage"), _size(pv, "spec", "capacity", "storage")
    return wanted is not None and offered is not None and offered >= wanted


def provisioned_volume(claim: Obj, storage_class: Obj, node: str, path: Path) -> Obj:
    """The PersistentVolume the local-path provisioner creates for ``claim``, pre-bound to it."""
    m, spec = claim["metadata"], claim.get("spec") or {}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{m['uid']}",
            "annotations": {PROVISIONED_BY: PROVISIONER, "local.path.provisioner/selected-node": node},
            "finalizers": [PV_PROTECTION],
        },
        "spec": {
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")},
            "claimRef": _claim_ref(claim),
            "hostPath": {"path": str(path), "type": "DirectoryOrCreate"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
                    ]
                }
            },
            "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
            "storageClassName": storage_class["metadata"]["name"],
            "volumeMode": spec.get("volumeMode") or "Filesystem",
        },
    }


def _claim_ref(claim: Obj) -> Obj:
    m = claim["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": m["namespace"],
        "name": m["name"],
        "uid": m["uid"],
        "resourceVersion": m.get("resourceVersion", ""),
    }


def uses(pod: Obj, claim: str) -> bool:
    """Whether ``pod`` still holds ``claim`` for pvc-protection: it mounts it and has not finished."""
    return (pod.get("status") or {}).get("phase") not in TERMINAL and claim in claim_names(pod)


class Storage:
    """Binding, provisioning and reclaiming through the API; the node agent and the controller share it."""

    def __init__(self, client: AsyncClient, root: Path, node_name: str, now: Callable[[], str]) -> None:
        self.client = client
        self.root = root
        self.node_name = node_name
        self.now = now
        self._settling = asyncio.Lock()
        self._told: set[tuple[str, str]] = set()

    # -- reading -----------------------------------------------------------------------------------

    async def _get(self, res: Any, name: str, namespace: str | None = None) -> Obj | None:
        try:
            obj: Any = await self.client.get(res, name, namespace=namespace)
        except ApiError as exc:
            if is_status(exc, 404):
                return None
            raise
        return dict(obj.to_dict())

    async def _list(self, res: Any, namespace: str = "*") -> list[Obj]:
        # Cluster-scoped kinds are listed without a namespace.
        scope = None if res in (PersistentVolume, StorageClass) else namespace
        return [dict(o.to_dict()) async for o in self.client.list(res, namespace=scope)]

    async def read(self, namespace: str, names: list[str]) -> tuple[dict[str, Obj | None], dict[str, Obj | None]]:
        """The claims a pod mounts and their volumes, provisioning those that wait for a first consumer."""
        claims: dict[str, Obj | None] = {}
        volumes: dict[str, Obj | None] = {}
        for name in names:
            claim = await self._get(PersistentVolumeClaim, name, namespace)
            if claim is not None and not _bound(claim) and not claim["metadata"].get("deletionTimestamp"):
                claim = await self.settle(claim, consumer=True)
            claims[name] = claim
            if claim is not None and _bound(claim):
                volume_name = claim["spec"]["volumeName"]
                volumes[volume_name] = await self._get(PersistentVolume, volume_name)
        return claims, volumes

    # -- binding and provisioning -----------------------------------------------------------------

    async def ensure_class(self) -> None:
        with contextlib.suppress(ApiError):
            await self.client.create(build(StorageClass, local_path_class()))

    async def settle(self, claim: Obj, *, consumer: bool) -> Obj:
        """Bind a pending claim if it can be now; ``consumer``: a pod on this node is about to mount it."""
        async with self._settling:
            m = claim["metadata"]
            fresh = await self._get(PersistentVolumeClaim, m["name"], m["namespace"])
            if fresh is None or _bound(fresh) or fresh["metadata"].get("deletionTimestamp"):
                return fresh or claim
            claim = fresh
            spec = claim.setdefault("spec", {})
            if spec.get("storageClassName") is None:
                default = await self._default_class()
                if default is not None:
                    claim = await self._patch_claim(claim, {"spec": {"storageClassName": default}})
                    spec = claim["spec"]
            volume = await self._existing_volume(claim)
            if volume is not None:
                return await self._bind(claim, volume, provisioner=None)
            class_name = spec.get("storageClassName") or ""
            if not class_name:
                await self._tell(
                    claim,
                    "Normal",
                    "FailedBinding",
                    "no persistent volumes available for this claim and no storage class is set",
                )
                return claim
            storage_class = await self._get(StorageClass, class_name)
            if storage_class is None:
                await self._tell(
                    claim, "Warning", "ProvisioningFailed", f'storageclass.storage.k8s.io "{class_name}" not found'
                )
                return claim
            provisioner = storage_class.get("provisioner") or ""
            if provisioner != PROVISIONER:
                await self._tell(
                    claim,
                    "Normal",
                    "ExternalProvisioning",
                    f"Waiting for a volume to be created either by the external provisioner '{provisioner}' or "
                    "manually by the system administrator. If volume creation is delayed, please verify that the "
                    "provisioner is running and correctly registered.",
                )
                return claim
            if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer" and not consumer:
                await self._tell(
                    claim, "Normal", "WaitForFirstConsumer", "waiting for first consumer to be created before binding"
                )
                return claim
            volume = await self._provision(claim, storage_class)
            return await self._bind(claim, volume, provisioner=PROVISIONER)

    async def _default_class(self) -> str | None:
        classes = await self._list(StorageClass)
        defaults = sorted(
            (c for c in classes if (c["metadata"].get("annotations") or {}).get(DEFAULT_CLASS) == "true"),
            key=lambda c: c["metadata"].get("creationTimestamp") or "",
        )
        return str(defaults[-1]["metadata"]["name"]) if defaults else None

    async def _existing_volume(self, claim: Obj) -> Obj | None:
        wanted = (claim.get("spec") or {}).get("volumeName")
        if wanted:
            volume = await self._get(PersistentVolume, wanted)
            ref = ((volume or {}).get("spec") or {}).get("claimRef") or {}
            if volume is not None and ref.get("uid") in (None, claim["metadata"]["uid"]):
                return volume
            return None
        volumes = await self._list(PersistentVolume)
        m = claim["metadata"]
        for volume in volumes:
            # A volume a user pre-bound to this claim through its claimRef.
            ref = (volume.get("spec") or {}).get("claimRef") or {}
            if (ref.get("namespace"), ref.get("name")) == (m["namespace"], m["name"]) and ref.get("uid") in (
                None,
                "",
                m["uid"],
            ):
                return volume
        candidates = [v for v in volumes if matches(claim, v)]
        candidates.sort(key=lambda v: _size(v, "spec", "capacity", "storage"))
        return candidates[0] if candidates else None

    async def _provision(self, claim: Obj, storage_class: Obj) -> Obj:
        m = claim["metadata"]
        await self._tell(
            claim,
            "Normal",
            "Provisioning",
            f'External provisioner is provisioning volume for claim "{m["namespace"]}/{m["name"]}"',
            component=f"{PROVISIONER}_{self.node_name}",
        )
        path = self.root / f"pvc-{m['uid']}_{m['namespace']}_{m['name']}"
        path.mkdir(parents=True, exist_ok=True)
        body = provisioned_volume(claim, storage_class, self.node_name, path)
        try:
            created: Any = await self.client.create(build(PersistentVolume, body))
            volume = dict(created.to_dict())
        except ApiError as exc:
            if not is_status(exc, 409):
                raise
            volume = await self._get(PersistentVolume, body["metadata"]["name"]) or body
        await self._tell(
            claim,
            "Normal",
            "ProvisioningSucceeded",
            f"Successfully provisioned volume {volume['metadata']['name']}",
            component=f"{PROVISIONER}_{self.node_name}",
        )
        return volume

    async def _bind(self, claim: Obj, volume: Obj, *, provisioner: str | None) -> Obj:
        m, name = claim["metadata"], volume["metadata"]["name"]
        if ((volume.get("spec") or {}).get("claimRef") or {}).get("uid") != m["uid"]:
            await self.client.patch(
                PersistentVolume, name, {"spec": {"claimRef": _claim_ref(claim)}}, patch_type=PatchType.MERGE
            )
        await self.client.patch(
            PersistentVolume.Status, name, {"status": {"phase": "Bound"}}, patch_type=PatchType.MERGE
        )
        annotations = {"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"}
        if provisioner:
            annotations |= {
                "volume.beta.kubernetes.io/storage-provisioner": provisioner,
                "volume.kubernetes.io/storage-provisioner": provisioner,
                "volume.kubernetes.io/selected-node": self.node_name,
            }
        claim = await self._patch_claim(claim, {"metadata": {"annotations": annotations}, "spec": {"volumeName": name}})
        status = {
            "phase": "Bound",
            "accessModes": (volume.get("spec") or {}).get("accessModes") or [],
            "capacity": (volume.get("spec") or {}).get("capacity") or {},
        }
        updated: Any = await self.client.patch(
            PersistentVolumeClaim.Status,
            m["name"],
            {"status": status},
            namespace=m["namespace"],
            patch_type=PatchType.MERGE,
        )
        return dict(updated.to_dict())

    async def _patch_claim(self, claim: Obj, patch: Obj) -> Obj:
        m = claim["metadata"]
        updated: Any = await self.client.patch(
            PersistentVolumeClaim, m["name"], patch, namespace=m["namespace"], patch_type=PatchType.MERGE
        )
        return dict(updated.to_dict())

    async def _tell(self, claim: Obj, type_: str, reason: str, message: str, *, component: str = CONTROLLER) -> None:
        """An event on the claim, once per claim and reason (the controller passes over claims again and again)."""
        m = claim["metadata"]
        if (m["uid"], reason) in self._told:
            return
        self._told.add((m["uid"], reason))
        involved = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "name": m["name"],
            "namespace": m["namespace"],
            "uid": m["uid"],
        }
        await record_event(
            self.client, involved, type_=type_, reason=reason, message=message, component=component, now=self.now()
        )

    # -- the controller --------------------------------------------------------------------------

    async def run(self) -> None:
        """Reconcile claims and volumes whenever either changes (and every few seconds while one must wait)."""
        await self.ensure_class()
        wake = asyncio.Event()

        async def follow(res: Any) -> None:
            async for _ in watch_forever(self.client, res, namespace=None if res is PersistentVolume else "*"):
                wake.set()

        followers = [asyncio.create_task(follow(PersistentVolumeClaim)), asyncio.create_task(follow(PersistentVolume))]
        recheck = False
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RECHECK_SECONDS if recheck else None):
                        await wake.wait()
                wake.clear()
                try:
                    recheck = await self.reconcile()
                except Exception:
                    log.exception("volume controller pass failed; trying again")
                    recheck = True
        finally:
            for task in followers:
                task.cancel()

    async def reconcile(self) -> bool:
        """One pass over every claim and volume; True when something must be looked at again soon."""
        claims = await self._list(PersistentVolumeClaim)
        by_name = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
        recheck = False
        for volume in await self._list(PersistentVolume):
            await self._reconcile_volume(volume, by_name)
        for claim in claims:
            m = claim["metadata"]
            finalizers = m.get("finalizers") or []
            if m.get("deletionTimestamp"):
                if PVC_PROTECTION in finalizers:
                    pods = await self._list(Pod, m["namespace"])
                    if any(uses(p, m["name"]) for p in pods):
                        recheck = True
                    else:
                        await self._set_finalizers(
                            PersistentVolumeClaim, claim, [f for f in finalizers if f != PVC_PROTECTION]
                        )
                continue
            if PVC_PROTECTION not in finalizers:
                claim = await self._set_finalizers(PersistentVolumeClaim, claim, [*finalizers, PVC_PROTECTION]) or claim
            if not _bound(claim):
                await self.settle(claim, consumer=False)
        return recheck

    async def _reconcile_volume(self, volume: Obj, claims: dict[tuple[str, str], Obj]) -> None:
        m, spec = volume["metadata"], volume.get("spec") or {}
        phase = (volume.get("status") or {}).get("phase")
        finalizers = m.get("finalizers") or []
        ref = spec.get("claimRef") or {}
        claim = claims.get((ref.get("namespace", ""), ref.get("name", ""))) if ref else None
        if claim is not None and ref.get("uid") and claim["metadata"]["uid"] != ref["uid"]:
            claim = None  # a new claim of the same name is not this volume's
        bound = claim is not None and (claim.get("spec") or {}).get("volumeName") == m["name"]
        if m.get("deletionTimestamp"):
            if PV_PROTECTION in finalizers and not bound:
                await self._set_finalizers(PersistentVolume, volume, [f for f in finalizers if f != PV_PROTECTION])
            return
        if PV_PROTECTION not in finalizers:
            await self._set_finalizers(PersistentVolume, volume, [*finalizers, PV_PROTECTION])
        if not ref:
            if phase in (None, "Pending"):
                await self._volume_status(volume, {"phase": "Available"})
            return
        if claim is not None:
            return  # binding in progress or done: settle() owns it
        if phase in ("Released", "Failed"):
            return
        if spec.get("persistentVolumeReclaimPolicy") != "Delete":
            await self._volume_status(volume, {"phase": "Released"})
            return
        path = Path(((spec.get("hostPath") or {}).get("path")) or "/")
        ours = (m.get("annotations") or {}).get(PROVISIONED_BY) == PROVISIONER
        if not ours or not path.resolve().is_relative_to(self.root.resolve()):
            await self._volume_status(
                volume,
                {
                    "phase": "Failed",
                    "message": f'error getting deleter volume plugin for volume "{m["name"]}": no deletable volume '
                    "plugin matched",
                },
            )
            return
        await asyncio.to_thread(shutil.rmtree, path, True)
        try:
            await self.client.delete(PersistentVolume, m["name"])
        except ApiError as exc:
            if not is_status(exc, 404):
                raise

    async def _volume_status(self, volume: Obj, status: Obj) -> None:
        await self.client.patch(
            PersistentVolume.Status, volume["metadata"]["name"], {"status": status}, patch_type=PatchType.MERGE
        )

    async def _set_finalizers(self, res: Any, obj: Obj, finalizers: list[str]) -> Obj | None:
        """Write ``finalizers`` unless the object changed since it was read (then the next pass sees it)."""
        m = obj["metadata"]
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": m.get("resourceVersion")}}
        try:
            updated: Any = await self.client.patch(
                res, m["name"], patch, namespace=m.get("namespace"), patch_type=PatchType.MERGE
            )
        except ApiError as exc:
            if is_status(exc, 409) or is_status(exc, 404):
                return None
            raise
        return dict(updated.to_dict())
