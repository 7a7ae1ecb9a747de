"""API semantics over the store: what create, update, patch and delete *mean* in Kubernetes.

The HTTP layer (``server``) only parses requests and renders responses; everything a client can
observe about an object's lifecycle is decided here: uid, timestamps, generation, status
subresource separation, optimistic concurrency, finalizers, graceful pod deletion, admission.
The steps a write goes through live in ``writes`` (this module runs them in order); gets and
lists, in ``reads``.
"""

from __future__ import annotations

import builtins
import dataclasses
import random
import string
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from trainyard.api.meta import Obj, format_time
from trainyard.cluster import qos
from trainyard.cluster.server.apiserver import errors, tolerationflags
from trainyard.cluster.server.apiserver.builtin import limits, priority, quota
from trainyard.cluster.server.apiserver.quotas import Quotas
from trainyard.cluster.server.apiserver.reads import Reads
from trainyard.cluster.server.apiserver.registry import Registry, ResourceType
from trainyard.cluster.server.apiserver.requests.writing import INTERNAL, WriteOptions
from trainyard.cluster.server.apiserver.writes import (
    admission,
    decoding,
    defaulting,
    deletion,
    fieldmanager,
    patching,
    shapes,
    updates,
)
from trainyard.cluster.server.apiserver.writes.listshapes import shape_of
from trainyard.cluster.server.storage import codec
from trainyard.cluster.server.storage.store import Store

Clock = Callable[[], datetime]

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_SUFFIX = string.ascii_lowercase + string.digits


def patch_failure(exc: patching.PatchError) -> errors.ApiError:
    """The Status for a patch that cannot be applied, as the real API server words it.

    A JSON patch that is well formed but does not apply (a failed ``test``, a missing path)
    gets the apiserver's generic 422 with empty details, which kubectl prints as
    ``The request is invalid: the server rejected our request ...`` and kopf retries.
    """
    if exc.code == 422:
        return errors.ApiError(422, "Invalid", "the server rejected our request due to an error in our request", {})
    return errors.bad_request(str(exc))


def _unversioned(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def meta(obj: Obj) -> dict[str, Any]:
    value = obj.setdefault("metadata", {})
    assert isinstance(value, dict)
    return value


# generateName's suffix needs variety, not secrecy (kube-apiserver draws it from math/rand): one
# generator seeded from the OS at start, instead of a system call per character.
_NAMES = random.Random()
GENERATE_NAME_TRIES = 8


class Objects(Reads):
    """What writes mean: create, update, patch, apply, bind and delete (reads come from ``Reads``)."""

    def __init__(
        self,
        store: Store,
        registry: Registry,
        *,
        clock: Clock = lambda: datetime.now(UTC),
        new_uid: Callable[[], str] = lambda: str(uuid.uuid4()),
        suffix: Callable[[], str] = lambda: "".join(_NAMES.choices(_SUFFIX, k=5)),
    ) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self.new_uid = new_uid
        self.suffix = suffix
        self.quotas = Quotas(store)
        # kube-apiserver's --default-{not-ready,unreachable}-toleration-seconds (``yard up`` sets them).
        self.toleration_seconds = tolerationflags.from_env()

    # -- writes --------------------------------------------------------------------------------

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        body: Obj,
        *,
        options: WriteOptions = INTERNAL,
    ) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        obj = codec.clone(body)
        self._check_type(rt, obj)
        # Stored version-free, as updates already are: ``present`` stamps the served version.
        obj.pop("apiVersion", None)
        obj.pop("kind", None)
        # Decoding first words type errors as the apiserver's JSON decoder does; the shape check
        # then reads the nulls the decoder let through as zero values.
        decoding.decode_body(rt, obj, options.field_validation, options.warnings)
        obj = shapes.check(rt, obj)
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
        generated = not m.get("name")
        if generated:
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
        defaulting.on_create(rt, obj, now=m["creationTimestamp"])
        defaulting.on_write(rt.key, obj)
        if rt.key == "core/pods":
            priority.admit_pod(obj, self._priority_classes())
            admission.default_toleration_seconds(obj, *self.toleration_seconds)
            self._limit_ranges(obj, namespace)
        admission.admit(rt, obj, warnings=options.warnings)
        self._check_priority_class(rt, obj)
        self.quotas.admit(rt, obj)
        if rt.key == quota.KEY:
            self.quotas.prepare(obj)
        if options.manager is not None and "managedFields" not in m:
            self._track(rt, None, obj, options.manager, None)
        space = m.get("namespace", "")
        # A generated name that is taken is drawn again, as kube-apiserver does since 1.32
        # (RetryGenerateName, at most 8 tries in all); chosen or still taken, it is 409.
        tries = 1
        while self.store.exists(rt.key, space, name) and generated and tries < GENERATE_NAME_TRIES:
            name = m["name"] = m["generateName"] + self.suffix()
            tries += 1
        if self.store.exists(rt.key, space, name):
            raise errors.already_exists(rt, name)
        if options.dry_run:
            return self.present(rt, obj)
        stored = self.store.put(rt.key, space, name, obj, created=True)
        self.quotas.written(rt.key, space, None, stored)
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
        options: WriteOptions = INTERNAL,
        subresource: str | None = None,
    ) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        current = self._current(rt, namespace, name)
        self._check_type(rt, body)
        body = codec.clone(body)
        decoding.decode_body(rt, body, options.field_validation, options.warnings)
        body = shapes.check(rt, body)
        wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rt, name)
        if (body.get("metadata") or {}).get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({body['metadata']['name']}) does not match the name on the URL ({name})"
            )
        new = self._merge_update(rt, current, body, subresource, owned=True)
        return self._commit(rt, current, new, options=options, subresource=subresource)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        body: Any,
        *,
        options: WriteOptions = INTERNAL,
        subresource: str | None = None,
    ) -> Obj:
        current = self._current(rt, namespace, name)
        # ``current`` is compared with the result later, so the patch works on a private copy:
        # decoding the stored body again is cheaper than copying ``current`` (a JSON round trip).
        base = self.present(rt, _unversioned(self._current(rt, namespace, name)))
        try:
            if content_type == "application/merge-patch+json":
                patched = patching.merge_patch(base, body, owned=True)
            elif content_type == "application/json-patch+json":
                patched = patching.json_patch(base, body)
            elif content_type == "application/strategic-merge-patch+json":
                if rt.custom:
                    raise errors.unsupported_media(
                        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                    )
                patched = patching.strategic_merge_patch(base, body, kind=rt.kind, owned=True)
            else:
                raise errors.unsupported_media(
                    "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
                )
        except patching.PatchError as exc:
            raise patch_failure(exc) from exc
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch must leave a JSON object")
        if subresource == "status" and options.field_validation != "Strict" and _names_only(body, _STATUS_WRITE):
            # The rest is the stored object's, decoded when it was written, and a status write
            # keeps the stored rest whatever the patch leaves there: only this part is decoded.
            patched = {k: v for k, v in patched.items() if k in _STATUS_WRITE}
        decoding.decode_body(rt, patched, options.field_validation, options.warnings, patch=True)
        patched = shapes.check(rt, patched)
        wanted_rv = (patched.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rt, name)
        new = self._merge_update(rt, current, patched, subresource, owned=True)
        return self._commit(rt, current, new, options=options, subresource=subresource)

    def apply(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        config: Any,
        *,
        options: WriteOptions,
        subresource: str | None = None,
    ) -> tuple[Obj, bool]:
        """Server-side apply of ``config`` by ``options.manager``; returns the object and whether it was
        created. The applied fields are recorded by the apply itself, so the write that stores them
        tracks no manager of its own."""
        manager, force = options.manager, options.force
        if manager is None:
            raise ValueError("server-side apply needs a field manager")
        untracked = dataclasses.replace(options, manager=None)
        if not isinstance(config, dict):
            raise errors.bad_request("the applied configuration must be an object")
        self._check_type(rt, config)
        m = config.get("metadata") or {}
        if not isinstance(m, dict):
            raise errors.bad_request("metadata must be an object")
        if m.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({m.get('name')}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and m.get("namespace") and m["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        write = self._write(rt, manager, subresource)
        shape = shape_of(rt.kind, rt.schema, custom=rt.custom)
        current = self.store.get(rt.key, namespace if rt.namespaced else "", name)
        try:
            if current is None:
                if subresource is not None:
                    raise errors.not_found(rt, name)
                fresh = fieldmanager.apply(None, config, shape, write, force=force)
                meta(fresh)["name"] = name
                return self.create(rt, namespace, fresh, options=untracked), True
            wanted_rv = m.get("resourceVersion")
            if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            try:
                applied = fieldmanager.apply(current, config, shape, write, force=force)
            except fieldmanager.ApplyConflict as exc:
                # Upstream moves fields from client-side to server-side apply without conflicts
                # when they are what the last client-side apply set (the lastAppliedManager rule).
                if not fieldmanager.upgrades_client_side_apply(current, exc.conflicts, shape):
                    raise
                applied = fieldmanager.apply(current, config, shape, write, force=True)
        except fieldmanager.ApplyConflict as exc:
            causes = [
                {
                    "reason": "FieldManagerConflict",
                    "message": f'conflict with "{c.manager}" using {c.api_version}',
                    "field": fieldmanager.describe(c.path),
                }
                for c in exc.conflicts
            ]
            raise errors.ApiError(409, "Conflict", str(exc), {"causes": causes}) from exc
        decoding.decode_body(rt, applied, options.field_validation, options.warnings, patch=True)
        new = self._merge_update(rt, current, applied, subresource)
        meta(new)["managedFields"] = applied["metadata"]["managedFields"]
        return self._commit(rt, current, new, options=untracked), False

    def bind(self, namespace: str, name: str, body: Obj) -> Obj:
        """``pods/binding``: the scheduler's one way to set ``spec.nodeName``."""
        rt = self._rt("", "v1", "pods")
        current = self._current(rt, namespace, name)
        node = ((body or {}).get("target") or {}).get("name")
        if not node:
            raise errors.invalid(rt, name, [("FieldValueRequired", "target.name", "Required value")])
        if current.get("spec", {}).get("nodeName"):
            raise errors.conflict(rt, name, f'pod {name} is already assigned to node "{current["spec"]["nodeName"]}"')
        new = self._current(rt, namespace, name)  # a copy of its own, to compare with ``current``
        new["spec"]["nodeName"] = node
        # As the binding storage does: the pod is scheduled the moment it is bound.
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        now = format_time(self.clock())
        scheduled = {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        status["conditions"] = [scheduled, *conditions]
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
        preconditions: Any = None,
        dry_run: bool = False,
    ) -> Obj:
        current = self._current(rt, namespace, name)
        m = current["metadata"]
        deletion.check_preconditions(rt, m, preconditions)
        if dry_run:
            return self.present(rt, current)
        finalizers = deletion.finalizers_after(rt, m, propagation)
        deleting = bool(m.get("deletionTimestamp"))
        # A pod whose processes may still run is gone only once its node has stopped them and
        # confirmed with grace period 0 (as the kubelet does); anything else goes at once.
        graceful = deletion.awaiting_node(rt, current) and not (deleting and grace_seconds == 0)
        if not finalizers and not graceful:
            return self.present(rt, self._remove(rt, current))
        if deleting and finalizers == (m.get("finalizers") or []):
            return self.present(rt, current)
        now = format_time(self.clock())
        new = deletion.marked(
            rt, current, finalizers=finalizers, graceful=graceful, grace_seconds=grace_seconds, now=now
        )
        space = new["metadata"].get("namespace", "")
        stored = self.store.put(rt.key, space, name, new, created=False, old=current)
        self.quotas.written(rt.key, space, current, stored)
        return self.present(rt, stored)

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

    def _merge_update(
        self, rt: ResourceType, current: Obj, body: Obj, subresource: str | None, *, owned: bool = False
    ) -> Obj:
        """The object after a PUT or PATCH, honouring the status subresource and immutable metadata.
        ``owned``: ``body`` is this request's own copy (nothing else holds it), to build on in place."""
        body = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
        if subresource == "status":
            cm = current["metadata"]
            new: Obj = self._current(rt, cm.get("namespace", ""), cm["name"])  # a private copy, as ``patch`` makes one
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
            return new
        new = body if owned else codec.clone(body)
        assert isinstance(new, dict)
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
        defaulting.on_write(rt.key, new)
        if rt.key == "core/pods":
            priority.keep_on_update(current.get("spec") or {}, new.setdefault("spec", {}))
            # A mutating plugin on update too (as upstream's), before the update rules judge the spec.
            admission.default_toleration_seconds(new, *self.toleration_seconds)
            forbidden = defaulting.pod_spec_change(current.get("spec") or {}, new.get("spec") or {})
            if forbidden:
                raise errors.invalid(rt, cm["name"], [("FieldValueForbidden", "spec", forbidden)])
        if rt.key == priority.KEY and (immutable := priority.update_forbidden(current, new)):
            raise errors.invalid(rt, cm["name"], immutable)
        if cm.get("deletionTimestamp"):
            added = set(m.get("finalizers") or []) - set(cm.get("finalizers") or [])
            if added:
                found = ", ".join(f'"{f}"' for f in sorted(added))
                message = (
                    "Forbidden: no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers []string{{{found}}}"
                )
                raise errors.invalid(rt, cm["name"], [("FieldValueForbidden", "metadata.finalizers", message)])
        return new

    def _commit(
        self,
        rt: ResourceType,
        current: Obj,
        new: Obj,
        *,
        options: WriteOptions = INTERNAL,
        subresource: str | None = None,
    ) -> Obj:
        m = new["metadata"]
        m["resourceVersion"] = current["metadata"]["resourceVersion"]
        if rt.key == quota.KEY:
            self.quotas.prepare(new)  # status is the server's own, whatever the write sent
        owned = current["metadata"].get("managedFields")
        if "managedFields" not in m and owned is not None:
            m["managedFields"] = owned  # a write that omits managedFields keeps them, as upstream
        if options.manager is not None and m.get("managedFields") == owned:
            self._track(rt, current, new, options.manager, subresource)
        if rt.has_spec and "generation" in current["metadata"]:

            def essence(o: Obj) -> Obj:
                return {k: v for k, v in o.items() if k not in ("metadata", "status", "apiVersion", "kind")}

            if essence(new) != essence(current):
                m["generation"] = current["metadata"]["generation"] + 1
        if _unversioned(new) == _unversioned(current):
            return self.present(rt, current)  # a no-op write bumps nothing and emits no event
        admission.admit(rt, new, subresource, current, warnings=options.warnings)
        self._check_priority_class(rt, new)
        if options.dry_run:
            return self.present(rt, new)
        if m.get("deletionTimestamp") and not m.get("finalizers") and not deletion.awaiting_node(rt, new):
            if rt.key == "core/pods":
                # The node's last status (how each container ended) is seen before the pod goes, as upstream.
                self.store.put(rt.key, m.get("namespace", ""), m["name"], new, created=False, old=current)
            return self.present(rt, self._remove(rt, new))
        stored = self.store.put(rt.key, m.get("namespace", ""), m["name"], new, created=False, old=current)
        self.quotas.written(rt.key, m.get("namespace", ""), current, stored)
        if rt.key == "apiextensions.k8s.io/customresourcedefinitions":
            self.registry.add_crd(stored)
        return self.present(rt, stored)

    def _write(self, rt: ResourceType, manager: str, subresource: str | None) -> fieldmanager.Write:
        return fieldmanager.Write(
            manager=manager,
            api_version=rt.group_version,
            now=format_time(self.clock()),
            subresource=subresource,
            status_separate="status" in rt.subresources,
        )

    def _track(self, rt: ResourceType, old: Obj | None, new: Obj, manager: str, subresource: str | None) -> None:
        """Record in ``new`` that ``manager`` owns what this write changed."""
        shape = shape_of(rt.kind, rt.schema, custom=rt.custom)
        managed = updates.track_update(old, new, shape, self._write(rt, manager, subresource))
        if managed:
            meta(new)["managedFields"] = managed
        else:
            meta(new).pop("managedFields", None)

    def _priority_classes(self) -> builtins.list[Obj]:
        return self.store.list(priority.KEY, None)[0]

    def _check_priority_class(self, rt: ResourceType, obj: Obj) -> None:
        if rt.key == priority.KEY and (refused := priority.second_default(obj, self._priority_classes())):
            raise refused

    def _limit_ranges(self, pod: Obj, namespace: str) -> None:
        """The LimitRanger admission of a new pod (defaults, then min/max/ratio; 403 when refused)."""
        if not self.store.count(limits.KEY, namespace):
            return
        refused = limits.admit_pod(pod, self.store.list(limits.KEY, namespace)[0])
        if refused is not None:
            raise quota.forbidden("pods", "", "pods", pod["metadata"]["name"], refused)
        pod["status"]["qosClass"] = qos.qos_class(pod.get("spec") or {})  # the defaults can change it

    def _remove(self, rt: ResourceType, obj: Obj) -> Obj:
        m = obj["metadata"]
        removed = self.store.remove(rt.key, m.get("namespace", ""), m["name"]) or obj
        self.quotas.written(rt.key, m.get("namespace", ""), removed, None)
        if rt.key == "apiextensions.k8s.io/customresourcedefinitions":
            self.registry.remove_crd(m["name"])
        return removed


_STATUS_WRITE = frozenset({"apiVersion", "kind", "metadata", "status"})
"""What a write through the status subresource takes from its body."""


def _names_only(body: object, keys: frozenset[str]) -> bool:
    """Whether a (merge or strategic merge) patch touches no top-level field but ``keys``."""
    return isinstance(body, dict) and all(k in keys for k in body)
