"""The Job controller's pure decisions: counting, back-off, deadline, suspend/resume, conditions, TTL.

Each test builds a Job and its pods as the API server would hold them and checks the plan that
``decisions.reconcile`` returns at an injected time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trainyard.api.meta import format_time
from trainyard.cluster.clients.jobs import decisions
from trainyard.cluster.clients.jobs.decisions import Backoff, reconcile

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return format_time(at(seconds))


def job(status: dict[str, Any] | None = None, policy: str = "Never", **spec: Any) -> dict[str, Any]:
    full = {
        "parallelism": 1,
        "completions": 1,
        "backoffLimit": 6,
        "suspend": False,
        "podReplacementPolicy": "TerminatingOrFailed",
        "template": {"spec": {"restartPolicy": policy, "containers": [{"name": "c", "image": "i"}]}},
        **spec,
    }
    meta = {"name": "j", "namespace": "ns", "uid": "job-uid", "resourceVersion": "7"}
    return {"metadata": meta, "spec": full, "status": status or {}}


def pod(name: str, phase: str = "Running", *, tracked: bool = True, deleting: bool = False, **status: Any) -> Any:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "creationTimestamp": stamp(0)}
    if tracked:
        meta["finalizers"] = [decisions.TRACKING_FINALIZER]
    if deleting:
        meta["deletionTimestamp"] = stamp(1)
    return {"metadata": meta, "status": {"phase": phase, **status}}


def ended(name: str, phase: str, seconds: float, **kw: Any) -> Any:
    terminated = {"state": {"terminated": {"finishedAt": stamp(seconds)}}}
    return pod(name, phase, containerStatuses=[terminated], **kw)


def kinds(status: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in (status or {}).get("conditions") or []]


def test_a_new_job_starts_its_clock_and_creates_one_pod() -> None:
    plan = reconcile(job(), [], at(0))
    assert plan.create == 1
    fresh = {"startTime": stamp(0), "active": 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}}
    assert plan.status == fresh


def test_a_succeeded_pod_is_listed_uncounted_then_counted_once_its_finalizer_is_gone() -> None:
    first = reconcile(job({"startTime": stamp(0)}), [ended("p", "Succeeded", 5)], at(6))
    assert first.create == 0 and list(first.unfinalize) == ["p"]
    assert first.status is not None
    assert first.status["uncountedTerminatedPods"] == {"succeeded": ["uid-p"]}
    assert kinds(first.status) == [("SuccessCriteriaMet", "True", "CompletionsReached")]
    # After the finalizer went: counted, and Complete follows SuccessCriteriaMet.
    second = reconcile(job(first.status), [ended("p", "Succeeded", 5, tracked=False)], at(7))
    assert second.status is not None
    assert second.status["succeeded"] == 1 and second.status["uncountedTerminatedPods"] == {}
    assert kinds(second.status) == [
        ("SuccessCriteriaMet", "True", "CompletionsReached"),
        ("Complete", "True", "CompletionsReached"),
    ]
    assert second.status["completionTime"] == stamp(7)
    assert second.status["conditions"][1]["message"] == "Reached expected number of succeeded pods"
    assert [e.reason for e in second.events] == ["Completed"]
    # A finished Job is left alone (the pods keep their state).
    assert reconcile(job(second.status), [ended("p", "Succeeded", 5, tracked=False)], at(8)).status is None


def test_restart_never_replaces_a_failed_pod_after_the_back_off() -> None:
    failed = [ended("a", "Failed", 10)]
    early = reconcile(job({"startTime": stamp(0)}), failed, at(12), Backoff(base=10))
    assert early.create == 0 and early.requeue_after == pytest.approx(8)
    later = reconcile(job({"startTime": stamp(0)}), failed, at(20), Backoff(base=10))
    assert later.create == 1 and list(later.unfinalize) == ["a"]


def test_failures_past_the_backoff_limit_fail_the_job_through_failure_target() -> None:
    spec = {"backoffLimit": 1}
    status = {"startTime": stamp(0), "failed": 1}
    plan = reconcile(job(status, **spec), [ended("a", "Failed", 1, tracked=False), ended("b", "Failed", 3)], at(4))
    assert plan.status is not None and plan.create == 0
    assert kinds(plan.status) == [("FailureTarget", "True", "BackoffLimitExceeded")]
    pods = [ended("a", "Failed", 1, tracked=False), ended("b", "Failed", 3, tracked=False)]
    done = reconcile(job(plan.status, **spec), pods, at(5))
    assert done.status is not None and done.status["failed"] == 2
    assert kinds(done.status)[-1] == ("Failed", "True", "BackoffLimitExceeded")
    assert done.status["conditions"][-1]["message"] == "Job has reached the specified backoff limit"
    assert [(e.type, e.reason) for e in done.events] == [("Warning", "BackoffLimitExceeded")]


@pytest.mark.parametrize(("restarts", "limit", "fails"), [(0, 0, False), (1, 0, True), (1, 2, False), (2, 2, True)])
def test_restart_on_failure_counts_container_restarts(restarts: int, limit: int, fails: bool) -> None:
    running = pod("a", containerStatuses=[{"restartCount": restarts}])
    plan = reconcile(job({"startTime": stamp(0)}, policy="OnFailure", backoffLimit=limit), [running], at(1))
    assert (list(plan.delete) == ["a"]) is fails
    assert (("FailureTarget", "True", "BackoffLimitExceeded") in kinds(plan.status)) is fails


def test_the_deadline_deletes_active_pods_and_waits_for_them_before_failed() -> None:
    spec = {"activeDeadlineSeconds": 30}
    waiting = reconcile(job({"startTime": stamp(0)}, **spec), [pod("a")], at(10))
    assert waiting.requeue_after == pytest.approx(20) and list(waiting.delete) == []
    passed = reconcile(job({"startTime": stamp(0)}, **spec), [pod("a")], at(30))
    assert list(passed.delete) == ["a"] and list(passed.unfinalize) == ["a"]
    assert passed.status is not None and passed.status["terminating"] == 1
    assert passed.status["uncountedTerminatedPods"] == {"failed": ["uid-a"]}
    assert kinds(passed.status) == [("FailureTarget", "True", "DeadlineExceeded")]
    # The pod is still stopping: Failed waits.
    stopping = reconcile(job(passed.status, **spec), [pod("a", deleting=True, tracked=False)], at(31))
    assert stopping.status is not None and ("Failed", "True", "DeadlineExceeded") not in kinds(stopping.status)
    gone = reconcile(job(stopping.status, **spec), [], at(32))
    assert gone.status is not None and gone.status["failed"] == 1
    assert kinds(gone.status)[-1] == ("Failed", "True", "DeadlineExceeded")


def test_suspend_releases_active_pods_uncounted_and_resume_restarts_the_clock() -> None:
    plan = reconcile(job({"startTime": stamp(0)}, suspend=True), [pod("a")], at(5))
    assert list(plan.release) == ["a"] and list(plan.delete) == [] and plan.create == 0
    assert plan.status is not None and kinds(plan.status) == [("Suspended", "True", "JobSuspended")]
    assert plan.status["conditions"][0]["message"] == "Job suspended"
    assert [e.reason for e in plan.events] == ["Suspended"]
    # While suspended, no deadline runs and nothing is created.
    idle = reconcile(job(plan.status, suspend=True, activeDeadlineSeconds=1), [], at(100))
    assert idle.create == 0 and idle.requeue_after is None
    resumed = reconcile(job(plan.status), [], at(200))
    assert resumed.create == 1 and resumed.status is not None
    assert kinds(resumed.status) == [("Suspended", "False", "JobResumed")]
    assert resumed.status["startTime"] == stamp(200)


def test_a_job_created_suspended_gets_no_start_time() -> None:
    plan = reconcile(job(suspend=True), [], at(0))
    assert plan.status is not None and "startTime" not in plan.status and plan.create == 0


def test_replacement_policy_failed_waits_for_terminating_pods() -> None:
    deleting = pod("a", deleting=True)
    both = reconcile(job({"startTime": stamp(0)}), [deleting], at(2), Backoff(base=0.001))
    assert both.create == 1  # TerminatingOrFailed: a pod being deleted already counts as failed
    only = reconcile(job({"startTime": stamp(0)}, podReplacementPolicy="Failed"), [deleting], at(2))
    assert only.create == 0 and list(only.unfinalize) == []


def test_parallel_completions_run_at_most_what_remains() -> None:
    status = {"startTime": stamp(0), "succeeded": 3}
    plan = reconcile(job(status, completions=4, parallelism=3), [], at(1))
    assert plan.create == 1


def test_ttl_after_finished_deletes_the_job_when_due() -> None:
    done = {"completionTime": stamp(10), "conditions": [{"type": "Complete", "status": "True"}]}
    early = reconcile(job(done, ttlSecondsAfterFinished=5), [pod("p", "Succeeded")], at(12))
    assert not early.delete_job and early.requeue_after == pytest.approx(3) and list(early.unfinalize) == ["p"]
    assert reconcile(job(done, ttlSecondsAfterFinished=5), [], at(15)).delete_job
