"""Restart rules as plain values: what is counted against backoffLimit, what is marked, deleted,
recreated, reported, and when a waiting pod gives the job a Pending condition.

The reference is kubeflow-v1 §6.3 and §7, with upstream #2045 fixed (every restart counts, for
every policy, in ``status.restartCount``), the opt-in whole-job restart (``runPolicy.restartScope:
Job``), ``ExitedWithCode`` once per exit, and #2001 (``Pending`` condition).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from job_builders import (
    DNS,
    NAME,
    NOW,
    PLUGIN,
    World,
    apply,
    job,
    pod,
    replicas,
    run,
    run_world,
    service,
    set_phase,
    stored_status,
)

from trainyard.api import Pod, PyTorchJob
from trainyard.controller import ChildRef, ControllerSettings, Plan
from trainyard.controller.restarts import failure_detail
from trainyard.kit.plans import Event, EventType

BACKOFF = f"Job {NAME} has failed because it has reached the specified backoff limit"


def with_status(p: Pod, **status: Any) -> Pod:
    """``p`` with its status replaced (phase kept unless given)."""
    body = p.to_dict()
    body["status"] = {"phase": p.phase.value, **status}
    return Pod.model_validate(body)


def main_status(
    *,
    restarts: int = 0,
    state: dict[str, Any] | None = None,
    last: dict[str, Any] | None = None,
    name: str = "pytorch",
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "restartCount": restarts, "state": state or {"running": {}}}
    if last is not None:
        out["lastState"] = last
    return out


def terminated(code: int) -> dict[str, Any]:
    return {"terminated": {"exitCode": code, "reason": "Error" if code else "Completed"}}


def ledger(*entries: tuple[str, str, int, int, bool | None]) -> list[dict[str, Any]]:
    """Ledger entries as (pod name, uid, restarts counted, exits reported, marked for re-creation)."""
    out = []
    for name, uid, restarts, exits, recreate in entries:
        entry: dict[str, Any] = {"name": name, "uid": uid, "restarts": restarts, "exits": exits}
        if recreate is not None:
            entry["recreate"] = recreate
        out.append(entry)
    return out


def owner_with(
    policy: str = "OnFailure",
    *,
    limit: int | None = None,
    count: int | None = None,
    book: list[dict[str, Any]] | None = None,
    scope: str | None = "Replica",
    conds: tuple[str, ...] = ("Created", "Running"),
    workers: int = 1,
) -> PyTorchJob:
    run_policy: dict[str, Any] = {}
    if limit is not None:
        run_policy["backoffLimit"] = limit
    if scope is not None:
        run_policy["restartScope"] = scope
    extra: dict[str, Any] = {}
    if count is not None:
        extra["restartCount"] = count
    if book is not None:
        extra["podLedger"] = book
    status = stored_status(*conds, **extra)
    return job(1, workers, restart=policy, status=status, extra_spec={"runPolicy": run_policy}, scope=None)


def all_services(owner: PyTorchJob, workers: int = 1) -> list[Any]:
    return [service(owner, "Master", 0), *(service(owner, "Worker", i) for i in range(workers))]


def book_of(plan: Plan) -> list[tuple[str, int, int, bool | None]]:
    assert plan.status is not None
    return [(e.name, e.restarts, e.exits, e.recreate) for e in plan.status.pod_ledger or []]


# -- what is counted, marked and deleted ---------------------------------------------------------------

# (id, replica policy, backoffLimit, stored count, stored ledger, worker-0 pod status fields,
#  expected count, expected ledger of worker-0 (restarts, exits, recreate) or None, expected delete)
COUNTING: list[tuple[Any, ...]] = [
    (
        "in-place-restarts-counted",
        "OnFailure",
        None,
        None,
        None,
        {"containerStatuses": [main_status(restarts=2, last=terminated(1))]},
        2,
        (2, 2, None),
        (),
    ),
    (
        "in-place-restarts-already-counted",
        "OnFailure",
        None,
        2,
        ledger(("mnist-worker-0", "pod-worker-0", 2, 2, None)),
        {"containerStatuses": [main_status(restarts=2, last=terminated(1))]},
        2,
        (2, 2, None),
        (),
    ),
    (
        "in-place-growth-counted-once",
        "OnFailure",
        None,
        2,
        ledger(("mnist-worker-0", "pod-worker-0", 2, 2, None)),
        {"containerStatuses": [main_status(restarts=3, last=terminated(1))]},
        3,
        (3, 3, None),
        (),
    ),
    (
        "init-container-restarts-count",
        "OnFailure",
        None,
        None,
        None,
        {"initContainerStatuses": [main_status(name="setup", restarts=1)], "containerStatuses": [main_status()]},
        1,
        (1, 0, None),
        (),
    ),
    (
        "in-place-restarts-of-a-never-replica-count-too",
        "Never",
        None,
        None,
        None,
        {"initContainerStatuses": [main_status(name="sidecar", restarts=1)], "containerStatuses": [main_status()]},
        1,
        (1, 0, None),
        (),
    ),
    (
        "exit-code-137-marked-not-deleted-yet",
        "ExitCode",
        None,
        None,
        None,
        {"phase": "Failed", "containerStatuses": [main_status(state=terminated(137))]},
        1,
        (0, 1, True),
        (),
    ),
    (
        "marked-pod-deleted-by-the-next-pass",
        "ExitCode",
        None,
        1,
        ledger(("mnist-worker-0", "pod-worker-0", 0, 1, True)),
        {"phase": "Failed", "containerStatuses": [main_status(state=terminated(137))]},
        1,
        (0, 1, True),
        ("mnist-worker-0",),
    ),
    (
        "on-failure-pod-failed-is-recreated",
        "OnFailure",
        None,
        None,
        None,
        {"phase": "Failed", "containerStatuses": [main_status(restarts=1, state=terminated(1))]},
        2,
        (1, 2, True),
        (),
    ),
    (
        "always-pod-failed-is-recreated",
        "Always",
        None,
        None,
        None,
        {"phase": "Failed"},
        1,
        (0, 0, True),
        (),
    ),
    (
        "exit-code-without-terminated-state-is-retryable",
        "ExitCode",
        None,
        None,
        None,
        {"phase": "Failed", "reason": "Evicted"},
        1,
        (0, 0, True),
        (),
    ),
    (
        "exit-code-permanent-is-not-a-restart",
        "ExitCode",
        None,
        None,
        None,
        {"phase": "Failed", "containerStatuses": [main_status(state=terminated(1))]},
        None,
        (0, 1, None),
        (),
    ),
    (
        "never-failure-is-not-a-restart",
        "Never",
        None,
        None,
        None,
        {"phase": "Failed", "containerStatuses": [main_status(state=terminated(1))]},
        None,
        (0, 1, None),
        (),
    ),
    (
        "within-the-limit",
        "ExitCode",
        2,
        1,
        None,
        {"phase": "Failed", "containerStatuses": [main_status(state=terminated(143))]},
        2,
        (0, 1, True),
        (),
    ),
]


@pytest.mark.parametrize(
    ("policy", "limit", "count", "book", "fields", "expected", "entry", "deleted"),
    [c[1:] for c in COUNTING],
    ids=[c[0] for c in COUNTING],
)
def test_restart_counting(
    policy: str,
    limit: int | None,
    count: int | None,
    book: list[dict[str, Any]] | None,
    fields: dict[str, Any],
    expected: int | None,
    entry: tuple[int, int, bool | None] | None,
    deleted: tuple[str, ...],
) -> None:
    owner = owner_with(policy, limit=limit, count=count, book=book)
    worker = with_status(pod(owner, "Worker", 0), **fields)
    pods = (pod(owner, "Master", 0), worker)

    plan = run(owner, pods, all_services(owner))

    status = plan.status if plan.status is not None else owner.status
    assert status.restart_count == expected
    assert [(e.restarts, e.exits, e.recreate) for e in status.pod_ledger or []] == ([entry] if entry else [])
    assert tuple(r.name for r in plan.delete if r.kind == "Pod") == deleted
    assert plan.create == ()


def test_marked_pod_being_deleted_is_left_to_finish() -> None:
    owner = owner_with("ExitCode", count=1, book=ledger(("mnist-worker-0", "pod-worker-0", 0, 1, True)))
    worker = with_status(
        pod(owner, "Worker", 0, deleting=True), phase="Failed", containerStatuses=[main_status(state=terminated(137))]
    )

    plan = run(owner, (pod(owner, "Master", 0), worker), all_services(owner))

    assert plan.delete == () and plan.create == ()
    status = plan.status if plan.status is not None else owner.status
    assert status.restart_count == 1
    assert [(e.uid, e.recreate) for e in status.pod_ledger or []] == [("pod-worker-0", True)]


def test_ledger_forgets_pods_that_are_gone_and_the_count_stays() -> None:
    owner = owner_with("ExitCode", count=1, book=ledger(("mnist-worker-0", "pod-worker-0", 0, 1, True)))

    plan = run(owner, (pod(owner, "Master", 0),), all_services(owner))

    assert plan.status is not None
    assert plan.status.restart_count == 1
    assert plan.status.pod_ledger == []
    assert [(o.kind, o.name) for o in plan.create] == [("Pod", "mnist-worker-0")]


def test_a_recreated_pod_with_the_same_name_starts_a_new_entry() -> None:
    owner = owner_with("OnFailure", count=3, book=ledger(("mnist-worker-0", "old-uid", 3, 3, None)))
    worker = with_status(pod(owner, "Worker", 0), containerStatuses=[main_status(restarts=1, last=terminated(1))])

    plan = run(owner, (pod(owner, "Master", 0), worker), all_services(owner))

    assert plan.status is not None
    assert plan.status.restart_count == 4
    assert [(e.uid, e.restarts) for e in plan.status.pod_ledger or []] == [("pod-worker-0", 1)]


# -- backoffLimit ----------------------------------------------------------------------------------------

# (id, replica policy, backoffLimit, stored count, failed workers (exit code) or in-place restarts of worker-0,
#  failed?, count afterwards)
BACKOFF_CASES: list[tuple[Any, ...]] = [
    ("limit-0-first-recreation-fails", "ExitCode", 0, None, {"failed": [137]}, True, None),
    ("limit-0-first-in-place-restart-fails", "OnFailure", 0, None, {"in_place": 1}, True, 1),
    ("limit-2-third-recreation-fails", "ExitCode", 2, 2, {"failed": [137]}, True, 2),
    ("limit-2-second-recreation-allowed", "ExitCode", 2, 1, {"failed": [137]}, False, 2),
    ("limit-2-in-place-to-2-allowed", "OnFailure", 2, None, {"in_place": 2}, False, 2),
    ("limit-2-in-place-to-3-fails", "OnFailure", 2, None, {"in_place": 3}, True, 3),
    ("limit-1-two-failures-at-once-fail", "ExitCode", 1, None, {"failed": [137, 137]}, True, None),
    ("always-recreation-counts", "Always", 1, 1, {"failed": [1]}, True, 1),
    ("on-failure-recreation-counts", "OnFailure", 1, 1, {"failed": [1]}, True, 1),
    ("no-limit-never-fails", "ExitCode", None, 50, {"failed": [137]}, False, 51),
    ("permanent-exit-is-not-a-restart", "ExitCode", 0, None, {"failed": [1]}, False, None),
]


@pytest.mark.parametrize(
    ("policy", "limit", "count", "what", "fails", "after"),
    [c[1:] for c in BACKOFF_CASES],
    ids=[c[0] for c in BACKOFF_CASES],
)
def test_backoff_limit(
    policy: str, limit: int | None, count: int | None, what: dict[str, Any], fails: bool, after: int | None
) -> None:
    failed: list[int] = what.get("failed", [])
    workers = max(1, len(failed))
    owner = owner_with(policy, limit=limit, count=count, workers=workers)
    pods = [pod(owner, "Master", 0)]
    for i in range(workers):
        p = pod(owner, "Worker", i)
        if failed:
            p = with_status(p, phase="Failed", containerStatuses=[main_status(state=terminated(failed[i]))])
        elif what.get("in_place"):
            p = with_status(p, containerStatuses=[main_status(restarts=what["in_place"], last=terminated(1))])
        pods.append(p)
    services = all_services(owner, workers)

    plan = run(owner, pods, services)

    assert plan.status is not None
    assert plan.status.restart_count == after
    last = plan.status.conditions[-1]
    if fails:
        assert (last.type, last.status, last.reason, last.message) == ("Failed", "True", "PyTorchJobFailed", BACKOFF)
        assert plan.status.completion_time == NOW
        # As upstream since v1.9.4 (#3420): cleanPodPolicy (default None) decides; Services always go.
        assert set(plan.delete) == {ChildRef("Service", s.name) for s in services}
        assert plan.create == ()
        assert Event(EventType.WARNING, "PyTorchJobFailed", BACKOFF) in plan.events
    else:
        assert last.message != BACKOFF
        assert all(r.kind == "Pod" for r in plan.delete)


def test_backoff_failure_then_only_cleans_up() -> None:
    owner = owner_with("ExitCode", limit=0)
    worker = with_status(
        pod(owner, "Worker", 0), phase="Failed", containerStatuses=[main_status(state=terminated(137))]
    )
    world = World(owner, (pod(owner, "Master", 0), worker), tuple(all_services(owner)))

    world = apply(world, run_world(world))

    assert [p.name for p in world.pods] == ["mnist-master-0", "mnist-worker-0"] and world.services == ()
    assert run_world(world).empty


# (id, cleanPodPolicy, pods deleted when the backoff limit fails the job)
BACKOFF_CLEANUP = [
    ("none-keeps-every-pod", "None", set()),
    ("running-stops-the-running-keeps-the-failed", "Running", {"mnist-master-0", "mnist-worker-1"}),
    ("all-deletes-every-pod", "All", {"mnist-master-0", "mnist-worker-0", "mnist-worker-1"}),
]


@pytest.mark.parametrize(("clean", "deleted"), [c[1:] for c in BACKOFF_CLEANUP], ids=[c[0] for c in BACKOFF_CLEANUP])
@pytest.mark.parametrize("scope", [None, "Replica"], ids=["gang", "replica"])
def test_backoff_failure_respects_clean_pod_policy(scope: str | None, clean: str, deleted: set[str]) -> None:
    owner = job(1, 2, clean=clean, scope=scope, extra_spec={"runPolicy": {"backoffLimit": 0}})
    owner = owner.model_copy(update={"status": owner.status.model_validate(stored_status("Created", "Running"))})
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Failed", "Running"]})

    plan = run(owner, pods, services)

    assert plan.status is not None and plan.status.conditions[-1].message == BACKOFF
    assert {r.name for r in plan.delete if r.kind == "Pod"} == deleted
    assert {r.name for r in plan.delete if r.kind == "Service"} == {s.name for s in services}


# -- crash safety: an operator killed between writes neither loses nor doubles a restart ---------------


def lose_status(plan: Plan) -> Plan:
    """The plan as far as an operator killed just before its status write got with it."""
    return Plan(allocate_ports=plan.allocate_ports, delete=plan.delete, create=plan.create)


@pytest.mark.parametrize("crash_at", [None, 0, 1, 2, 3], ids=["no-crash", "pass-0", "pass-1", "pass-2", "pass-3"])
def test_one_failure_counts_once_wherever_the_operator_dies(crash_at: int | None) -> None:
    world = World(owner_with("ExitCode"), (), ())
    world = apply(world, run_world(world), phase="Running")
    world = set_phase(world, "Failed", "mnist-worker-0")

    for step in range(8):
        plan = run_world(world)
        if plan.empty:
            break
        world = apply(world, lose_status(plan) if step == crash_at else plan, phase="Running")
    else:
        raise AssertionError("did not converge")

    assert world.job.status.restart_count == 1
    assert sorted(p.name for p in world.pods) == ["mnist-master-0", "mnist-worker-0"]
    assert all(p.phase.value == "Running" for p in world.pods)
    assert world.job.status.pod_ledger == []


# -- whole-job restart (runPolicy.restartScope: Job) -------------------------------------------------------


def whole(
    *, limit: int | None = None, count: int | None = None, book: list[dict[str, Any]] | None = None
) -> PyTorchJob:
    return owner_with("OnFailure", limit=limit, count=count, book=book, scope="Job", workers=2)


def test_whole_job_restart_marks_every_pod_and_counts_once() -> None:
    owner = whole()
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Failed", "Failed"]})

    plan = run(owner, pods, services)

    assert plan.status is not None
    assert plan.status.restart_count == 1
    assert [(name, recreate) for name, _, _, recreate in book_of(plan)] == [
        ("mnist-master-0", True),
        ("mnist-worker-0", True),
        ("mnist-worker-1", True),
    ]
    assert plan.delete == () and plan.create == ()
    last = plan.status.conditions[-1]
    assert (last.type, last.status, last.reason) == ("Restarting", "True", "PyTorchJobRestarting")
    assert last.message == (
        "PyTorchJob mnist is restarting all replicas because 2 Worker replica(s) failed"
        " (Worker 0 (pod mnist-worker-0) failed)."
    )
    assert [c.type for c in plan.status.conditions].count("Running") == 0
    assert (
        Event(
            EventType.WARNING,
            "RestartingAllReplicas",
            "Restarting every replica of PyTorchJob mnist together (restart 1): "
            "Worker 0 (pod mnist-worker-0) failed; Worker 1 (pod mnist-worker-1) failed",
        )
        in plan.events
    )


def test_whole_job_restart_converges_to_a_new_generation() -> None:
    world = World(whole())
    world = apply(world, run_world(world), phase="Running")
    assert all(p.spec.restart_policy == "Never" for p in world.pods)
    world = apply(world, run_world(world))
    first = {p.name: p.metadata.uid for p in world.pods}
    world = set_phase(world, "Failed", "mnist-worker-1")

    world = apply(world, run_world(world))  # counted and marked
    deleting = run_world(world)
    assert {r.name for r in deleting.delete} == set(first)
    assert deleting.create == ()

    # One old pod lingers (terminating): nothing new starts beside it.
    remaining = tuple(p for p in world.pods if p.name == "mnist-master-0")
    world = World(
        world.job,
        tuple(
            Pod.model_validate(
                {**p.to_dict(), "metadata": {**p.to_dict()["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
            )
            for p in remaining
        ),
        world.services,
    )
    held = run_world(world)
    assert not any(isinstance(o, Pod) for o in held.create)
    assert held.delete == ()

    world = World(world.job, (), world.services)
    recreating = run_world(world)
    assert sorted(o.name for o in recreating.create if isinstance(o, Pod)) == sorted(first)
    assert all(o.spec.restart_policy == "Never" for o in recreating.create if isinstance(o, Pod))
    world = apply(world, recreating, phase="Running")
    world = apply(world, run_world(world))
    assert {p.name: p.metadata.uid for p in world.pods}.keys() == first.keys()
    assert all(p.metadata.uid != first[p.name] for p in world.pods)
    assert world.job.status.restart_count == 1
    assert world.job.status.conditions[-1].type == "Running"
    assert run_world(world).empty


def test_whole_job_restart_is_triggered_by_an_in_place_restart() -> None:
    owner = owner_with("Always", scope="Job", workers=1)
    worker = with_status(pod(owner, "Worker", 0), containerStatuses=[main_status(restarts=1, last=terminated(0))])

    plan = run(owner, (pod(owner, "Master", 0), worker), all_services(owner))

    assert plan.status is not None
    assert plan.status.restart_count == 1
    assert all(recreate for *_, recreate in book_of(plan))
    last = plan.status.conditions[-1]
    assert (last.type, last.status) == ("Restarting", "True")
    assert last.message == (
        "PyTorchJob mnist is restarting all replicas because 1 Worker replica(s) failed"
        " (Worker 0 (pod mnist-worker-0) exited with code 0 (Completed))."
    )


def test_whole_job_restart_beyond_the_limit_fails() -> None:
    owner = whole(limit=1, count=1)
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running", "Failed"]})

    plan = run(owner, pods, services)

    assert plan.status is not None
    assert plan.status.conditions[-1].message == BACKOFF
    assert plan.status.restart_count == 1
    # cleanPodPolicy None (the default): the failed pod and its logs stay; nothing is restarted.
    assert {r.name for r in plan.delete if r.kind == "Pod"} == set()
    assert plan.create == ()


# -- the default: a static world restarts as a gang, an elastic one per pod ---------------------------------


def default_scope(*, elastic: bool, workers: int = 2) -> PyTorchJob:
    spec: dict[str, Any] = {"runPolicy": {"backoffLimit": 3}}
    if elastic:
        spec["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d"}
    return job(0 if elastic else 1, workers, scope=None, extra_spec=spec, status=stored_status("Created", "Running"))


def failed_worker(owner: PyTorchJob, index: int, code: int) -> Pod:
    state = {"terminated": {"exitCode": code, "reason": "OOMKilled" if code == 137 else "Error"}}
    return with_status(pod(owner, "Worker", index), phase="Failed", containerStatuses=[main_status(state=state)])


def test_a_static_world_restarts_every_replica_by_default() -> None:
    owner = default_scope(elastic=False)
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running"]})
    pods = (*pods, failed_worker(owner, 1, 137))

    plan = run(owner, pods, (*services, service(owner, "Worker", 1)))

    assert plan.status is not None and plan.status.restart_count == 1
    assert all(recreate for *_, recreate in book_of(plan))
    assert plan.status.conditions[-1].message == (
        "PyTorchJob mnist is restarting all replicas because 1 Worker replica(s) failed"
        " (Worker 1 (pod mnist-worker-1) exited with code 137 (OOMKilled))."
    )
    assert (
        Event(
            EventType.WARNING,
            "RestartingAllReplicas",
            "Restarting every replica of PyTorchJob mnist together (restart 1 of backoffLimit 3): "
            "Worker 1 (pod mnist-worker-1) exited with code 137 (OOMKilled)",
        )
        in plan.events
    )


def test_a_static_world_converges_to_a_new_generation_that_succeeds() -> None:
    world = World(default_scope(elastic=False, workers=1))
    world = apply(world, run_world(world), phase="Running")
    first = {p.name: p.metadata.uid for p in world.pods}
    world = set_phase(world, "Failed", "mnist-worker-0")

    for _ in range(6):
        plan = run_world(world)
        if plan.empty:
            break
        world = apply(world, plan, phase="Running")

    assert {p.name for p in world.pods} == set(first)
    assert all(p.metadata.uid != first[p.name] for p in world.pods)
    assert world.job.status.restart_count == 1
    assert world.job.status.conditions[-1].type == "Running"
    done = run_world(set_phase(world, "Succeeded", "mnist-master-0")).status
    assert done is not None and done.conditions[-1].type == "Succeeded"


def test_an_elastic_world_restarts_only_the_failed_pod_by_default() -> None:
    owner = default_scope(elastic=True, workers=3)
    pods, services = replicas(owner, {"Worker": ["Running", "Running"]})
    pods = (*pods, failed_worker(owner, 2, 1))

    plan = run(owner, pods, (*services, service(owner, "Worker", 2)))

    assert plan.status is not None and plan.status.restart_count == 1
    assert [(name, recreate) for name, _, _, recreate in book_of(plan)] == [("mnist-worker-2", True)]
    assert all(e.reason != "RestartingAllReplicas" for e in plan.events)
    workers = [o for o in run(owner).create if isinstance(o, Pod) and "-worker-" in o.name]
    assert workers and {o.spec.restart_policy for o in workers} == {"OnFailure"}


@pytest.mark.parametrize(
    ("status", "detail"),
    [
        (
            {"phase": "Failed", "containerStatuses": [main_status(state=terminated(2))]},
            "Worker 0 (pod mnist-worker-0) exited with code 2 (Error)",
        ),
        (
            {"phase": "Running", "containerStatuses": [main_status(restarts=1, last=terminated(1))]},
            "Worker 0 (pod mnist-worker-0) exited with code 1 (Error)",
        ),
        (
            {"phase": "Failed", "reason": "Evicted", "message": "The node was low on memory."},
            "Worker 0 (pod mnist-worker-0) failed: Evicted (The node was low on memory.)",
        ),
        ({"phase": "Failed"}, "Worker 0 (pod mnist-worker-0) failed"),
    ],
    ids=["terminated", "restarted-in-place", "evicted", "nothing-known"],
)
def test_failure_detail_names_the_replica_its_exit_code_and_reason(status: dict[str, Any], detail: str) -> None:
    owner = job(1, 1)
    body = pod(owner, "Worker", 0).to_dict()
    body["status"] = status

    assert failure_detail(Pod.model_validate(body), PLUGIN) == detail


POD_POLICIES = [
    # id, scope, replica restartPolicy, pod restartPolicy
    ("default-static-world-on-failure", None, "OnFailure", "Never"),
    ("default-static-world-exit-code", None, "ExitCode", "Never"),
    ("job-scope-on-failure", "Job", "OnFailure", "Never"),
    ("job-scope-always", "Job", "Always", "Always"),
    ("job-scope-exit-code", "Job", "ExitCode", "Never"),
    ("job-scope-never", "Job", "Never", "Never"),
    ("explicit-replica-scope", "Replica", "OnFailure", "OnFailure"),
]


@pytest.mark.parametrize(
    ("scope", "policy", "pod_policy"), [c[1:] for c in POD_POLICIES], ids=[c[0] for c in POD_POLICIES]
)
def test_pod_restart_policy_under_each_scope(scope: str | None, policy: str, pod_policy: str) -> None:
    owner = owner_with(policy, scope=scope, conds=())

    plan = run(owner)

    assert {o.spec.restart_policy for o in plan.create if isinstance(o, Pod)} == {pod_policy}


# -- ExitedWithCode: once per exit ------------------------------------------------------------------------

# (id, default container status, stored exits, expected event codes, exits afterwards)
EXITS: list[tuple[Any, ...]] = [
    ("terminated-first-time", main_status(state=terminated(0)), 0, [0], 1),
    ("terminated-already-reported", main_status(state=terminated(0)), 1, [], 1),
    (
        "crash-loop-back-off-reports-the-pending-exit",
        main_status(state={"waiting": {"reason": "CrashLoopBackOff"}}, last=terminated(2)),
        0,
        [2],
        1,
    ),
    ("restarted-after-the-reported-exit", main_status(restarts=1, last=terminated(2)), 1, [], 1),
    ("several-exits-since-last-look-report-the-latest", main_status(restarts=3, last=terminated(137)), 1, [137], 3),
    ("running-never-exited", main_status(), 0, [], 0),
    ("waiting-to-start", main_status(state={"waiting": {"reason": "ContainerCreating"}}), 0, [], 0),
]


@pytest.mark.parametrize(("container", "reported", "codes", "exits"), [c[1:] for c in EXITS], ids=[c[0] for c in EXITS])
def test_exited_with_code_once_per_exit(container: dict[str, Any], reported: int, codes: list[int], exits: int) -> None:
    book = ledger(("mnist-worker-0", "pod-worker-0", container["restartCount"], reported, None)) if reported else None
    owner = owner_with("OnFailure", count=container["restartCount"] if reported else None, book=book)
    worker = with_status(pod(owner, "Worker", 0), containerStatuses=[container])

    plan = run(owner, (pod(owner, "Master", 0), worker), all_services(owner))

    assert [e for e in plan.events if e.reason == "ExitedWithCode"] == [
        Event(EventType.NORMAL, "ExitedWithCode", f"Pod: team-a.mnist-worker-0 exited with code {c}") for c in codes
    ]
    status = plan.status if plan.status is not None else owner.status
    assert [e.exits for e in status.pod_ledger or []] == ([exits] if exits else [])


def test_exits_of_other_containers_are_not_reported() -> None:
    owner = owner_with("OnFailure")
    worker = with_status(
        pod(owner, "Worker", 0), containerStatuses=[main_status(), main_status(name="sidecar", state=terminated(3))]
    )

    plan = run(owner, (pod(owner, "Master", 0), worker), all_services(owner))

    assert not [e for e in plan.events if e.reason == "ExitedWithCode"]


def test_the_same_exit_is_reported_once_across_passes() -> None:
    owner = owner_with("Never")
    pods = (
        pod(owner, "Master", 0),
        with_status(pod(owner, "Worker", 0), phase="Succeeded", containerStatuses=[main_status(state=terminated(0))]),
    )
    world = World(owner, pods, tuple(all_services(owner)))

    first = run_world(world)
    world = apply(world, first)
    second = run_world(world)

    assert [e.reason for e in first.events].count("ExitedWithCode") == 1
    assert [e.reason for e in second.events].count("ExitedWithCode") == 0


# -- Pending too long (upstream #2001) -----------------------------------------------------------------------

TIMEOUT = timedelta(minutes=5)
PENDING_SETTINGS = ControllerSettings(network_mode=DNS.network_mode, pending_timeout=TIMEOUT)


def pending_pod(owner: PyTorchJob, age: timedelta, **status: Any) -> Pod:
    body = pod(owner, "Worker", 0, phase="Pending").to_dict()
    body["metadata"]["creationTimestamp"] = (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ")
    body["status"] = {"phase": "Pending", **status}
    return Pod.model_validate(body)


UNSCHEDULABLE = {
    "conditions": [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient cpu.",
        }
    ]
}


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    return {"containerStatuses": [main_status(state={"waiting": {"reason": reason, "message": message}})]}


# (id, pod status, expected reason, expected message detail)
PENDING_REASONS: list[tuple[Any, ...]] = [
    ("unschedulable", UNSCHEDULABLE, "Unschedulable", "Unschedulable: 0/1 nodes are available: 1 Insufficient cpu."),
    (
        "image-pull-back-off",
        waiting("ImagePullBackOff", 'Back-off pulling image "nope"'),
        "ImagePullBackOff",
        'ImagePullBackOff: Back-off pulling image "nope"',
    ),
    ("err-image-pull", waiting("ErrImagePull"), "ErrImagePull", "(ErrImagePull)"),
    (
        "config-error",
        waiting("CreateContainerConfigError", 'configmap "cfg" not found'),
        "CreateContainerConfigError",
        'configmap "cfg" not found',
    ),
    ("just-slow", waiting("ContainerCreating"), "ContainerCreating", "(ContainerCreating)"),
    ("nothing-reported", {}, "Pending", "(Pending)"),
]


@pytest.mark.parametrize(
    ("fields", "reason", "detail"), [c[1:] for c in PENDING_REASONS], ids=[c[0] for c in PENDING_REASONS]
)
def test_pending_too_long_names_the_reason(fields: dict[str, Any], reason: str, detail: str) -> None:
    owner = owner_with("OnFailure")
    pods = (pod(owner, "Master", 0), pending_pod(owner, TIMEOUT + timedelta(seconds=1), **fields))

    plan = run(owner, pods, all_services(owner), settings=PENDING_SETTINGS)

    assert plan.status is not None
    last = plan.status.conditions[-1]
    assert (last.type, last.status, last.reason) == ("Pending", "True", reason)
    assert last.message is not None
    assert last.message.startswith("PyTorchJob mnist: pod mnist-worker-0 has been pending for more than 300s")
    assert detail in last.message
    assert Event(EventType.WARNING, reason, last.message) in plan.events


def test_pending_not_yet_late_asks_to_look_again_when_it_would_be() -> None:
    owner = owner_with("OnFailure")
    pods = (pod(owner, "Master", 0), pending_pod(owner, timedelta(minutes=2), **UNSCHEDULABLE))

    plan = run(owner, pods, all_services(owner), settings=PENDING_SETTINGS)

    assert plan.status is not None
    assert [c.type for c in plan.status.conditions] == ["Created", "Running"]
    assert plan.requeue_after == timedelta(minutes=3)


def test_pending_check_can_be_turned_off() -> None:
    owner = owner_with("OnFailure")
    pods = (pod(owner, "Master", 0), pending_pod(owner, timedelta(days=1), **UNSCHEDULABLE))

    plan = run(owner, pods, all_services(owner), settings=ControllerSettings(pending_timeout=None))

    assert plan.status is not None
    assert [c.type for c in plan.status.conditions] == ["Created", "Running"]
    assert plan.requeue_after is None


def stored_pending(reason: str = "Unschedulable", *, last: bool = False) -> dict[str, Any]:
    cond = {
        "type": "Pending",
        "status": "True",
        "reason": reason,
        "message": "PyTorchJob mnist: pod mnist-worker-0 has been pending for more than 300s (Unschedulable)",
        "lastUpdateTime": "2025-12-31T23:59:40Z",
        "lastTransitionTime": "2025-12-31T23:59:40Z",
    }
    status = stored_status("Created", "Running")
    status["conditions"].insert(len(status["conditions"]) if last else 1, cond)
    return status


@pytest.mark.parametrize("last", [False, True], ids=["before-running", "last"])
def test_pending_flips_to_false_once_the_pod_runs_and_is_never_the_state(last: bool) -> None:
    owner = job(1, 1, status=stored_pending(last=last))
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running"]})

    plan = run(owner, pods, services, settings=PENDING_SETTINGS)

    assert plan.status is not None
    assert [(c.type, c.status) for c in plan.status.conditions] == [
        ("Created", "True"),
        ("Pending", "False"),
        ("Running", "True"),
    ]
    assert plan.status.conditions[1].last_transition_time == NOW


def test_pending_reason_change_updates_the_condition_and_keeps_its_transition_time() -> None:
    owner = job(1, 1, status=stored_pending())
    late = pending_pod(owner, TIMEOUT * 2, **waiting("CreateContainerConfigError"))

    plan = run(
        owner,
        (pod(owner, "Master", 0), late),
        [service(owner, "Master", 0), service(owner, "Worker", 0)],
        settings=PENDING_SETTINGS,
    )

    assert plan.status is not None
    last = plan.status.conditions[-1]
    assert (last.type, last.reason) == ("Pending", "CreateContainerConfigError")
    assert last.last_transition_time is not None and last.last_transition_time.isoformat().startswith(
        "2025-12-31T23:59:40"
    )


def test_pending_same_reason_writes_nothing() -> None:
    owner = job(1, 1, status=stored_pending())
    late = pending_pod(owner, TIMEOUT * 2, **UNSCHEDULABLE)

    plan = run(
        owner,
        (pod(owner, "Master", 0), late),
        [service(owner, "Master", 0), service(owner, "Worker", 0)],
        settings=PENDING_SETTINGS,
    )

    assert plan.status is not None
    assert plan.status.conditions == owner.status.conditions


def test_pending_is_cleared_when_the_job_finishes() -> None:
    owner = job(1, 1, status=stored_pending())
    late = pending_pod(owner, TIMEOUT * 2, **UNSCHEDULABLE)
    master = with_status(pod(owner, "Master", 0), phase="Succeeded")

    plan = run(
        owner, (master, late), [service(owner, "Master", 0), service(owner, "Worker", 0)], settings=PENDING_SETTINGS
    )

    assert plan.status is not None
    states = {c.type.value: c.status for c in plan.status.conditions}
    assert states["Succeeded"] == "True" and states["Pending"] == "False"


def test_pod_being_deleted_is_not_pending() -> None:
    owner = owner_with("OnFailure")
    body = pending_pod(owner, TIMEOUT * 2, **UNSCHEDULABLE).to_dict()
    body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"

    plan = run(
        owner, (pod(owner, "Master", 0), Pod.model_validate(body)), all_services(owner), settings=PENDING_SETTINGS
    )

    assert plan.status is None or all(c.type != "Pending" for c in plan.status.conditions)


# -- preemption (the scheduler's DisruptionTarget) ------------------------------------------------------


def preempted(p: Pod) -> Pod:
    body = p.to_dict()
    body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "default-scheduler: preempting to accommodate a higher priority pod",
    }
    body["status"] = {"phase": "Running", "conditions": [condition]}
    return Pod.model_validate(body)


def test_a_preempted_static_world_restarts_whole_uncounted_and_says_so() -> None:
    owner = owner_with("OnFailure", limit=0, scope=None)  # a static world: whole-gang restarts
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running"]})
    pods = [preempted(p) if p.name == "mnist-worker-0" else p for p in pods]

    plan = run(owner, pods, services)

    assert plan.status is not None
    assert not plan.status.restart_count  # backoffLimit 0, and the job does not fail
    assert [r.name for r in plan.delete] == ["mnist-master-0"]  # the rest of the gang goes too
    assert not [c for c in plan.create if isinstance(c, Pod)]  # nothing new beside a terminating pod
    last = plan.status.conditions[-1]
    message = (
        "PyTorchJob mnist is restarting all replicas because pod(s) mnist-worker-0 were preempted "
        "(default-scheduler: preempting to accommodate a higher priority pod); not counted against backoffLimit."
    )
    assert (last.type, last.status, last.message) == ("Restarting", "True", message)
    assert Event(EventType.WARNING, "Preempted", message) in plan.events


def test_a_pod_the_cluster_ended_names_its_node_and_why() -> None:
    owner = default_scope(elastic=False)
    said = "Pod was terminated in response to imminent node shutdown."
    body = with_status(
        pod(owner, "Worker", 1),
        phase="Failed",
        reason="Terminated",
        message=said,
        containerStatuses=[main_status(state={"terminated": {"exitCode": 143, "reason": "Error"}})],
        conditions=[{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet", "message": said}],
    ).to_dict()
    body["spec"]["nodeName"] = "spot-2"
    assert failure_detail(Pod.model_validate(body), PLUGIN) == (
        f"Worker 1 (pod mnist-worker-1) on node spot-2 exited with code 143 (Error): TerminationByKubelet: {said}"
    )
    # A plain failure stays as it was: where it ran does not explain it.
    assert (
        failure_detail(failed_worker(owner, 1, 1), PLUGIN) == "Worker 1 (pod mnist-worker-1) exited with code 1 (Error)"
    )
