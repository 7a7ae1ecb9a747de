"""API semantics over the store: what create, update, patch and delete *mean* in Kubernetes.

The HTTP layer (``server``) only parses requests and renders responses; everything a client can
observe about an object's lifecycle is decided here: uid, timestamps, generation, status
subresource separation, optimistic concurrency, finalizers, graceful pod deletion, admission.
"""

from __future__ import annotations

import copy
import secrets
import string
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from trainyard.api.kinds import KINDS
from trainyard.api.meta import format_time
from trainyard.api.validation import validate_job
from trainyard.cluster import errors, patching, shapes
from trainyard.cluster.registry import Registry, ResourceType
from trainyard.cluster.selectors import FieldSelector, LabelSelector
from trainyard.cluster.store import Obj, Store

Clock = Callable[[], datetime]

TERMINAL_POD_PHASES = ("Succeeded", "Failed")
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_SUFFIX = string.ascii_lowercase + string.digits

# fieldSelector keys each resource supports (reference §3.2); the rest answer 400.
FIELD_KEYS: dict[str, tuple[str, ...]] = {
    "core/pods": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "core/events": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "core/secrets": ("type",),
    "core/namespaces": ("status.phase",),
    "core/nodes": ("spec.unschedulable",),
}


def field_keys(rt: ResourceType) -> tuple[str, ...]:
    return ("metadata.name", "metadata.namespace", *FIELD_KEYS.get(rt.key, ()))


def field_values(rt: ResourceType, obj: Obj) -> dict[str, str]:
    out = {}
    for key in field_keys(rt):
        node: Any = obj
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if key == "source" and isinstance(node, dict):
            node = node.get("component")
        if isinstance(node, bool):
            node = "true" if node else "false"
        out[key] = "" if node is None else str(node)
    return out


def matches(rt: ResourceType, obj: Obj, labels: LabelSelector | None, fields: FieldSelector | None) -> bool:
    if labels is not None and not labels.matches(obj.get("metadata", {}).get("labels") or {}):
        return False
    return fields is None or fields.matches(field_values(rt, obj))


def meta(obj: Obj) -> dict[str, Any]:
    value = obj.setdefault("metadata", {})
    assert isinstance(value, dict)
    return value


class Objects:
    def __init__(
        self,
        store: Store,
        registry: Registry,
        *,
        clock: Clock = lambda: datetime.now(UTC),
        new_uid: Callable[[], str] = lambda: str(uuid.uuid4()),
        suffix: Callable[[], str] = lambda: "".join(secrets.choice(_SUFFIX) for _ in range(5)),
    ) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self.new_uid = new_uid
        self.suffix = suffix

    # -- reads ---------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(rt.key, namespace if rt.namespaced else "", name)
        if obj is None:
            raise errors.not_found(rt, name)
        return self.present(rt, obj)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
    ) -> tuple[list[Obj], int]:
        items, revision = self.store.list(rt.key, namespace if rt.namespaced else None)
        return [self.present(rt, o) for o in items if matches(rt, o, labels, fields)], revision

    def present(self, rt: ResourceType, obj: Obj) -> Obj:
        """Objects are stored version-free; stamp the served apiVersion and kind on the way out."""
        return {"apiVersion": rt.group_version, "kind": rt.kind, **obj}

    # -- writes --------------------------------------------------------------------------------

    def create(self, rt: ResourceType, namespace: str, body: Obj, *, dry_run: bool = False) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        obj = shapes.check(rt, copy.deepcopy(body))
        self._check_type(rt, obj)
        m = meta(obj)
        if rt.namespaced:
            if m.get("namespace") and m["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            m["namespace"] = namespace
            self._require_namespace(namespace)
        else:
            m.pop("namespace", None)
        if not m.get("name"):
            if not m.get("generateName"):
                raise errors.invalid(
                    rt,
                    "",
                    [
                        (
                            "FieldValueRequired",
                            "metadata.name",
                            "Required value: name or generateName is required",
                        )
                    ],
                )
            m["name"] = m["generateName"] + self.suffix()
        name = m["name"]
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            m.pop(key, None)
        m["uid"] = self.new_uid()
        m["creationTimestamp"] = format_time(self.clock())
        if rt.has_spec and rt.kind not in ("Namespace",):
            m["generation"] = 1
        self._defaults_on_create(rt, obj)
        self._admit(rt, obj)
        if self.store.get(rt.key, m.get("namespace", ""), name) is not None:
            raise errors.already_exists(rt, name)
        if dry_run:
            return self.present(rt, obj)
        stored = self.store.put(rt.key, m.get("namespace", ""), name, obj, created=True)
        if rt.key == "apiextensions.k8s.io/customresourcedefinitions":
            self.registry.add_crd(stored)
        return self.present(rt, stored)

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        current = self._current(rt, namespace, name)
        body = shapes.check(rt, body)
        self._check_type(rt, body)
        wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rt, name)
        if (body.get("metadata") or {}).get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({body['metadata']['name']}) does not match the name on the URL ({name})"
            )
        return self._commit(rt, current, self._merge_update(rt, current, body, subresource), dry_run=dry_run)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        current = self._current(rt, namespace, name)
        base = {k: v for k, v in current.items() if k not in ("apiVersion", "kind")}
        base = self.present(rt, base)
        try:
            if content_type == "application/merge-patch+json":
                patched = patching.merge_patch(base, body)
            elif content_type == "application/json-patch+json":
                patched = patching.json_patch(base, body)
            elif content_type == "application/strategic-merge-patch+json":
                if rt.custom:
                    raise errors.unsupported_media(
                        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                    )
                patched = patching.strategic_merge_patch(base, body, kind=rt.kind)
            else:
                raise errors.unsupported_media(
                    "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
                )
        except patching.PatchError as exc:
            if exc.code == 422:
                raise errors.invalid(rt, name, [("FieldValueInvalid", "", str(exc))]) from exc
            raise errors.bad_request(str(exc)) from exc
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch must leave a JSON object")
        patched = shapes.check(rt, patched)
        wanted_rv = (patched.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rt, name)
        return self._commit(rt, current, self._merge_update(rt, current, patched, subresource), dry_run=dry_run)

    def bind(self, namespace: str, name: str, body: Obj) -> Obj:
        """``pods/binding``: the scheduler's one way to set ``spec.nodeName``."""
        rt = self._rt("", "v1", "pods")
        current = self._current(rt, namespace, name)
        node = ((body or {}).get("target") or {}).get("name")
        if not node:
            raise errors.invalid(rt, name, [("FieldValueRequired", "target.name", "Required value")])
        if current.get("spec", {}).get("nodeName"):
            raise errors.conflict(rt, name, f'pod {name} is already assigned to node "{current["spec"]["nodeName"]}"')
        new = copy.deepcopy(current)
        new["spec"]["nodeName"] = node
        self._commit(rt, current, new)
        # The real server answers with a Status, which lightkube and the python client fail to
        # decode as a Binding; echoing the Binding is what every client can read.
        return {
            "apiVersion": "v1",
            "kind": "Binding",
            **{k: v for k, v in body.items() if k not in ("apiVersion", "kind")},
        }

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        propagation: str | None = None,
        grace_seconds: int | None = None,
        dry_run: bool = False,
    ) -> Obj:
        current = self._current(rt, namespace, name)
        m = current["metadata"]
        if dry_run:
            return self.present(rt, current)
        finalizers = list(m.get("finalizers") or [])
        if propagation == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        elif propagation == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if rt.key == "core/namespaces":
            finalizers = finalizers or ["kubernetes"]
        deleting = bool(m.get("deletionTimestamp"))
        # A pod whose processes may still run is gone only once its node has stopped them and
        # confirmed with grace period 0 (as the kubelet does); anything else goes at once.
        graceful = self._awaiting_node(rt, current) and not (deleting and grace_seconds == 0)
        if not finalizers and not graceful:
            return self.present(rt, self._remove(rt, current))
        if deleting and finalizers == (m.get("finalizers") or []):
            return self.present(rt, current)
        new = copy.deepcopy(current)
        nm = new["metadata"]
        nm.setdefault("deletionTimestamp", format_time(self.clock()))
        if graceful:
            default_grace = (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            nm.setdefault("deletionGracePeriodSeconds", default_grace if grace_seconds is None else grace_seconds)
        else:
            nm.setdefault("deletionGracePeriodSeconds", 0)
        if finalizers:
            nm["finalizers"] = finalizers
        if rt.key == "core/namespaces":
            new.setdefault("status", {})["phase"] = "Terminating"
        if rt.has_spec and "generation" in nm:
            nm["generation"] += 1
        return self.present(rt, self.store.put(rt.key, nm.get("namespace", ""), name, new, created=False))

    # -- helpers -------------------------------------------------------------------------------

    def _rt(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.registry.lookup(group, version, plural)
        assert rt is not None
        return rt

    def _current(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(rt.key, namespace if rt.namespaced else "", name)
        if obj is None:
            raise errors.not_found(rt, name)
        return obj

    def _check_type(self, rt: ResourceType, obj: Obj) -> None:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if (api_version and api_version != rt.group_version) or (kind and kind != rt.kind):
            raise errors.bad_request(
                f"the API version in the data ({api_version}) and kind ({kind}) do not match the endpoint "
                f"({rt.group_version}, {rt.kind})"
            )

    def _require_namespace(self, namespace: str) -> None:
        ns = self.store.get("core/namespaces", "", namespace)
        if ns is None:
            raise errors.not_found(self._rt("", "v1", "namespaces"), namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {namespace} because it is being terminated",
            )

    def _defaults_on_create(self, rt: ResourceType, obj: Obj) -> None:
        if rt.key == "core/namespaces":
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
        elif rt.key == "core/pods":
            spec = obj.setdefault("spec", {})
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("schedulerName", "default-scheduler")
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif rt.key == "core/services":
            spec = obj.setdefault("spec", {})
            spec.setdefault("type", "ClusterIP")
            spec.setdefault("sessionAffinity", "None")
            if spec.get("clusterIP") is None:
                spec["clusterIP"] = "127.0.0.1"
            for port in spec.get("ports") or []:
                port.setdefault("protocol", "TCP")
                port.setdefault("targetPort", port.get("port"))
            obj.setdefault("status", {"loadBalancer": {}})
        elif rt.key == "core/secrets":
            obj["type"] = obj.get("type") or "Opaque"
        elif rt.key == "apiextensions.k8s.io/customresourcedefinitions":
            obj["status"] = self._crd_status(obj)
        elif "status" in rt.subresources:
            obj.pop("status", None)

    def _crd_status(self, crd: Obj) -> Obj:
        now = format_time(self.clock())
        names = crd.get("spec", {}).get("names", {})
        return {
            "acceptedNames": names,
            "storedVersions": [v["name"] for v in crd.get("spec", {}).get("versions", []) if v.get("storage")],
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": now}
                for t, r, m in (
                    ("NamesAccepted", "NoConflicts", "no conflicts found"),
                    ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                )
            ],
        }

    def _admit(self, rt: ResourceType, obj: Obj) -> None:
        name = obj.get("metadata", {}).get("name", "")
        causes = shapes.admission_causes(rt, obj)
        if rt.key == "core/pods":
            containers = (obj.get("spec") or {}).get("containers")
            if not containers:
                causes.append(("FieldValueRequired", "spec.containers", "Required value"))
            for i, c in enumerate(containers or []):
                if not isinstance(c, dict) or not c.get("name"):
                    causes.append(("FieldValueRequired", f"spec.containers[{i}].name", "Required value"))
        elif rt.key == "core/events":
            if not obj.get("involvedObject"):
                causes.append(("FieldValueRequired", "involvedObject", "Required value"))
        elif rt.custom and rt.group == "kubeflow.org" and rt.kind in KINDS:
            causes += [(e.type.value, e.field, e.message) for e in validate_job(obj, KINDS[rt.kind])]
        if causes:
            raise errors.invalid(rt, name, causes)

    def _merge_update(self, rt: ResourceType, current: Obj, body: Obj, subresource: str | None) -> Obj:
        """The object after a PUT or PATCH, honouring the status subresource and immutable metadata."""
        body = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
        if subresource == "status":
            new = copy.deepcopy(current)
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
            return new
        new = copy.deepcopy(body)
        m = new.setdefault("metadata", {})
        cm = current["metadata"]
        for key in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
            "name",
            "generation",
        ):
            if key in cm:
                m[key] = cm[key]
            else:
                m.pop(key, None)
        if "status" in rt.subresources or rt.key == "core/pods":
            if "status" in current:
                new["status"] = current["status"]
            else:
                new.pop("status", None)
        if cm.get("deletionTimestamp"):
            added = set(m.get("finalizers") or []) - set(cm.get("finalizers") or [])
            if added:
                raise errors.ApiError(
                    422,
                    "Invalid",
                    "no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers {sorted(added)}",
                )
        return new

    def _commit(self, rt: ResourceType, current: Obj, new: Obj, *, dry_run: bool = False) -> Obj:
        m = new["metadata"]
        m["resourceVersion"] = current["metadata"]["resourceVersion"]
        if rt.has_spec and "generation" in current["metadata"]:

            def essence(o: Obj) -> Obj:
                return {k: v for k, v in o.items() if k not in ("metadata", "status", "apiVersion", "kind")}

            if essence(new) != essence(current):
                m["generation"] = current["metadata"]["generation"] + 1
        if new == current:
            return self.present(rt, current)  # a no-op write bumps nothing and emits no event
        self._admit(rt, new)
        if dry_run:
            return self.present(rt, new)
        if m.get("deletionTimestamp") and not m.get("finalizers") and not self._awaiting_node(rt, new):
            return self.present(rt, self._remove(rt, new))
        stored = self.store.put(rt.key, m.get("namespace", ""), m["name"], new, created=False)
        if rt.key == "apiextensions.k8s.io/customresourcedefinitions":
            self.registry.add_crd(stored)
        return self.present(rt, stored)

    def _awaiting_node(self, rt: ResourceType, obj: Obj) -> bool:
        return (
            rt.key == "core/pods"
            and bool((obj.get("spec") or {}).get("nodeName"))
            and ((obj.get("status") or {}).get("phase") not in TERMINAL_POD_PHASES)
        )

    def _remove(self, rt: ResourceType, obj: Obj) -> Obj:
        m = obj["metadata"]
        removed = self.store.remove(rt.key, m.get("namespace", ""), m["name"]) or obj
        if rt.key == "apiextensions.k8s.io/customresourcedefinitions":
            self.registry.remove_crd(m["name"])
        return removed
