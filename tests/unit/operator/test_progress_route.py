"""The status server's v1 route, its pure part: which kinds it serves."""

from __future__ import annotations

from trainyard.api.kinds import KINDS
from trainyard.operator.statusserver import StatusHandler


def test_the_route_serves_every_kind_that_reports_progress_by_plural() -> None:
    served = StatusHandler(client=None)  # type: ignore[arg-type]  # no request is made here
    assert {kind.kind for kind in served.progress_kinds.values()} == {
        k for k, info in KINDS.items() if info.training_progress
    }
    assert ("kubeflow.org", "v1", "pytorchjobs") in served.progress_kinds
    assert served.progress_kinds[("kubeflow.org", "v2beta1", "mpijobs")].kind == "MPIJob"
