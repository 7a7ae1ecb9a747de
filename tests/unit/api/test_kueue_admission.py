"""Kueue's queueing decision (``api.kueue.admission.decide``), pure: fit, order, cohorts, preemption."""

from __future__ import annotations

from typing import Any

from trainyard.api.kueue import admission
from trainyard.api.kueue.admission import Config, decide
from trainyard.api.kueue.workloads import amount, fmt, requests, workload_name


def cq(name: str, cpu: str, *, cohort: str = "", strategy: str = "BestEffortFIFO", **extra: Any) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": "cpu", "nominalQuota": cpu}
    for key in ("borrowingLimit", "lendingLimit"):
        if key in extra:
            quota[key] = extra.pop(key)
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": strategy,
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [quota]}]}],
        **extra,
    }
    if cohort:
        spec["cohort"] = cohort
    return {"metadata": {"name": name}, "spec": spec}


def lq(ns: str, name: str, cluster_queue: str) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name}, "spec": {"clusterQueue": cluster_queue}}


def wl(
    name: str,
    cpu: str,
    *,
    queue: str = "q",
    ns: str = "ns",
    priority: int = 0,
    created: str = "2026-12-01T00:00:00Z",
    count: int = 1,
    reserved_in: str = "",
    reserved_at: str = "2026-12-01T00:00:00Z",
    evicted: bool = False,
) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}
    obj: dict[str, Any] = {
        "metadata": {"namespace": ns, "name": name, "creationTimestamp": created, "uid": f"uid-{name}"},
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [{"name": "main", "count": count, "template": template}],
        },
    }
    if reserved_in:
        conditions = [
            {"type": "QuotaReserved", "status": "True", "lastTransitionTime": reserved_at},
            {"type": "Admitted", "status": "True"},
        ]
        if evicted:
            conditions.append({"type": "Evicted", "status": "True"})
        usage = fmt("cpu", amount(cpu) * count)
        obj["status"] = {
            "conditions": conditions,
            "admission": {
                "clusterQueue": reserved_in,
                "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": usage}}],
            },
        }
    return obj


def config(*queues: dict[str, Any], locals_: list[dict[str, Any]] | None = None) -> Config:
    local_queues = locals_ if locals_ is not None else [lq("ns", "q", queues[0]["metadata"]["name"])]
    return Config(
        cluster_queues={q["metadata"]["name"]: q for q in queues},
        local_queues={(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in local_queues},
        flavors=frozenset({"default"}),
    )


def admitted(decision: admission.Decision) -> list[str]:
    return [a.key[1] for a in decision.admit]


def waiting(decision: admission.Decision) -> dict[str, str]:
    return {w.key[1]: w.message for w in decision.waiting}


def test_a_workload_is_admitted_whole_or_not_at_all_and_says_what_it_lacks() -> None:
    decision = decide(
        config(cq("cq", "2")), [wl("big", "1", count=3), wl("small", "1", count=2, created="2026-12-01T00:00:01Z")]
    )
    assert admitted(decision) == ["small"]
    assert waiting(decision)["big"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed"
    )
    assert decision.admit[0].admission == {
        "clusterQueue": "cq",
        "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "2"}, "count": 2}
        ],
    }
    status = decision.cluster_queue_status["cq"]
    assert (status["pendingWorkloads"], status["reservingWorkloads"], status["admittedWorkloads"]) == (1, 1, 1)
    assert status["flavorsReservation"] == [
        {"name": "default", "resources": [{"name": "cpu", "total": "2", "borrowed": "0"}]}
    ]


def test_strict_fifo_blocks_behind_its_head_best_effort_lets_a_smaller_one_pass() -> None:
    loads = [wl("head", "3", created="2026-12-01T00:00:00Z"), wl("next", "1", created="2026-12-01T00:00:01Z")]
    assert admitted(decide(config(cq("cq", "2", strategy="StrictFIFO")), loads)) == []
    told = waiting(decide(config(cq("cq", "2", strategy="StrictFIFO")), loads))
    assert told["next"] == "Waiting behind workload ns/head in ClusterQueue cq (StrictFIFO)"
    assert admitted(decide(config(cq("cq", "2")), loads)) == ["next"]


def test_order_is_priority_then_age_and_positions_count_from_the_head() -> None:
    loads = [
        wl("old-low", "2", created="2026-12-01T00:00:00Z"),
        wl("new-high", "2", priority=10, created="2026-12-01T00:00:05Z"),
        wl("new-low", "2", created="2026-12-01T00:00:09Z"),
    ]
    decision = decide(config(cq("cq", "2", strategy="StrictFIFO")), loads)
    assert admitted(decision) == ["new-high"]
    positions = {w.key[1]: w.position for w in decision.waiting}
    assert positions == {"old-low": 2, "new-low": 3}


def test_missing_local_and_cluster_queues_are_named_in_kueues_words() -> None:
    decision = decide(
        config(cq("cq", "2"), locals_=[lq("ns", "orphan", "gone")]),
        [wl("a", "1", queue="nope"), wl("b", "1", queue="orphan")],
    )
    assert waiting(decision) == {"a": "LocalQueue nope doesn't exist", "b": "ClusterQueue gone doesn't exist"}
    assert decision.local_queue_status[("ns", "orphan")]["conditions"][0]["reason"] == "ClusterQueueDoesNotExist"


def test_a_cluster_queue_without_a_namespace_selector_admits_no_namespace() -> None:
    queue = cq("cq", "2")
    del queue["spec"]["namespaceSelector"]
    decision = decide(config(queue), [wl("a", "1")])
    assert waiting(decision) == {"a": "Workload namespace doesn't match ClusterQueue selector"}


def test_a_missing_flavor_makes_the_cluster_queue_inactive() -> None:
    conf = config(cq("cq", "2"))
    conf = Config(conf.cluster_queues, conf.local_queues, frozenset())
    decision = decide(conf, [wl("a", "1")])
    assert admitted(decision) == []
    active = decision.cluster_queue_status["cq"]["conditions"][0]
    assert (active["status"], active["reason"]) == ("False", "FlavorNotFound")


def test_cohorts_lend_unused_quota_within_borrowing_and_lending_limits() -> None:
    queues = (cq("a", "2", cohort="c"), cq("b", "2", cohort="c", lendingLimit="1"))
    locals_ = [lq("ns", "q", "a")]
    assert admitted(decide(config(*queues, locals_=locals_), [wl("w", "3")])) == ["w"]
    assert admitted(decide(config(*queues, locals_=locals_), [wl("w", "4")])) == []  # b lends only 1
    limited = (cq("a", "2", cohort="c", borrowingLimit="0"), cq("b", "2", cohort="c"))
    assert admitted(decide(config(*limited, locals_=locals_), [wl("w", "3")])) == []
    borrowed = decide(config(*queues, locals_=locals_), [wl("w", "3")]).cluster_queue_status["a"]
    assert borrowed["flavorsUsage"][0]["resources"][0] == {"name": "cpu", "total": "3", "borrowed": "1"}


def test_preemption_within_the_cluster_queue_takes_the_fewest_lowest_priority_victims() -> None:
    queue = cq("cq", "4", preemption={"withinClusterQueue": "LowerPriority"})
    running = [
        wl("low-old", "2", priority=1, reserved_in="cq", reserved_at="2026-12-01T00:00:00Z"),
        wl("low-new", "2", priority=1, reserved_in="cq", reserved_at="2026-12-01T00:01:00Z"),
    ]
    decision = decide(config(queue), [*running, wl("high", "2", priority=5)])
    assert [e.key[1] for e in decision.evict] == ["low-new"]  # the most recently admitted, and only one
    assert decision.evict[0].message.startswith("Preempted to accommodate a workload (UID: uid-high")
    assert decision.evict[0].preempted_reason == "InClusterQueue"
    assert waiting(decision)["high"] == "Pending the preemption of 1 workload(s)"
    # While the victim stops, its quota still counts: nothing is admitted and nothing more evicted.
    stopping = [running[0], wl("low-new", "2", priority=1, reserved_in="cq", evicted=True)]
    again = decide(config(queue), [*stopping, wl("high", "2", priority=5)])
    assert (admitted(again), again.evict) == ([], ())


def test_no_preemption_of_equal_or_higher_priority_or_under_never() -> None:
    running = [wl("peer", "4", priority=5, reserved_in="cq")]
    for policy in ("LowerPriority", "Never"):
        queue = cq("cq", "4", preemption={"withinClusterQueue": policy})
        assert decide(config(queue), [*running, wl("new", "2", priority=5)]).evict == ()


def test_reclaim_within_cohort_evicts_a_borrower_of_another_queue() -> None:
    queues = (cq("a", "2", cohort="c", preemption={"reclaimWithinCohort": "Any"}), cq("b", "2", cohort="c"))
    locals_ = [lq("ns", "qa", "a"), lq("ns", "qb", "b")]
    borrower = wl("borrower", "4", queue="qb", priority=100, reserved_in="b")
    decision = decide(config(*queues, locals_=locals_), [borrower, wl("mine", "2", queue="qa")])
    assert [(e.key[1], e.preempted_reason) for e in decision.evict] == [("borrower", "InCohortReclamation")]


def test_finished_workloads_hold_no_quota() -> None:
    done = wl("done", "2", reserved_in="cq")
    done["status"]["conditions"].append({"type": "Finished", "status": "True"})
    assert admitted(decide(config(cq("cq", "2")), [done, wl("next", "2")])) == ["next"]


def test_pod_requests_count_limits_for_missing_requests_and_the_largest_init_container() -> None:
    template = {
        "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "500m"}}},
                {"name": "b", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}],
        }
    }
    assert {k: fmt(k, v) for k, v in requests(template).items()} == {"cpu": "3", "memory": "1Gi"}


def test_workload_names_are_kueues_kind_name_and_hash() -> None:
    name = workload_name("train", "1234", "PyTorchJob", "kubeflow.org")
    prefix, _, digest = name.rpartition("-")
    assert prefix == "pytorchjob-train" and len(digest) == 5
    assert workload_name("train", "1234", "TFJob", "kubeflow.org") != name
    assert len(workload_name("x" * 300, "1", "Job", "batch")) == 253


def test_a_deactivated_admitted_workload_is_evicted_as_inactive() -> None:
    running = wl("paused", "2", reserved_in="cq")
    running["spec"]["active"] = False
    decision = decide(config(cq("cq", "2")), [running, wl("next", "2")])
    assert [(e.key[1], e.reason, e.message) for e in decision.evict] == [
        ("paused", "InactiveWorkload", "The workload is deactivated")
    ]
    assert admitted(decision) == []  # its quota counts until its job has stopped
