"""How ``yard`` and the metrics read an OptimizationJob: its own family row, the search's columns."""

from __future__ import annotations

from typing import Any

from trainyard.api import families, trainer
from trainyard.api.trainer import optfamily
from trainyard.cli.tables import job_columns, job_headers, job_row
from trainyard.sdk.kinds import builtin_kinds, resolve


def job(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": trainer.API_VERSION,
        "kind": trainer.OPTIMIZATIONJOB,
        "metadata": {"name": "tune", "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "objectives": [{"metric": "loss", "direction": "Minimize"}],
            "searchAlgorithm": {"random": {"seed": 3}},
            "numTrials": 4,
            "parallelTrials": 2,
        },
        "status": status,
    }


def test_its_own_family_with_trials_and_best_columns() -> None:
    assert families.family_of(trainer.OPTIMIZATIONJOB) is optfamily.FAMILY
    (kind,) = resolve("optimizationjobs", builtin_kinds())
    columns = job_columns([kind], wide=False)
    headers = job_headers(columns, wide=False, all_ns=False, show_kind=False)
    assert headers == ["NAME", "STATE", "OBJECTIVE", "ALGORITHM", "TRIALS", "RUNNING", "BEST", "AGE"]
    running = job(state="Running", trialsRunning=2, trialsSucceeded=1, trialsFailed=0, bestValue="0.25")
    row = [str(c) for c in job_row(running, kind, columns, wide=False, all_ns=False, show_kind=False)]
    assert row[:7] == ["tune", "Running", "loss (min)", "random (seed 3)", "1/4", "2", "0.25"]
    fresh = [str(c) for c in job_row(job(), kind, columns, wide=False, all_ns=False, show_kind=False)]
    assert fresh[:7] == ["tune", "Created", "loss (min)", "random (seed 3)", "0/4", "0", "-"]


def test_state_from_conditions_when_another_controller_wrote_the_status() -> None:
    written = job(conditions=[{"type": "Complete", "status": "True"}])
    assert optfamily.VIEW.state(written) == "Complete" and optfamily.VIEW.outcome(written) == "Complete"


def test_the_metrics_progress_is_the_share_of_trials_finished() -> None:
    sample = optfamily.sample(job(state="Running", trialsSucceeded=1, trialsFailed=1))
    assert (sample.state, sample.progress) == ("Running", 50.0)
