"""The JobSet controller's pure decisions: child Jobs, success and failure policies, restarts, startup, suspend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from trainyard.api import jobset as api
from trainyard.api.meta import format_time
from trainyard.cluster.clients.jobs.controller import pod_for
from trainyard.cluster.clients.jobsets import decisions
from trainyard.cluster.clients.jobsets.decisions import reconcile

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def jobset(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "metadata": {"name": "js", "namespace": "ns", "uid": "js-uid", "resourceVersion": "3"},
        "spec": {
            "replicatedJobs": [
                {"name": "leader", "replicas": 1, "template": {"spec": {"completions": 1, "parallelism": 1}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {"completions": 2, "parallelism": 2}}},
            ],
            **spec,
        },
        "status": status or {},
    }
    api.default(obj)
    return obj


def child(owner: dict[str, Any], rjob: int, index: int, state: str | None = None, **status: Any) -> dict[str, Any]:
    job = decisions.build_job(owner, owner["spec"]["replicatedJobs"][rjob], index)
    conditions = [{"type": state, "status": "True", "reason": "R", "message": "m"}] if state else []
    job["status"] = {"conditions": conditions, **status}
    return job


def all_children(owner: dict[str, Any], state: str | None = None, **status: Any) -> list[dict[str, Any]]:
    return [
        child(owner, 0, 0, state, **status),
        child(owner, 1, 0, state, **status),
        child(owner, 1, 1, state, **status),
    ]


def kinds(status: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in (status or {}).get("conditions") or []]


def test_a_new_jobset_creates_its_jobs_and_headless_service() -> None:
    plan = reconcile(jobset(), [], T0)
    assert [j["metadata"]["name"] for j in plan.create] == ["js-leader-0", "js-workers-0", "js-workers-1"]
    assert plan.service is not None and plan.service["metadata"]["name"] == "js"
    assert plan.service["spec"] == {
        "clusterIP": "None",
        "selector": {api.JOBSET_NAME: "js"},
        "publishNotReadyAddresses": True,
    }
    assert plan.status is not None
    assert [r["name"] for r in plan.status["replicatedJobsStatus"]] == ["leader", "workers"]


def test_child_jobs_carry_upstreams_labels_annotations_subdomain_and_owner() -> None:
    owner = jobset()
    job = decisions.build_job(owner, owner["spec"]["replicatedJobs"][1], 1)
    labels = job["metadata"]["labels"]
    assert labels[api.JOBSET_NAME] == "js" and labels[api.REPLICATED_JOB_NAME] == "workers"
    assert labels[api.JOB_INDEX] == "1" and labels[api.JOB_GLOBAL_INDEX] == "2"
    assert labels[api.REPLICATED_JOB_REPLICAS] == "2" and labels[api.GLOBAL_REPLICAS] == "3"
    assert labels[api.RESTARTS] == "0" and labels[api.JOBSET_UID] == "js-uid"
    assert labels[api.JOB_KEY] == decisions.job_key("ns", "js-workers-1")
    assert job["metadata"]["annotations"] == labels
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"] == labels
    assert pod["spec"]["subdomain"] == "js" and pod["spec"]["restartPolicy"] == "OnFailure"
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["suspend"] is False
    assert job["metadata"]["ownerReferences"][0]["kind"] == "JobSet"


def test_existing_jobs_are_not_created_again_nor_the_service() -> None:
    owner = jobset()
    plan = reconcile(owner, all_children(owner), T0, service_exists=True)
    assert list(plan.create) == [] and plan.service is None


def test_all_jobs_succeeded_completes_the_jobset() -> None:
    owner = jobset()
    plan = reconcile(owner, all_children(owner, "Complete"), T0, service_exists=True)
    assert plan.status is not None
    assert ("Completed", "True", "AllJobsCompleted") in kinds(plan.status)
    assert plan.status["terminalState"] == "Completed"
    workers = plan.status["replicatedJobsStatus"][1]
    assert workers == {"name": "workers", "ready": 0, "succeeded": 2, "failed": 0, "active": 0, "suspended": 0}


def test_success_policy_any_over_a_target_completes_on_one_job() -> None:
    owner = jobset(successPolicy={"operator": "Any", "targetReplicatedJobs": ["leader"]})
    plan = reconcile(owner, [child(owner, 0, 0, "Complete"), child(owner, 1, 0), child(owner, 1, 1)], T0)
    assert plan.status is not None and ("Completed", "True", "AllJobsCompleted") in kinds(plan.status)


def test_success_policy_all_waits_for_every_job() -> None:
    owner = jobset()
    plan = reconcile(owner, [child(owner, 0, 0, "Complete"), child(owner, 1, 0), child(owner, 1, 1)], T0)
    assert plan.status is not None and not any(k[0] == "Completed" for k in kinds(plan.status))


def test_a_failed_job_without_failure_policy_fails_the_jobset() -> None:
    owner = jobset()
    plan = reconcile(owner, [child(owner, 0, 0, "Failed"), child(owner, 1, 0), child(owner, 1, 1)], T0)
    assert plan.status is not None
    failed = next(c for c in plan.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "FailedJobs"
    assert failed["message"] == "jobset failed due to one or more job failures (first failed job: js-leader-0)"
    assert plan.status["terminalState"] == "Failed"


def test_max_restarts_restarts_then_fails() -> None:
    owner = jobset(failurePolicy={"maxRestarts": 1})
    failing = [child(owner, 0, 0, "Failed"), child(owner, 1, 0), child(owner, 1, 1)]
    first = reconcile(owner, failing, T0)
    assert first.status is not None and first.status["restarts"] == 1 and first.status["restartsCountTowardsMax"] == 1
    assert ("RestartingJobSet", "True", "DefaultFailurePolicy") in kinds(first.status)
    # The next pass deletes the previous attempt's Jobs; their replacements wait until they are gone.
    restarted = jobset(first.status, failurePolicy={"maxRestarts": 1})
    second = reconcile(restarted, failing, T0, service_exists=True)
    assert sorted(second.delete) == ["js-leader-0", "js-workers-0", "js-workers-1"] and list(second.create) == []
    third = reconcile(restarted, [], T0, service_exists=True)
    assert len(third.create) == 3
    assert {j["metadata"]["labels"][api.RESTARTS] for j in third.create} == {"1"}
    again = [child(restarted, 0, 0, "Failed"), child(restarted, 1, 0), child(restarted, 1, 1)]
    last = reconcile(restarted, again, T0, service_exists=True)
    assert last.status is not None
    assert ("Failed", "True", "ReachedMaxRestarts") in kinds(last.status)


def test_a_fail_jobset_rule_fails_at_once() -> None:
    rules = [{"action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]}]
    owner = jobset(failurePolicy={"maxRestarts": 5, "rules": rules})
    failed = child(owner, 1, 0, "Failed")
    failed["status"]["conditions"][0]["reason"] = "BackoffLimitExceeded"
    plan = reconcile(owner, [child(owner, 0, 0), failed, child(owner, 1, 1)], T0)
    assert plan.status is not None and ("Failed", "True", "FailJobSetFailurePolicyAction") in kinds(plan.status)


def test_suspend_propagates_and_resume_unsuspends() -> None:
    owner = jobset(suspend=True)
    created = reconcile(owner, [], T0)
    assert all(j["spec"]["suspend"] is True for j in created.create)
    assert created.status is not None and ("Suspended", "True", "SuspendedJobs") in kinds(created.status)
    running = all_children(jobset())  # built unsuspended: suspending patches them
    plan = reconcile(owner, running, T0, service_exists=True)
    assert set(plan.suspend.values()) == {True} and len(plan.suspend) == 3
    resumed_owner = jobset(created.status)
    suspended_children = all_children(owner)
    resumed = reconcile(resumed_owner, suspended_children, T0, service_exists=True)
    assert set(resumed.suspend.values()) == {False} and len(resumed.suspend) == 3
    assert resumed.status is not None and ("Suspended", "False", "ResumeJobs") in kinds(resumed.status)


def test_in_order_startup_waits_for_each_replicated_job_to_be_ready() -> None:
    owner = jobset(startupPolicy={"startupPolicyOrder": "InOrder"})
    first = reconcile(owner, [], T0)
    assert [j["metadata"]["name"] for j in first.create] == ["js-leader-0"]
    assert first.status is not None and ("StartupPolicyInProgress", "True", "InOrderStartupPolicyInProgress") in kinds(
        first.status
    )
    ready_leader = child(owner, 0, 0, ready=1, active=1)
    second = reconcile(jobset(first.status, startupPolicy={"startupPolicyOrder": "InOrder"}), [ready_leader], T0)
    assert [j["metadata"]["name"] for j in second.create] == ["js-workers-0", "js-workers-1"]


def test_managed_by_another_controller_is_left_alone() -> None:
    plan = reconcile(jobset(managedBy="kueue.x-k8s.io/multikueue"), [], T0)
    assert list(plan.create) == [] and plan.status is None


def test_a_finished_jobset_deletes_active_jobs_and_itself_after_its_ttl() -> None:
    done = {
        "conditions": [
            {
                "type": "Completed",
                "status": "True",
                "reason": "r",
                "message": "m",
                "lastTransitionTime": format_time(T0),
            }
        ]
    }
    owner = jobset(done, ttlSecondsAfterFinished=30)
    early = reconcile(owner, [child(owner, 1, 0)], T0 + timedelta(seconds=10))
    assert list(early.delete) == ["js-workers-0"] and not early.delete_jobset and early.requeue_after == 20
    assert reconcile(owner, [], T0 + timedelta(seconds=31)).delete_jobset


def launcher_after_node(status: dict[str, Any] | None = None, dep: str = "Ready", **spec: Any) -> dict[str, Any]:
    """MPI's shape: ``node`` (2 Jobs of 2 pods) then ``launcher``, which dependsOn ``node`` ``dep``."""
    rjobs = [
        {"name": "node", "replicas": 2, "template": {"spec": {"completions": 2, "parallelism": 2}}},
        {
            "name": "launcher",
            "dependsOn": [{"name": "node", "status": dep}],
            "template": {"spec": {"completions": 1, "parallelism": 1}},
        },
    ]
    return jobset(status, replicatedJobs=rjobs, **spec)


def names(jobs: list[dict[str, Any]]) -> list[str]:
    return [j["metadata"]["name"] for j in jobs]


def test_depends_on_ready_creates_the_launcher_only_once_every_node_job_is_ready() -> None:
    owner = launcher_after_node()
    assert names(reconcile(owner, [], T0).create) == ["js-node-0", "js-node-1"]
    one_ready = [child(owner, 0, 0, ready=2, active=2), child(owner, 0, 1, ready=1, active=2)]
    plan = reconcile(owner, one_ready, T0, service_exists=True)
    assert list(plan.create) == []
    assert plan.status is not None and plan.status["replicatedJobsStatus"][0]["ready"] == 1
    # A Job is ready when ready + succeeded pods reach min(parallelism, completions); failed Jobs count too.
    reached = [child(owner, 0, 0, ready=1, succeeded=1, active=1), child(owner, 0, 1, "Failed")]
    rows = decisions.replicated_statuses(owner, decisions.classify(reached, 0))
    assert decisions.dependencies_reached(owner, owner["spec"]["replicatedJobs"][1], rows)
    both_ready = [child(owner, 0, 0, ready=2, active=2), child(owner, 0, 1, ready=2, active=2)]
    assert names(reconcile(owner, both_ready, T0, service_exists=True).create) == ["js-launcher-0"]


def test_depends_on_complete_waits_for_every_node_job_to_succeed() -> None:
    owner = launcher_after_node(dep="Complete")
    running = [child(owner, 0, 0, ready=2, active=2), child(owner, 0, 1, "Complete", succeeded=2)]
    assert list(reconcile(owner, running, T0, service_exists=True).create) == []
    done = [child(owner, 0, 0, "Complete", succeeded=2), child(owner, 0, 1, "Complete", succeeded=2)]
    assert names(reconcile(owner, done, T0, service_exists=True).create) == ["js-launcher-0"]


def test_a_suspended_jobset_with_depends_on_creates_only_what_is_reached_and_resumes_in_turn() -> None:
    suspended = launcher_after_node(suspend=True)
    created = reconcile(suspended, [], T0)
    assert names(created.create) == ["js-node-0", "js-node-1"] and all(j["spec"]["suspend"] for j in created.create)
    nodes = [child(suspended, 0, 0), child(suspended, 0, 1)]
    resumed = reconcile(launcher_after_node(created.status), nodes, T0, service_exists=True)
    assert resumed.suspend == {"js-node-0": False, "js-node-1": False} and list(resumed.create) == []


def test_resuming_copies_the_replicated_jobs_scheduling_directives_into_the_jobs() -> None:
    owner = jobset(suspend=True)
    old_jobs = all_children(owner)
    leader = old_jobs[0]["spec"]["template"]
    leader["metadata"]["labels"]["kueue"] = "old"
    leader.setdefault("spec", {})["tolerations"] = [{"key": "a", "operator": "Exists"}]
    # While suspended, Kueue writes the flavor's node selector, tolerations, labels and a gate removal.
    resumed = jobset(reconcile(owner, [], T0).status)
    pod = resumed["spec"]["replicatedJobs"][0]["template"]["spec"].setdefault("template", {})
    pod.setdefault("metadata", {})["labels"] = {"kueue": "flavor-a"}
    pod["metadata"]["annotations"] = {"note": "x"}
    pod.setdefault("spec", {})["nodeSelector"] = {"pool": "a"}
    pod["spec"]["tolerations"] = [{"key": "b", "operator": "Exists"}]
    plan = reconcile(resumed, old_jobs, T0, service_exists=True)
    assert set(plan.suspend) == {"js-leader-0", "js-workers-0", "js-workers-1"}
    assert set(plan.templates) == {"js-leader-0"}
    patch = plan.templates["js-leader-0"]
    assert patch["metadata"]["labels"]["kueue"] == "flavor-a"
    assert patch["metadata"]["labels"][api.JOBSET_NAME] == "js"  # the Job's own labels are kept
    assert patch["metadata"]["annotations"]["note"] == "x"
    assert patch["spec"]["nodeSelector"] == {"pool": "a"}
    assert patch["spec"]["tolerations"] == [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]
    assert "schedulingGates" not in patch["spec"]


def test_the_pod_template_carries_what_the_kubeflow_sdk_reads_from_pods() -> None:
    owner = jobset()
    rjob = owner["spec"]["replicatedJobs"][1]
    rjob["template"]["spec"]["template"] = {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}, "annotations": {"a": "b"}},
        "spec": {"containers": [{"name": "node", "image": "python:3.11"}]},
    }
    pod = decisions.build_job(owner, rjob, 1)["spec"]["template"]["metadata"]
    assert pod["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    assert pod["labels"][api.JOBSET_NAME] == "js" and pod["labels"][api.REPLICATED_JOB_NAME] == "workers"
    assert pod["annotations"]["a"] == "b" and pod["annotations"][api.JOB_INDEX] == "1"


def test_a_child_jobs_pods_carry_the_jobset_labels_the_completion_index_and_a_fresh_name() -> None:
    """The Kubeflow SDK finds a TrainJob's pods by these labels; a restarted pod must get a new name."""
    owner = jobset()
    rjob = owner["spec"]["replicatedJobs"][1]
    step = {"trainer.kubeflow.org/trainjob-ancestor-step": "t"}
    rjob["template"]["spec"]["template"] = {"metadata": {"labels": step}}
    job = decisions.build_job(owner, rjob, 1)
    job["metadata"]["uid"] = "job-uid"
    pod = pod_for(job, 0)["metadata"]
    labels = pod["labels"]
    assert labels[api.JOBSET_NAME] == "js" and labels[api.REPLICATED_JOB_NAME] == "workers"
    assert labels["batch.kubernetes.io/job-completion-index"] == "0"
    assert labels["trainer.kubeflow.org/trainjob-ancestor-step"] == "t"
    # upstream's <job>-<index>-<random 5>: the API server completes generateName, so each restart differs
    assert "name" not in pod and pod["generateName"] == "js-workers-1-0-"
