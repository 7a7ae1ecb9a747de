"""The scheduler: kube-scheduler, scheduler-plugins' coscheduling and Volcano's gang scheduler for the local plane.

The I/O shell around ``placement.schedule``. It keeps informer caches of pods, nodes, priority
classes and both projects' PodGroups (``informer``), with what every node's bound pods request
kept incrementally (no re-listing per pod); the pod informer may be one the process shares
(``pods=``). Pods it serves are those whose ``schedulerName`` is ``default-scheduler``,
``scheduler-plugins-scheduler`` (both with coscheduling, as scheduler-plugins installed in place
of the default scheduler) or ``volcano``; pods naming any other scheduler stay Pending, untouched,
as on a cluster without that scheduler.

Work is level-triggered and batched: changes make pods active in the queue (``queueing``); one
pass decides for every active pod at once (with every pending member of their gangs), binds
through ``pods/binding`` (``Scheduled`` event), and reports the pods it could not place
(``reports``: their ``PodScheduled=False`` condition and ``FailedScheduling`` Warnings,
rate-limited). A pod that did not fit waits, backing off, until something that could make room
happens (a pod finishes or goes, a node or PodGroup changes), as in kube-scheduler's queue. After
each pass the PodGroups of touched gangs get their status written.

Preemption: the pass is given the bound pods by node (kept incrementally with the usage); victims
it chooses are evicted (``evictions``) and counted as terminating from then on, so that no later
pass picks them again; the preemptors are nominated, and bound by a pass after the victims are gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import PodBinding
from lightkube.resources.scheduling_v1 import PriorityClass
from lightkube.types import PatchType

from trainyard.api import podgroupcrds
from trainyard.api.meta import Obj, format_time
from trainyard.client.events import event_body
from trainyard.client.resources import build, global_resource, is_status, plain_resource, to_dict
from trainyard.cluster.clients.scheduler import evictions, placement, podgroups, preemption, snapshot
from trainyard.cluster.clients.scheduler.queueing import PodQueue
from trainyard.cluster.clients.scheduler.reports import POD, RETRY_SECONDS, Reports, pod_ref
from trainyard.cluster.clients.scheduler.snapshot import COSCHEDULING, VOLCANO_GROUP, GroupKey, NodeInfo, PodInfo, Usage
from trainyard.cluster.clients.scheduler.terms import ServiceSelectors
from trainyard.kit.informer import Informer, newer

log = logging.getLogger(__name__)

# Plain-dict resources: the scheduler reads a few fields of many objects.
NODE = global_resource("", "v1", "Node", "nodes")
X_K8S_GROUP = create_namespaced_resource(podgroupcrds.X_K8S, "v1alpha1", "PodGroup", "podgroups")
VOLCANO_POD_GROUP = create_namespaced_resource(podgroupcrds.VOLCANO, "v1beta1", "PodGroup", "podgroups")
SERVICE = plain_resource("", "v1", "Service", "services")
NAMESPACE = global_resource("", "v1", "Namespace", "namespaces")
GROUP_RESOURCES = {COSCHEDULING: X_K8S_GROUP, VOLCANO_GROUP: VOLCANO_POD_GROUP}
GROUP_SOURCES = {COSCHEDULING: snapshot.SCHEDULER_PLUGINS, VOLCANO_GROUP: snapshot.VOLCANO}

WRITERS = 8  # bindings and PodGroup status writes in flight at once
POP_BACKING = 16  # backing-off pods tried at once when no pod is active
NODE_WAIT_SECONDS = 5.0  # at start, how long to wait for the node agent to register its node


class Scheduler:
    def __init__(
        self,
        client: AsyncClient,
        *,
        names: tuple[str, ...] = snapshot.SCHEDULERS,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        pods: Informer | None = None,
    ) -> None:
        self.client = client
        self.names = names
        self._pods = pods if pods is not None else Informer(client, POD)
        self._own_pods = pods is None  # else the process shares it, and whoever made it runs it
        self._pods.handlers.append(self._on_pod)
        self.clock = clock
        self.pods: dict[str, PodInfo] = {}
        self.versions: dict[str, str] = {}  # uid -> resourceVersion, the precondition of status writes
        self.assumed: dict[str, str] = {}  # uid -> node, bound by us but not yet seen bound
        self.usage: dict[str, Usage] = {}
        self.on_node: dict[str, dict[str, PodInfo]] = {}  # node -> uid -> the bound pods there
        self.evicting: set[str] = set()  # uids preempted by us, maybe not yet seen deleting
        self.nominated: dict[str, str] = {}  # uid -> node where preemption makes room for it
        # Unschedulable pods a pod placed or relabelled may help (pod affinity, hard spread).
        self.sibling_waiters: set[str] = set()
        self.nodes: dict[str, NodeInfo] = {}
        self.classes: dict[str, int] = {}
        self.services = ServiceSelectors()  # the system default spread constraints' selectors
        self.namespaces: dict[str, dict[str, str]] = {}  # their labels, for affinity's namespaceSelector
        self.groups: dict[GroupKey, Obj] = {}
        # Volcano groups still to be enqueued or placed: every pass judges them, pods pending or
        # not, so they are kept apart rather than found among all groups (one a job) each pass.
        self.volcano_open: set[GroupKey] = set()
        self.members: dict[GroupKey, set[str]] = {}
        self.queue = PodQueue()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.verdicts: dict[GroupKey, str | None] = {}
        self.enqueued: set[GroupKey] = set()
        self.dirty: set[GroupKey] = set()
        # One status write per group in flight: two racing merge patches could land out of order
        # and leave the older status (say Running) on a group whose pods have all finished.
        self._group_writing: set[GroupKey] = set()
        self._group_stale: set[GroupKey] = set()  # touched while its write was in flight
        self._timers: dict[GroupKey, asyncio.TimerHandle] = {}
        self._wake = asyncio.Event()
        self._node_seen = asyncio.Event()
        self._writes = asyncio.Semaphore(WRITERS)
        self.reports = Reports(client, now=self.now, versions=self.versions, unplaced=self._unplaced, retry=self._retry)
        self._background: set[asyncio.Task[None]] = set()

    def now(self) -> str:
        return format_time(self.clock())

    # -- running -------------------------------------------------------------------------------------

    async def run(self) -> None:
        informers = [
            Informer(self.client, NODE, self._on_node, namespaced=False),
            Informer(self.client, PriorityClass, self._on_class, namespaced=False),
            Informer(self.client, SERVICE, self._on_service),
            Informer(self.client, NAMESPACE, self._on_namespace, namespaced=False),
            Informer(self.client, X_K8S_GROUP, lambda k, o: self._on_group(COSCHEDULING, k, o)),
            Informer(self.client, VOLCANO_POD_GROUP, lambda k, o: self._on_group(VOLCANO_GROUP, k, o)),
            *([self._pods] if self._own_pods else []),
        ]
        tasks = [asyncio.create_task(i.run(), name=f"informer-{i.res.__name__}") for i in informers]
        try:
            await asyncio.gather(*(i.synced.wait() for i in (*informers, self._pods)))
            log.info("scheduler caches synced: %d nodes, %d pods", len(self.nodes), len(self.pods))
            # A plane just started has pods but not yet its node: wait a moment, not report "no node" to all.
            if not self.nodes:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._node_seen.wait(), NODE_WAIT_SECONDS)
            helpers = [asyncio.create_task(c) for c in self.reports.workers()]
            try:
                await self._loop()
            finally:
                for helper in helpers:
                    helper.cancel()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            # Let a burst of watch events land first: one pass then decides for all of them.
            await asyncio.sleep(0)
            try:
                self.cycle()
            except Exception:
                log.exception("scheduling pass failed")
                await asyncio.sleep(1.0)
                self._wake.set()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- caches --------------------------------------------------------------------------------------

    def _node_of(self, info: PodInfo) -> str:
        return info.node_name or self.assumed.get(info.uid, "")

    def _charge(self, info: PodInfo | None, sign: int) -> bool:
        """Add (or remove) what ``info`` holds on its node; whether it holds anything."""
        if info is None or info.terminal:
            return False
        node = self._node_of(info)
        if not node:
            return False
        self.usage.setdefault(node, Usage()).add_pod(info, sign)
        if sign < 0:
            self.on_node.get(node, {}).pop(info.uid, None)
        else:
            if info.uid in self.evicting:
                info = dataclasses.replace(info, deleting=True, preempted=True)
            self.on_node.setdefault(node, {})[info.uid] = dataclasses.replace(info, node_name=node)
        return True

    def _served(self, info: PodInfo) -> bool:
        return (
            info.scheduler in self.names
            and not info.node_name
            and not info.deleting
            and not info.terminal
            and not info.gated
            and info.uid not in self.assumed
        )

    def _on_pod(self, kind: str, obj: Obj) -> None:
        uid = (obj.get("metadata") or {}).get("uid", "")
        old = self.pods.get(uid)
        info = snapshot.pod_info(obj)
        held = self._charge(old, -1)
        if kind == "DELETED":
            self.pods.pop(uid, None)
            self.versions.pop(uid, None)
            self.assumed.pop(uid, None)
            self.evicting.discard(uid)
            self.nominated.pop(uid, None)
            self.sibling_waiters.discard(uid)
            self.queue.remove(uid)
            self.reports.forget(uid)
            self._leave_group(old, uid)
            if held:
                self._requeue_all()
            return
        if info.node_name:
            self.assumed.pop(uid, None)
            self.nominated.pop(uid, None)
        self.pods[uid] = info
        self.versions[uid] = (obj.get("metadata") or {}).get("resourceVersion", "")
        holds = self._charge(info, +1)
        if held and not holds:
            self._requeue_all()  # something finished: room for those waiting
        elif holds and (not held or old is None or old.labels != info.labels):
            self._wake_sibling_waiters()
        if old is None or old.group != info.group:
            self._leave_group(old, uid)
            if info.group is not None:
                self.members.setdefault(info.group, set()).add(uid)
        if info.group is not None and (old is None or (old.node_name, old.phase) != (info.node_name, info.phase)):
            self._touch(info.group)
        if self._served(info):
            if old is None or not self._served(old) or old.judged != info.judged:
                self.queue.add(uid)
                self._wake.set()
        else:
            self.queue.remove(uid)
            self.sibling_waiters.discard(uid)

    def _wake_sibling_waiters(self) -> None:
        if self.sibling_waiters:
            self.queue.move(self.sibling_waiters, asyncio.get_running_loop().time())
            self._arm()
            self._wake.set()

    def _leave_group(self, old: PodInfo | None, uid: str) -> None:
        if old is not None and old.group is not None:
            members = self.members.get(old.group)
            if members is not None:
                members.discard(uid)
                if not members:
                    del self.members[old.group]
            self._touch(old.group)

    def _on_node(self, kind: str, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        if kind == "DELETED":
            changed = self.nodes.pop(name, None) is not None
        else:
            info = snapshot.node_info(obj)
            changed = self.nodes.get(name) != info
            self.nodes[name] = info
            self.usage.setdefault(name, Usage())
            self._node_seen.set()
        if changed:
            self._requeue_all()

    def _on_class(self, kind: str, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        if kind == "DELETED":
            self.classes.pop(name, None)
        else:
            self.classes[name] = int(obj.get("value") or 0)
        self._requeue_all()

    def _on_service(self, kind: str, obj: Obj) -> None:
        m, selector = obj.get("metadata") or {}, (obj.get("spec") or {}).get("selector")
        self.services.put(m.get("namespace", ""), m.get("name", ""), None if kind == "DELETED" else selector)

    def _on_namespace(self, kind: str, obj: Obj) -> None:
        m = obj.get("metadata") or {}
        before = self.namespaces.pop(m.get("name", ""), None)
        if kind != "DELETED":
            self.namespaces[m.get("name", "")] = {str(k): str(v) for k, v in (m.get("labels") or {}).items()}
        if before != self.namespaces.get(m.get("name", "")):
            self._requeue_all()  # rare: what a namespaceSelector matches changed

    def _on_group(self, flavour: str, kind: str, obj: Obj) -> None:
        m = obj.get("metadata") or {}
        key: GroupKey = (flavour, m.get("namespace", ""), m.get("name", ""))
        if kind == "DELETED":
            self._keep_group(key, None)
            self.verdicts.pop(key, None)
            self.enqueued.discard(key)
            timer = self._timers.pop(key, None)
            if timer is not None:
                timer.cancel()
        else:
            old = self.groups.get(key)
            if old is not None and not newer(obj, old):
                return  # the echo of a status write whose answer is already here, or an older one
            self._keep_group(key, obj)
            if old is not None and old.get("spec") == obj.get("spec"):
                # A status change: this scheduler writes the status itself. Only a group that fell
                # back to Pending needs a new session to be enqueued again: while its operator holds
                # the new members back, no pod event would start one.
                if _phase(obj) in ("", "Pending") and _phase(old) not in ("", "Pending"):
                    self._requeue_all()
                return
            self._touch(key)
        self._requeue_all()

    def _keep_group(self, key: GroupKey, obj: Obj | None) -> None:
        """The one writer of ``groups`` (``None``: gone), keeping ``volcano_open`` in step."""
        if obj is None:
            self.groups.pop(key, None)
        else:
            self.groups[key] = obj
        if obj is not None and key[0] == VOLCANO_GROUP and _phase(obj) in ("", "Pending", "Inqueue"):
            self.volcano_open.add(key)
        else:
            self.volcano_open.discard(key)

    def _requeue_all(self) -> None:
        self.queue.move_all(asyncio.get_running_loop().time())
        self._arm()
        self._wake.set()

    def _requeue_group(self, key: GroupKey) -> None:
        for uid in self.members.get(key, ()):
            self.queue.retry(uid)
        self._wake.set()

    def _arm(self) -> None:
        """A wake-up for the next back-off to end (or flush), unless one comes sooner already."""
        when = self.queue.next_wakeup()
        if when is None or (self._timer is not None and self._timer_at <= when):
            return
        if self._timer is not None:
            self._timer.cancel()

        def fire() -> None:
            self._timer = None
            self._wake.set()

        self._timer_at = when
        self._timer = asyncio.get_running_loop().call_at(when, fire)

    def _touch(self, key: GroupKey) -> None:
        self.dirty.add(key)
        self._wake.set()

    # -- one scheduling pass -------------------------------------------------------------------------

    def _member_infos(self, key: GroupKey) -> list[PodInfo]:
        out = []
        for uid in self.members.get(key, ()):
            info = self.pods[uid]
            node = self.assumed.get(uid)
            out.append(dataclasses.replace(info, node_name=node) if node and not info.node_name else info)
        return out

    def _group(self, key: GroupKey) -> placement.Group:
        obj = self.groups.get(key)
        members = self._member_infos(key)
        if obj is None:
            return placement.Group(key=key, min_member=0, members=tuple(members), exists=False)
        g = placement.group(obj, key[0], members)
        if key in self.enqueued and g.phase in ("", "Pending"):
            g = dataclasses.replace(g, phase="Inqueue")  # enqueued by us; the status write may lag
        return g

    def cycle(self) -> None:
        """Decide for every active pod, start the writes, and bring touched PodGroups up to date."""
        now = asyncio.get_running_loop().time()
        self.queue.expire(now)
        chosen = {uid for uid in self.queue.take() if uid in self.pods and self._served(self.pods[uid])}
        early = not chosen and bool(self.queue.backing)
        if early:
            popped = self.queue.pop_backing(POP_BACKING)
            chosen = {uid for uid in popped if uid in self.pods and self._served(self.pods[uid])}
        elif chosen and self.queue.backing:
            # Back-off bounds the work a crowd of pods makes; it must not let them overtake a pod
            # of higher priority that is merely backing off.
            top = max(self.pods[uid].priority for uid in chosen)
            chosen |= {
                uid
                for uid in self.queue.backing
                if uid in self.pods and self.pods[uid].priority > top and self._served(self.pods[uid])
            }
        # A gang is decided whole: every pending member joins the pass, backing off or not.
        for key in {g for uid in chosen if (g := self.pods[uid].group) is not None}:
            chosen |= {uid for uid in self.members.get(key, ()) if self._served(self.pods[uid])}
        pending = [self._nominee(self.pods[uid]) for uid in chosen]
        keys = {p.group for p in pending if p.group is not None}
        keys |= self.volcano_open
        groups = {k: self._group(k) for k in keys}
        nodes = list(self.nodes.values())
        decision = placement.schedule(nodes, self.usage, pending, groups, self.classes, self.on_node, self.namespaces)
        for found in decision.preemptions:
            self._preempt(found)
        for pod, node in decision.bindings:
            self.queue.remove(pod.uid)
            self.assumed[pod.uid] = node
            self._charge(pod, +1)
            if pod.group is not None:
                self._touch(pod.group)
            self._spawn(self._bind(pod, node))
        for pod, message in decision.unschedulable:
            self.queue.failed(pod.uid, now)
            self.reports.report(pod, message)
            if pod.waits_for_siblings:
                self.sibling_waiters.add(pod.uid)
        if decision.bindings:
            self._wake_sibling_waiters()  # a pod placed before them in this pass may have helped
        for key in decision.enqueued:
            self.enqueued.add(key)
            self._touch(key)
            self._requeue_group(key)
        for key, message in decision.gangs.items():
            if self.verdicts.get(key) != message:
                self.verdicts[key] = message
                self._touch(key)
        for key in decision.placed_gangs:
            if self.verdicts.get(key) is not None:
                self.verdicts[key] = None
                self._touch(key)
        dirty, self.dirty = self.dirty, set()
        for key in dirty:
            self._sync_group(key)
        if (decision.bindings or early) and self.queue.backing and not decision.unschedulable:
            self._wake.set()  # room may be left: try more of those backing off
        self._arm()

    # -- writes --------------------------------------------------------------------------------------

    def _nominee(self, info: PodInfo) -> PodInfo:
        """The pod as this pass judges it: where it is nominated, and the Services selecting it."""
        node = self.nominated.get(info.uid)
        selected = None if info.spread else self.services.selector_for(info.namespace, info.labels)
        if (node and node != info.nominated) or selected != info.default_selector:
            return dataclasses.replace(info, nominated=node or info.nominated, default_selector=selected)
        return info

    def _preempt(self, found: preemption.Preemption) -> None:
        """Evict the victims (held as terminating from now on) and nominate the preemptors."""
        by = found.preemptors[0][0]
        for victim in found.victims:
            self.evicting.add(victim.uid)
            held = self.on_node.get(victim.node_name, {})
            if victim.uid in held:
                held[victim.uid] = dataclasses.replace(held[victim.uid], deleting=True, preempted=True)
            self._spawn(evictions.evict(self.client, self.reports, self.now, victim, by))
        for pod, node in found.preemptors:
            if self.nominated.get(pod.uid) != node:
                self.nominated[pod.uid] = node
                self._spawn(evictions.nominate(self.client, pod, node))

    async def _bind(self, pod: PodInfo, node: str) -> None:
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        async with self._writes:
            try:
                await self.client.create(build(PodBinding, binding), pod.name, namespace=pod.namespace)
            except Exception as exc:
                self._unassume(pod)
                if not isinstance(exc, ApiError) or not (is_status(exc, 409) or is_status(exc, 404)):
                    log.warning("binding %s/%s to %s failed: %s", pod.namespace, pod.name, node, exc)
                    self.queue.failed(pod.uid, asyncio.get_running_loop().time())
                    self._arm()
                return
            self.reports.placed(pod.uid)
        self.reports.emit(
            event_body(
                pod_ref(pod),
                type_="Normal",
                reason="Scheduled",
                message=f"Successfully assigned {pod.namespace}/{pod.name} to {node}",
                component=pod.scheduler,
                now=self.now(),
            )
        )

    def _unplaced(self, uid: str) -> bool:
        info = self.pods.get(uid)
        return info is not None and self.reports.said(uid) and self._served(info)

    def _retry(self, uid: str) -> None:
        if uid in self.queue:
            self.queue.retry(uid)
            self._wake.set()

    def _unassume(self, pod: PodInfo) -> None:
        current = self.pods.get(pod.uid)
        if self.assumed.get(pod.uid) is None:
            return
        self._charge(current, -1)
        self.assumed.pop(pod.uid, None)
        self._charge(current, +1)
        if current is not None and current.group is not None:
            self._touch(current.group)

    # -- PodGroups -----------------------------------------------------------------------------------

    def _sync_group(self, key: GroupKey) -> None:
        obj = self.groups.get(key)
        if obj is None:
            return
        if key in self._group_writing:
            self._group_stale.add(key)  # judged again once the write in flight has landed
            return
        members = self._member_infos(key)
        now = self.now()
        verdict = self.verdicts.get(key)
        if key[0] == COSCHEDULING:
            status = podgroups.coscheduling_status(obj, members, now=now)
            timeout = int((obj.get("spec") or {}).get("scheduleTimeoutSeconds") or 0)
            if timeout:
                expired = podgroups.timed_out({**obj, "status": status}, self.clock())
                status = podgroups.timeout_condition(status, expired=expired, verdict=verdict, timeout=timeout, now=now)
                self._arm_timeout(key, status, timeout, expired)
        else:
            status = podgroups.volcano_status(obj, members, enqueued=key in self.enqueued, verdict=verdict, now=now)
            if status.get("phase") not in ("", "Pending", "Inqueue"):
                # Admission is spent once the gang runs: if it falls back to Pending (its minMember
                # grew), Volcano's enqueue action must admit it again against what is free then.
                self.enqueued.discard(key)
        if status == (obj.get("status") or {}):
            return
        self._group_writing.add(key)
        self._spawn(self._write_group(key, obj, status))

    def _arm_timeout(self, key: GroupKey, status: Obj, timeout: int, expired: bool) -> None:
        delay = None if expired or key in self._timers else podgroups.timeout_delay(status, timeout, self.clock())
        if delay is None:
            return

        def fire() -> None:
            self._timers.pop(key, None)
            self._touch(key)

        self._timers[key] = asyncio.get_running_loop().call_later(delay, fire)

    async def _write_group(self, key: GroupKey, obj: Obj, status: Obj) -> None:
        flavour, namespace, name = key
        res = GROUP_RESOURCES[flavour]
        old = obj.get("status") or {}
        try:
            async with self._writes:
                try:
                    answer = await self.client.patch(
                        res.Status, name, {"status": status}, namespace=namespace, patch_type=PatchType.MERGE
                    )
                except Exception as exc:
                    if not (isinstance(exc, ApiError) and is_status(exc, 404)):
                        log.warning("could not update the status of PodGroup %s/%s: %s", namespace, name, exc)
                        asyncio.get_running_loop().call_later(RETRY_SECONDS, self._touch, key)  # try again
                    return
            # The next pass compares with what was written: the watch may not have brought it back yet.
            written, current = to_dict(answer), self.groups.get(key)
            if current is not None and newer(written, current, strictly=True):
                self._keep_group(key, written)
            self._group_events(key, obj, old, status)
        finally:
            self._group_writing.discard(key)
            if key in self._group_stale:
                self._group_stale.discard(key)
                self._touch(key)

    def _group_events(self, key: GroupKey, obj: Obj, old: Obj, new: Obj) -> None:
        """Warnings on the PodGroup: a new Unschedulable condition (Volcano) or a schedule timeout."""
        warning = podgroups.unschedulable_warning(key, obj, old, new)
        if warning is not None:
            involved, reason, message = warning
            source = GROUP_SOURCES[key[0]]
            now = self.now()
            self.reports.emit(
                event_body(involved, type_="Warning", reason=reason, message=message, component=source, now=now)
            )

    async def shutdown(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for timer in self._timers.values():
            timer.cancel()
        for task in list(self._background):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._background, return_exceptions=True)


def _phase(group: Obj) -> str:
    return str((group.get("status") or {}).get("phase") or "")
