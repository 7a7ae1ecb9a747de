"""The job lifecycle rules of ``trainyard.controller.lifecycle``, through ``reconcile``.

Each table states the observed job (its ``runPolicy``, its stored status) and children and the
clock, and checks the plan: ``managedBy`` (reference §6.5), ``activeDeadlineSeconds`` enforced by
a timed requeue (§6.4, upstream #3358), ``ttlSecondsAfterFinished`` (§6.5), what a finished job
cleans up (§6.2, Services always), suspend and resume (§6.1 steps 3-4), ``completionTime`` on
every finish, ``lastReconcileTime`` on every status write, and the condition transitions the
README documents.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from job_builders import (
    NOW,
    World,
    apply,
    condition,
    job,
    pod,
    replicas,
    run,
    run_world,
    service,
    set_phase,
    stored_status,
    template,
)

from trainyard.api.meta import parse_time
from trainyard.controller import ChildRef, Plan
from trainyard.kit.plans import Event, EventType

STARTED = "2025-12-31T23:59:30Z"
"""``stored_status``'s startTime: 30 s before ``NOW``."""
FINISHED = "2025-12-31T23:59:50Z"
"""A completionTime 10 s before ``NOW``."""


def policy_job(run_policy: dict[str, Any], *, status: dict[str, Any] | None = None, **kw: Any) -> Any:
    return job(1, 2, status=status, extra_spec={"runPolicy": run_policy}, **kw)


def seconds(delta: timedelta | None) -> float | None:
    return None if delta is None else delta.total_seconds()


def conds(plan: Plan) -> list[tuple[str, str, str | None]]:
    assert plan.status is not None
    return [(c.type.value, c.status, c.reason) for c in plan.status.conditions]


# -- managedBy ------------------------------------------------------------------------------------------

MANAGED_BY = [
    # id, managedBy, reconciled
    ("absent", None, True),
    ("training-operator", "kubeflow.org/training-operator", True),
    ("multikueue", "kueue.x-k8s.io/multikueue", False),
    ("someone-else", "example.com/my-controller", False),
]


@pytest.mark.parametrize(("managed_by", "reconciled"), [m[1:] for m in MANAGED_BY], ids=[m[0] for m in MANAGED_BY])
@pytest.mark.parametrize(
    ("status", "phases"),
    [
        (None, {}),
        (stored_status("Created", "Running"), {"Master": ["Running"], "Worker": ["Failed", "Running"]}),
        (stored_status("Created", "Running=False", "Succeeded"), {"Master": ["Succeeded"], "Worker": ["Running"]}),
    ],
    ids=["new", "failed-worker", "succeeded"],
)
def test_a_job_managed_by_someone_else_gets_no_writes_at_all(
    managed_by: str | None, reconciled: bool, status: dict[str, Any] | None, phases: dict[str, list[str]]
) -> None:
    run_policy: dict[str, Any] = {"cleanPodPolicy": "All", "activeDeadlineSeconds": 5, "ttlSecondsAfterFinished": 0}
    if managed_by is not None:
        run_policy["managedBy"] = managed_by
    owner = policy_job(run_policy, status=status)
    pods, services = replicas(owner, phases)

    plan = run(owner, pods, services)

    assert plan.empty is not reconciled
    if not reconciled:
        assert plan == Plan()


# -- activeDeadlineSeconds --------------------------------------------------------------------------------

DEADLINES = [
    # id, activeDeadlineSeconds, stored status (startTime 30 s ago unless new), failed, requeue after (s)
    ("first-pass-starts-the-clock", 60, None, False, 60.0),
    ("before-the-deadline", 60, stored_status("Created", "Running"), False, 30.0),
    ("one-second-left", 31, stored_status("Created", "Running"), False, 1.0),
    ("exactly-at-the-deadline", 30, stored_status("Created", "Running"), True, None),
    ("past-the-deadline", 10, stored_status("Created", "Running"), True, None),
    ("past-while-restarting", 10, stored_status("Created", "Restarting"), True, None),
    ("no-deadline", None, stored_status("Created", "Running"), False, None),
    ("suspended-has-no-clock", 10, stored_status("Created", "Suspended"), False, None),
    ("finished-has-no-deadline", 10, stored_status("Created", "Running=False", "Succeeded"), False, None),
]


@pytest.mark.parametrize(
    ("limit", "status", "fails", "requeue"), [d[1:] for d in DEADLINES], ids=[d[0] for d in DEADLINES]
)
def test_active_deadline_fails_the_job_or_asks_to_be_woken_at_it(
    limit: int | None, status: dict[str, Any] | None, fails: bool, requeue: float | None
) -> None:
    run_policy: dict[str, Any] = {} if limit is None else {"activeDeadlineSeconds": limit}
    if status is not None and status["conditions"][-1]["type"] == "Suspended":
        run_policy["suspend"] = True
    owner = policy_job(run_policy, status=status)
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running", "Running"]} if status else {})

    plan = run(owner, pods, services)

    assert seconds(plan.requeue_after) == requeue
    failed = plan.status is not None and any(c[0] == "Failed" and c[1] == "True" for c in conds(plan))
    assert failed is fails


def test_past_the_deadline_the_job_fails_with_upstreams_message_and_its_replicas_stop() -> None:
    owner = policy_job({"activeDeadlineSeconds": 30}, status=stored_status("Created", "Running"))
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Succeeded", "Pending"]})

    plan = run(owner, pods, services)

    assert plan.status is not None
    assert conds(plan)[-2:] == [
        ("Running", "False", "PyTorchJobRunning"),
        ("Failed", "True", "PyTorchJobFailed"),
    ]
    failed = plan.status.conditions[-1]
    assert failed.message == "Job mnist has failed because it was active longer than specified deadline"
    assert plan.status.completion_time == NOW
    assert plan.status.last_reconcile_time == NOW
    # Running and Pending replicas are stopped; the one that succeeded keeps its log (cleanPodPolicy
    # None); no Service outlives the job.
    assert set(plan.delete) == {
        ChildRef("Pod", "mnist-master-0"),
        ChildRef("Pod", "mnist-worker-1"),
        *(ChildRef("Service", s.name) for s in services),
    }
    assert plan.create == ()
    assert plan.events == (
        Event(
            EventType.WARNING,
            "PyTorchJobFailed",
            "Job mnist has failed because it was active longer than specified deadline",
        ),
    )
    assert plan.requeue_after is None


@pytest.mark.parametrize(
    ("clean", "pods_deleted"),
    [
        ("None", {"mnist-master-0", "mnist-worker-1"}),
        ("Running", {"mnist-master-0", "mnist-worker-1"}),
        ("All", {"mnist-master-0", "mnist-worker-0", "mnist-worker-1"}),
    ],
)
def test_deadline_failure_then_follows_clean_pod_policy(clean: str, pods_deleted: set[str]) -> None:
    owner = policy_job(
        {"activeDeadlineSeconds": 30, "cleanPodPolicy": clean}, status=stored_status("Created", "Running")
    )
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Succeeded", "Running"]})

    plan = run(owner, pods, services)

    assert {r.name for r in plan.delete if r.kind == "Pod"} == pods_deleted


def test_the_deadline_counts_from_the_resume_not_the_first_start() -> None:
    status = stored_status("Created", "Suspended", start="2025-12-31T20:00:00Z")
    owner = policy_job({"activeDeadlineSeconds": 60, "suspend": False}, status=status)

    plan = run(owner)

    assert plan.status is not None and plan.status.start_time == NOW
    assert seconds(plan.requeue_after) == 60.0
    assert not any(c[0] == "Failed" for c in conds(plan))


def test_a_deadline_requeue_wakes_an_otherwise_idle_job_and_fails_it() -> None:
    # Nothing changes between the passes but the clock: the plan of the idle pass asks to be run
    # again at the deadline, and the pass at that time fails the job.
    world = World(policy_job({"activeDeadlineSeconds": 120}))
    world = apply(world, run_world(world), phase="Running")
    world = apply(world, run_world(world))
    idle = run_world(world, now=NOW + timedelta(seconds=50))
    assert idle.status is None and idle.create == () and idle.delete == ()
    assert idle.requeue_after is not None and seconds(idle.requeue_after) == 70.0

    due = run_world(world, now=NOW + timedelta(seconds=50) + idle.requeue_after)
    assert due.status is not None
    assert conds(due)[-1] == ("Failed", "True", "PyTorchJobFailed")


# -- a finished job: Services always go ---------------------------------------------------------------------


@pytest.mark.parametrize("clean", ["None", "Running", "All", None])
@pytest.mark.parametrize("outcome", ["Succeeded", "Failed"])
def test_a_finished_job_removes_every_service_whatever_the_policy(clean: str | None, outcome: str) -> None:
    owner = job(1, 2, clean=clean, status=stored_status("Created", "Running=False", outcome))
    pods, services = replicas(owner, {"Master": ["Succeeded"], "Worker": ["Running", "Failed"]})

    plan = run(owner, pods, services)

    assert {r for r in plan.delete if r.kind == "Service"} == {ChildRef("Service", s.name) for s in services}


def test_a_service_already_being_deleted_is_not_deleted_again() -> None:
    owner = job(1, 1, status=stored_status("Created", "Running=False", "Succeeded"))
    body = service(owner, "Master", 0).to_dict()
    body["metadata"] |= {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["example.com/hold"]}
    held = type(service(owner, "Master", 0)).model_validate(body)

    plan = run(owner, [pod(owner, "Master", 0, phase="Succeeded")], [held, service(owner, "Worker", 0)])

    assert plan.delete == (ChildRef("Service", "mnist-worker-0"),)


# -- completionTime, whatever the path -------------------------------------------------------------------

FINISHES = [
    # id, restartPolicy, stored conditions, pods (Master, Workers with optional exit code), outcome
    ("master-succeeded", "OnFailure", ("Created", "Running"), ("Succeeded", [("Running", None)]), "Succeeded"),
    ("worker-failed-never", "Never", ("Created", "Running"), ("Running", [("Failed", 1)]), "Failed"),
    ("exit-code-permanent", "ExitCode", ("Created", "Running"), ("Running", [("Failed", 1)]), "Failed"),
    ("stored-failed-without-time", "OnFailure", ("Created", "Running=False", "Failed"), ("Running", []), "Failed"),
    (
        "stored-succeeded-without-time",
        "OnFailure",
        ("Created", "Running=False", "Succeeded"),
        ("Succeeded", []),
        "Succeeded",
    ),
]


@pytest.mark.parametrize(
    ("restart", "stored", "children", "outcome"), [f[1:] for f in FINISHES], ids=[f[0] for f in FINISHES]
)
def test_completion_time_is_set_on_every_finish(
    restart: str, stored: tuple[str, ...], children: tuple[str, list[tuple[str, int | None]]], outcome: str
) -> None:
    owner = job(1, 1, restart=restart, status=stored_status(*stored))
    master, workers = children
    pods = [pod(owner, "Master", 0, phase=master)]
    pods += [pod(owner, "Worker", i, phase=p, exit_code=code) for i, (p, code) in enumerate(workers)]

    plan = run(owner, pods)

    assert plan.status is not None
    assert any(c[:2] == (outcome, "True") for c in conds(plan))
    assert plan.status.completion_time == NOW
    assert plan.status.last_reconcile_time == NOW


def test_a_stored_completion_time_is_kept() -> None:
    owner = job(1, 1, status=stored_status("Created", "Running=False", "Succeeded", completionTime=FINISHED))

    plan = run(owner, [pod(owner, "Master", 0, phase="Succeeded")])

    assert plan.status is None


# -- ttlSecondsAfterFinished --------------------------------------------------------------------------------

TTL = [
    # id, ttl, stored conditions, completionTime, suspend, deleted, requeue after (s)
    ("expired", 10, ("Created", "Running=False", "Succeeded"), FINISHED, False, True, None),
    ("expired-after-failure", 5, ("Created", "Running=False", "Failed"), FINISHED, False, True, None),
    ("zero", 0, ("Created", "Running=False", "Succeeded"), FINISHED, False, True, None),
    ("not-yet", 25, ("Created", "Running=False", "Succeeded"), FINISHED, False, False, 15.0),
    ("no-ttl", None, ("Created", "Running=False", "Succeeded"), FINISHED, False, False, None),
    ("suspended", 10, ("Created", "Running=False", "Succeeded"), FINISHED, True, False, None),
    ("running", 10, ("Created", "Running"), None, False, False, None),
    # Counted from the completionTime this pass writes: never deleted before it is stored.
    ("finished-without-time", 0, ("Created", "Running=False", "Succeeded"), None, False, False, 0.0),
]


@pytest.mark.parametrize(
    ("ttl", "stored", "completion", "suspend", "deleted", "requeue"), [t[1:] for t in TTL], ids=[t[0] for t in TTL]
)
def test_ttl_after_finished(
    ttl: int | None,
    stored: tuple[str, ...],
    completion: str | None,
    suspend: bool,
    deleted: bool,
    requeue: float | None,
) -> None:
    extra = {"completionTime": completion} if completion else {}
    run_policy: dict[str, Any] = {"suspend": suspend}
    if ttl is not None:
        run_policy["ttlSecondsAfterFinished"] = ttl
    owner = policy_job(run_policy, status=stored_status(*stored, **extra))
    phase = "Running" if stored[-1] == "Running" else "Succeeded"
    pods, services = replicas(owner, {"Master": [phase], "Worker": [phase, phase]})

    plan = run(owner, pods, services)

    assert plan.delete_job is deleted
    assert seconds(plan.requeue_after) == requeue
    if deleted:
        assert plan == Plan(
            delete_job=True, events=(Event(EventType.NORMAL, "SuccessfulDeletePod", "Deleted job: mnist"),)
        )


def test_the_pass_that_finishes_a_job_asks_to_be_woken_when_its_ttl_expires() -> None:
    owner = policy_job({"ttlSecondsAfterFinished": 300}, status=stored_status("Created", "Running"))

    plan = run(owner, replicas(owner, {"Master": ["Succeeded"], "Worker": ["Running", "Running"]})[0])

    assert plan.status is not None and plan.status.completion_time == NOW
    assert plan.delete_job is False
    assert seconds(plan.requeue_after) == 300.0


# -- suspend and resume ---------------------------------------------------------------------------------------


def test_suspending_a_running_job() -> None:
    owner = policy_job(
        {"suspend": True, "activeDeadlineSeconds": 10},
        status=stored_status("Created", "Running", replicaStatuses={"Worker": {"active": 2}}),
    )
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running", "Running"]})

    plan = run(owner, pods, services)

    names = ("mnist-master-0", "mnist-worker-0", "mnist-worker-1")
    assert set(plan.delete) == {ChildRef(kind, n) for n in names for kind in ("Pod", "Service")}
    assert conds(plan)[-2:] == [
        ("Running", "False", "PyTorchJobSuspended"),
        ("Suspended", "True", "PyTorchJobSuspended"),
    ]
    assert plan.status is not None
    assert plan.status.replica_statuses["Worker"].active == 0
    assert plan.events == (Event(EventType.NORMAL, "PyTorchJobSuspended", "PyTorchJob mnist is suspended."),)
    assert plan.requeue_after is None  # a suspended job's clock is stopped


def test_resuming_emits_resumed_and_starts_the_clock_again() -> None:
    owner = policy_job(
        {"suspend": False, "activeDeadlineSeconds": 600},
        status=stored_status("Created", "Running=False", "Suspended", start="2025-12-31T10:00:00Z"),
    )

    plan = run(owner)

    assert conds(plan)[-1] == ("Suspended", "False", "PyTorchJobResumed")
    assert plan.status is not None and plan.status.start_time == NOW
    assert plan.events == (Event(EventType.NORMAL, "PyTorchJobResumed", "PyTorchJob mnist is resumed."),)
    assert {o.name for o in plan.create if o.kind == "Pod"} == {"mnist-master-0", "mnist-worker-0", "mnist-worker-1"}
    assert seconds(plan.requeue_after) == 600.0


def with_suspend(world: World, suspend: bool) -> World:
    """``world`` after the user patched ``runPolicy.suspend``."""
    owner = job(1, 1, status=world.job.status.to_dict(), extra_spec={"runPolicy": {"suspend": suspend}})
    return World(owner, world.pods, world.services)


def test_suspend_and_resume_round_trip_converges() -> None:
    world = World(job(1, 1))
    world = apply(world, run_world(world), phase="Running")
    world = apply(world, run_world(world))
    assert world.job.status.conditions[-1].type == "Running"

    world = apply(with_suspend(world, True), run_world(with_suspend(world, True)))
    assert world.pods == () and world.services == ()
    assert run_world(world).empty

    later = NOW + timedelta(minutes=5)
    world = with_suspend(world, False)
    resumed = run_world(world, now=later)
    assert resumed.status is not None and resumed.status.start_time == later
    assert len(resumed.create) == 4
    world = apply(world, resumed, phase="Running")
    world = apply(world, run_world(world, now=later))
    assert [(c.type.value, c.status) for c in world.job.status.conditions][-2:] == [
        ("Suspended", "False"),
        ("Running", "True"),
    ]
    assert run_world(world, now=later).empty


# -- lastReconcileTime ------------------------------------------------------------------------------------------


def test_last_reconcile_time_is_stamped_only_when_the_status_is_written() -> None:
    world = World(job(1, 1))
    first = run_world(world)
    assert first.status is not None and first.status.last_reconcile_time == NOW
    world = apply(world, first, phase="Pending")

    later = NOW + timedelta(minutes=1)
    assert run_world(world, now=later).empty

    running = run_world(set_phase(world, "Running"), now=later)
    assert running.status is not None and running.status.last_reconcile_time == later


# -- SetPodTemplateRestartPolicy -----------------------------------------------------------------------------


@pytest.mark.parametrize(("template_policy", "warnings"), [("Always", 3), (None, 0)], ids=["template-sets-it", "unset"])
def test_a_template_restart_policy_is_overwritten_with_a_warning(template_policy: str | None, warnings: int) -> None:
    tmpl = template(spec={"restartPolicy": template_policy} if template_policy else None)
    owner = job(1, 2, tmpl=tmpl, status=stored_status("Created"))

    plan = run(owner)

    assert {p.spec.restart_policy for p in plan.create if p.kind == "Pod"} == {"OnFailure"}
    warning = Event(
        EventType.WARNING,
        "SetPodTemplateRestartPolicy",
        "Restart policy in pod template will be overwritten by restart policy in replica spec",
    )
    assert [e for e in plan.events if e.reason == "SetPodTemplateRestartPolicy"] == [warning] * warnings


# -- the condition transition table of the README --------------------------------------------------------------

TRANSITIONS = [
    # id, stored conditions, runPolicy, pods (Master, Workers), restartPolicy, conditions after the pass
    ("new→Created", None, {}, None, "OnFailure", [("Created", "True")]),
    ("new+suspend→Suspended", None, {"suspend": True}, None, "OnFailure", [("Created", "True"), ("Suspended", "True")]),
    (
        "Created→Running",
        ("Created",),
        {},
        ("Running", ["Pending"]),
        "OnFailure",
        [("Created", "True"), ("Running", "True")],
    ),
    (
        "Running→Restarting",
        ("Created", "Running"),
        {},
        ("Running", ["Failed"]),
        "OnFailure",
        [("Created", "True"), ("Restarting", "True")],
    ),
    (
        "Restarting→Running",
        ("Created", "Restarting"),
        {},
        ("Running", ["Running"]),
        "OnFailure",
        [("Created", "True"), ("Running", "True")],
    ),
    (
        "Running→Succeeded",
        ("Created", "Running"),
        {},
        ("Succeeded", ["Running"]),
        "OnFailure",
        [("Created", "True"), ("Running", "False"), ("Succeeded", "True")],
    ),
    (
        "Running→Failed",
        ("Created", "Running"),
        {},
        ("Running", ["Failed"]),
        "Never",
        [("Created", "True"), ("Running", "False"), ("Failed", "True")],
    ),
    (
        "Running→Failed(deadline)",
        ("Created", "Running"),
        {"activeDeadlineSeconds": 1},
        ("Running", ["Running"]),
        "OnFailure",
        [("Created", "True"), ("Running", "False"), ("Failed", "True")],
    ),
    (
        "Running→Suspended",
        ("Created", "Running"),
        {"suspend": True},
        ("Running", ["Running"]),
        "OnFailure",
        [("Created", "True"), ("Running", "False"), ("Suspended", "True")],
    ),
    (
        "Suspended→Resumed",
        ("Created", "Running=False", "Suspended"),
        {"suspend": False},
        None,
        "OnFailure",
        [("Created", "True"), ("Running", "False"), ("Suspended", "False")],
    ),
    (
        "Failed-is-terminal",
        ("Created", "Running=False", "Failed"),
        {},
        ("Running", ["Running"]),
        "OnFailure",
        [("Created", "True"), ("Running", "False"), ("Failed", "True")],
    ),
    (
        "Succeeded-stays",
        ("Created", "Running=False", "Succeeded"),
        {"suspend": True},
        ("Succeeded", ["Succeeded"]),
        "OnFailure",
        [("Created", "True"), ("Running", "False"), ("Succeeded", "True")],
    ),
]


@pytest.mark.parametrize(
    ("stored", "run_policy", "children", "restart", "after"),
    [t[1:] for t in TRANSITIONS],
    ids=[t[0] for t in TRANSITIONS],
)
def test_condition_transitions(
    stored: tuple[str, ...] | None,
    run_policy: dict[str, Any],
    children: tuple[str, list[str]] | None,
    restart: str,
    after: list[tuple[str, str]],
) -> None:
    status = None
    if stored is not None:
        finished = any(s in ("Succeeded", "Failed") for s in stored)
        status = stored_status(*stored, **({"completionTime": FINISHED} if finished else {}))
    owner = job(1, 1, restart=restart, status=status, extra_spec={"runPolicy": run_policy})
    pods: tuple[Any, ...] = ()
    if children is not None:
        master, workers = children
        pods, _ = replicas(owner, {"Master": [master], "Worker": workers})

    plan = run(owner, pods)

    final = plan.status if plan.status is not None else owner.status
    assert [(c.type.value, c.status) for c in final.conditions] == after


def test_stored_condition_helper_matches_what_the_reconciler_writes() -> None:
    # The transition table builds stored statuses with ``condition``; it must be what a pass writes.
    plan = run(job(1, 1, status=stored_status("Created")), replicas(job(1, 1), {"Master": ["Running"]})[0])
    assert plan.status is not None
    written = plan.status.conditions[-1].to_dict()
    expected = condition("Running", at="2026-01-01T00:00:00Z")
    assert written == expected
    assert parse_time(written["lastTransitionTime"]) == NOW
