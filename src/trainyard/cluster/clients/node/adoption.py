"""Taking over the container runs an earlier node agent started, so that containers outlive the agent.

Each container run leaves a state file (``Layout.container_state``) its shim keeps. ``resume``
fills a new ``PodRun`` from them: a run whose shim still runs is adopted as it is; one that ended
meanwhile carries its recorded exit; a container the pod's status says was running but that left
no state is reported lost (``shims.LOST_REASON``). ``leftovers`` gathers what is still running for
a pod being deleted that this agent never ran, so that it can be stopped before the pod goes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from trainyard.api.meta import Obj
from trainyard.cluster.clients.node.lifecycle import stamp
from trainyard.cluster.clients.node.runs import ContainerRun, PodRun
from trainyard.cluster.clients.node.runtime import shims
from trainyard.cluster.paths import Layout


def resume(runtime: shims.ShimRuntime, layout: Layout, run: PodRun, pod: Obj, now: Callable[[], str]) -> bool:
    """Take over the containers an earlier agent started, from their state files; whether there were any.

    The restart policy then applies to a run that ended as to any other.
    """
    status = pod.get("status") or {}
    seen = {
        s.get("name"): s
        for s in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    }
    found = False
    for cr in [*run.init_containers, *run.containers]:
        reported = seen.get(cr.name) or {}
        state = reported.get("state") or {}
        handle = runtime.adopt(layout.container_state(run.namespace, run.name, run.uid, cr.name))
        if handle is not None:
            cr.process = handle
            cr.restart_count = handle.restart_count
            cr.started_at = stamp(handle.started_at)
            cr.started_mono = time.monotonic() - max(0.0, time.time() - handle.started_at)
        elif "running" in state:
            cr.restart_count = int(reported.get("restartCount") or 0)
            cr.started_at = state["running"].get("startedAt")
            cr.exit_code, cr.reason, cr.finished_at = 137, shims.LOST_REASON, now()
            cr.message = shims.LOST_MESSAGE
        elif "terminated" in state:
            done = state["terminated"]
            cr.restart_count = int(reported.get("restartCount") or 0)
            cr.started_at, cr.finished_at = done.get("startedAt"), done.get("finishedAt") or now()
            cr.exit_code, cr.reason = int(done.get("exitCode", 137)), done.get("reason")
            cr.message = done.get("message")
        else:
            continue
        cr.last_state = reported.get("lastState") or {}
        found = True
    return found


def leftovers(runtime: shims.ShimRuntime, layout: Layout, pod: Obj) -> PodRun:
    """A run holding whatever an earlier agent left running for ``pod``, so that it can be stopped."""
    m, spec = pod["metadata"], pod.get("spec") or {}
    run = PodRun(m["namespace"], m["name"], m["uid"])
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        cr = ContainerRun(container["name"], container.get("image", ""))
        cr.process = runtime.adopt(layout.container_state(run.namespace, run.name, run.uid, cr.name))
        run.containers.append(cr)
    return run
