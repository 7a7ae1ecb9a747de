"""What a delete does to an object the store cannot remove yet: finalizers, grace, preconditions."""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.registry import BUILTINS
from trainyard.cluster.server.apiserver.writes import deletion

RT = {rt.kind: rt for rt in BUILTINS}
NOW = "2026-01-01T00:00:00Z"


def pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7"},
        "spec": {"nodeName": "box", "terminationGracePeriodSeconds": 12},
        "status": status,
    }


@pytest.mark.parametrize(
    ("kind", "finalizers", "propagation", "after"),
    [
        ("ConfigMap", [], None, []),
        ("ConfigMap", [], "Orphan", ["orphan"]),
        ("ConfigMap", ["a/b"], "Foreground", ["a/b", "foregroundDeletion"]),
        ("ConfigMap", ["orphan"], "Orphan", ["orphan"]),
        ("Namespace", [], "Background", ["kubernetes"]),
    ],
    ids=["none", "orphan", "foreground-after-others", "orphan-once", "namespace-keeps-kubernetes"],
)
def test_finalizers_after_a_delete(kind: str, finalizers: list[str], propagation: str | None, after: list[str]) -> None:
    assert deletion.finalizers_after(RT[kind], {"finalizers": finalizers}, propagation) == after


def test_a_bound_pod_waits_for_its_node_until_it_finished() -> None:
    assert deletion.awaiting_node(RT["Pod"], pod(phase="Running"))
    assert not deletion.awaiting_node(RT["Pod"], pod(phase="Succeeded"))
    assert not deletion.awaiting_node(RT["ConfigMap"], pod(phase="Running"))


def test_a_graceful_pod_is_marked_with_its_own_grace_period() -> None:
    current = pod(phase="Running")
    new = deletion.marked(RT["Pod"], current, finalizers=[], graceful=True, grace_seconds=None, now=NOW)
    assert new["metadata"]["deletionTimestamp"] == NOW
    assert new["metadata"]["deletionGracePeriodSeconds"] == 12
    assert "deletionTimestamp" not in current["metadata"]  # a new object; the stored one is untouched
    again = deletion.marked(RT["Pod"], new, finalizers=[], graceful=True, grace_seconds=0, now="later")
    assert (again["metadata"]["deletionTimestamp"], again["metadata"]["deletionGracePeriodSeconds"]) == (NOW, 12)


def test_a_namespace_is_marked_terminating() -> None:
    ns = {"metadata": {"name": "team"}, "spec": {}}
    new = deletion.marked(RT["Namespace"], ns, finalizers=["kubernetes"], graceful=False, grace_seconds=None, now=NOW)
    assert new["status"]["phase"] == "Terminating"
    assert new["metadata"]["finalizers"] == ["kubernetes"]
    assert new["metadata"]["deletionGracePeriodSeconds"] == 0


def test_preconditions_name_the_object_meant() -> None:
    meta = pod()["metadata"]
    deletion.check_preconditions(RT["Pod"], meta, {"uid": "u1", "resourceVersion": "7"})
    with pytest.raises(errors.ApiError) as caught:
        deletion.check_preconditions(RT["Pod"], meta, {"uid": "u2"})
    assert caught.value.code == 409
    assert "Precondition failed: UID in precondition: u2, UID in object meta: u1" in caught.value.message
    with pytest.raises(errors.ApiError):
        deletion.check_preconditions(RT["Pod"], meta, ["uid"])
