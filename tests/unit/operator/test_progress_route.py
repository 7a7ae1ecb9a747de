"""The status server's v1 route, its pure parts: which kinds it serves and the merge patch it writes."""

from __future__ import annotations

from trainyard.api.kinds import KINDS
from trainyard.operator.statusserver import StatusHandler, replacing


def test_the_route_serves_every_kind_that_reports_progress_by_plural() -> None:
    served = StatusHandler(client=None)  # type: ignore[arg-type]  # no request is made here
    assert {kind.kind for kind in served.progress_kinds.values()} == {
        k for k, info in KINDS.items() if info.training_progress
    }
    assert ("kubeflow.org", "v1", "pytorchjobs") in served.progress_kinds
    assert served.progress_kinds[("kubeflow.org", "v2beta1", "mpijobs")].kind == "MPIJob"


def test_the_patch_removes_what_the_merge_dropped_at_every_level() -> None:
    old = {"best": {"metric": "accuracy", "value": 0.9}, "lastCheckpoint": {"path": "/a", "epoch": 1}, "x": 1}
    new = {"lastCheckpoint": {"path": "/b"}, "x": 2}
    assert replacing(old, new) == {"best": None, "lastCheckpoint": {"path": "/b", "epoch": None}, "x": 2}
    assert replacing(None, new) == new
