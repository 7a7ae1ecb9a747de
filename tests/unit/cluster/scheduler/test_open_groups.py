"""The scheduler's index of Volcano groups still to be enqueued or placed, kept as their watch events come.

Every scheduling pass judges these groups whether or not a pod of theirs is pending; the index
saves finding them among every group (one a job) each pass, and must follow each group's phase.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig

from trainyard.cluster.clients.scheduler.loop import Scheduler
from trainyard.cluster.clients.scheduler.snapshot import COSCHEDULING, VOLCANO_GROUP


def group(name: str, phase: str, version: str, min_member: int = 2) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": version}
    return {"metadata": meta, "spec": {"minMember": min_member}, "status": {"phase": phase} if phase else {}}


def test_open_volcano_groups_follow_their_phase_and_deletion() -> None:
    async def scenario() -> None:
        # The client is never called: only the watch handlers and the index are exercised.
        config = {
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
        client = AsyncClient(KubeConfig.from_dict(config))
        scheduler = Scheduler(client)
        scheduler._on_group(VOLCANO_GROUP, "ADDED", group("a", "", "1"))
        scheduler._on_group(VOLCANO_GROUP, "ADDED", group("b", "Inqueue", "2"))
        scheduler._on_group(COSCHEDULING, "ADDED", group("c", "Pending", "3"))
        assert scheduler.volcano_open == {(VOLCANO_GROUP, "ns", "a"), (VOLCANO_GROUP, "ns", "b")}

        scheduler._on_group(VOLCANO_GROUP, "MODIFIED", group("b", "Running", "4"))
        scheduler._on_group(VOLCANO_GROUP, "MODIFIED", group("a", "Pending", "5"))
        assert scheduler.volcano_open == {(VOLCANO_GROUP, "ns", "a")}

        # An echo older than what is kept changes nothing.
        scheduler._on_group(VOLCANO_GROUP, "MODIFIED", group("b", "Pending", "3"))
        assert scheduler.volcano_open == {(VOLCANO_GROUP, "ns", "a")}

        # A group that fell back to Pending (its members restarted) is open again; a deleted one is not.
        scheduler._on_group(VOLCANO_GROUP, "MODIFIED", group("b", "Pending", "6"))
        scheduler._on_group(VOLCANO_GROUP, "DELETED", group("a", "Pending", "7"))
        assert scheduler.volcano_open == {(VOLCANO_GROUP, "ns", "b")}
        assert set(scheduler.groups) == {(VOLCANO_GROUP, "ns", "b"), (COSCHEDULING, "ns", "c")}
        await scheduler.shutdown()
        await client.close()

    asyncio.run(scenario())
