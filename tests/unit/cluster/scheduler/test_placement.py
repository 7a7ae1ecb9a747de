"""The pure scheduling decision: requests, filters in kube-scheduler's words, order, gangs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from trainyard.cluster.clients.scheduler import snapshot
from trainyard.cluster.clients.scheduler.filters import fit_error, place
from trainyard.cluster.clients.scheduler.placement import Group, schedule
from trainyard.cluster.clients.scheduler.snapshot import (
    COSCHEDULING,
    VOLCANO_GROUP,
    NodeInfo,
    PodInfo,
    Usage,
    pod_info,
    pod_requests,
)

NODE = NodeInfo("box", {"cpu": 4000, "memory": 8 * 2**30, "pods": 110, "nvidia.com/gpu": 0}, {"zone": "a"})
INSUFFICIENT_GPU = (
    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
    "1 No preemption victims found for incoming pod.."
)


def manifest(name: str = "p", *, cpu: str | None = None, created: str = "2026-01-01T00:00:00Z", **spec: Any) -> dict:
    resources = {"requests": {"cpu": cpu}} if cpu else {}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": created},
        "spec": {"containers": [{"name": "c", "resources": resources}], **spec},
        "status": {"phase": "Pending"},
    }


def pod(name: str = "p", **kw: Any) -> PodInfo:
    return pod_info(manifest(name, **kw))


def member(name: str, group: str, flavour: str = COSCHEDULING, **kw: Any) -> PodInfo:
    return replace(pod(name, **kw), group=(flavour, "ns", group))


def used(**per_node: Usage) -> dict[str, Usage]:
    return {"box": Usage(), **per_node}


# -- requests ----------------------------------------------------------------------------------------


def container(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **kw: Any) -> dict:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **kw}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"containers": [container({"cpu": "500m"}), container({"cpu": "1"})]}, {"cpu": 1500}, id="sum"),
        pytest.param({"containers": [container(limits={"nvidia.com/gpu": "2"})]}, {"nvidia.com/gpu": 2}, id="limit"),
        pytest.param(
            {"containers": [container({"cpu": "1"})], "initContainers": [container({"cpu": "3", "memory": "1Gi"})]},
            {"cpu": 3000, "memory": 2**30},
            id="init-max",
        ),
        pytest.param(
            {
                "containers": [container({"cpu": "1"})],
                "initContainers": [container({"cpu": "1"}, restartPolicy="Always"), container({"cpu": "2"})],
            },
            {"cpu": 3000},
            id="sidecar-adds-to-both",
        ),
        pytest.param({"containers": [container()], "overhead": {"cpu": "250m"}}, {"cpu": 250}, id="overhead"),
        pytest.param({"containers": [container({"cpu": "lots"})]}, {}, id="malformed-ignored"),
    ],
)
def test_pod_requests_follow_kube(spec: dict, expected: dict) -> None:
    assert pod_requests(spec) == expected


# -- filters and their words -------------------------------------------------------------------------


def verdict(p: PodInfo, node: NodeInfo = NODE, use: Usage | None = None) -> str | None:
    target, failures = place(p, [node], {node.name: use or Usage()})
    return None if target else fit_error(p, failures, 1)


def test_insufficient_gpu_is_worded_like_kube_scheduler() -> None:
    gpu = pod_info({**manifest(), "spec": {"containers": [container(limits={"nvidia.com/gpu": "1"})]}})
    assert verdict(gpu) == INSUFFICIENT_GPU


def test_every_short_resource_is_named_and_pods_are_counted() -> None:
    big = pod_info({**manifest(), "spec": {"containers": [container({"cpu": "5", "memory": "9Gi"})]}})
    message = verdict(big, use=Usage({}, 110))
    assert message is not None
    assert message.startswith("0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Too many pods.")


def test_resources_already_requested_count() -> None:
    assert verdict(pod(cpu="2")) is None
    assert verdict(pod(cpu="2"), use=Usage({"cpu": 2500}, 1)) is not None


@pytest.mark.parametrize(
    ("spec", "fits"),
    [
        pytest.param({"nodeSelector": {"zone": "a"}}, True, id="selector-match"),
        pytest.param({"nodeSelector": {"zone": "b"}}, False, id="selector-mismatch"),
        pytest.param({"affinity": {"nodeAffinity": {}}}, True, id="no-required-terms"),
    ],
)
def test_node_selector(spec: dict, fits: bool) -> None:
    message = verdict(pod(**spec))
    assert (message is None) == fits
    if not fits:
        assert message is not None
        assert "1 node(s) didn't match Pod's node affinity/selector." in message
        assert "1 Preemption is not helpful for scheduling.." in message


def required(*terms: dict) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expr(key: str, operator: str, *values: str) -> dict:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


LABELLED = NodeInfo("box", NODE.allocatable, {"zone": "a", "gpus": "4"})


@pytest.mark.parametrize(
    ("terms", "fits"),
    [
        pytest.param([{"matchExpressions": [expr("zone", "In", "a", "b")]}], True, id="in"),
        pytest.param([{"matchExpressions": [expr("zone", "NotIn", "a")]}], False, id="notin"),
        pytest.param([{"matchExpressions": [expr("missing", "NotIn", "a")]}], True, id="notin-absent"),
        pytest.param([{"matchExpressions": [expr("zone", "Exists")]}], True, id="exists"),
        pytest.param([{"matchExpressions": [expr("zone", "DoesNotExist")]}], False, id="doesnotexist"),
        pytest.param([{"matchExpressions": [expr("gpus", "Gt", "3")]}], True, id="gt"),
        pytest.param([{"matchExpressions": [expr("gpus", "Lt", "4")]}], False, id="lt"),
        pytest.param([{"matchExpressions": [expr("zone", "Gt", "3")]}], False, id="gt-not-a-number"),
        pytest.param([{"matchFields": [expr("metadata.name", "In", "box")]}], True, id="field-name"),
        pytest.param([{"matchFields": [expr("metadata.name", "In", "other")]}], False, id="field-other"),
        pytest.param(
            [{"matchExpressions": [expr("zone", "In", "b")]}, {"matchExpressions": [expr("zone", "In", "a")]}],
            True,
            id="terms-are-ored",
        ),
        pytest.param(
            [{"matchExpressions": [expr("zone", "In", "a"), expr("gpus", "In", "8")]}], False, id="exprs-are-anded"
        ),
        pytest.param([{}], False, id="empty-term-matches-nothing"),
    ],
)
def test_required_node_affinity(terms: list, fits: bool) -> None:
    assert (verdict(pod(affinity=required(*terms)), LABELLED) is None) == fits


TAINTED = NodeInfo("box", NODE.allocatable, taints=({"key": "dedicated", "value": "ml", "effect": "NoSchedule"},))


@pytest.mark.parametrize(
    ("tolerations", "fits"),
    [
        pytest.param([], False, id="none"),
        pytest.param([{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}], True, id="equal"),
        pytest.param([{"key": "dedicated", "value": "web"}], False, id="other-value"),
        pytest.param([{"key": "dedicated", "operator": "Exists"}], True, id="exists-any-effect"),
        pytest.param([{"operator": "Exists"}], True, id="tolerate-everything"),
        pytest.param([{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}], False, id="other-effect"),
    ],
)
def test_taints_and_tolerations(tolerations: list, fits: bool) -> None:
    message = verdict(pod(tolerations=tolerations), TAINTED)
    assert (message is None) == fits
    if not fits:
        assert message is not None
        assert "1 node(s) had untolerated taint {dedicated: ml}." in message


def test_prefer_no_schedule_is_only_a_preference() -> None:
    soft = NodeInfo("box", NODE.allocatable, taints=({"key": "k", "effect": "PreferNoSchedule"},))
    assert verdict(pod(), soft) is None


def test_a_node_not_ready_is_tainted_and_a_cordoned_node_refuses() -> None:
    node = {"metadata": {"name": "box"}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}}
    message = verdict(pod(), snapshot.node_info(node))
    assert message is not None and "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }." in message
    cordoned = NodeInfo("box", NODE.allocatable, unschedulable=True)
    message = verdict(pod(), cordoned)
    assert message is not None and "1 node(s) were unschedulable." in message


def test_preemption_policy_never_is_said() -> None:
    never = pod(cpu="8", preemptionPolicy="Never")
    assert verdict(never) == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.."
    )


def test_no_nodes() -> None:
    decision = schedule([], {}, [pod()], {}, {})
    assert decision.unschedulable[0][1] == "no nodes available to schedule pods"


def test_least_allocated_node_wins() -> None:
    other = NodeInfo("other", NODE.allocatable)
    target, _ = place(pod(cpu="1"), [NODE, other], {"box": Usage({"cpu": 2000}, 2), "other": Usage()})
    assert target == "other"


# -- order -------------------------------------------------------------------------------------------


def test_higher_priority_first_then_older_first() -> None:
    old = pod("old", cpu="3", created="2026-01-01T00:00:00Z")
    new = pod("new", cpu="3", created="2026-01-02T00:00:00Z")
    high = replace(pod("high", cpu="3", created="2026-01-03T00:00:00Z"), priority=1000)
    decision = schedule([NODE], used(), [new, old, high], {}, {})
    assert [(p.name, n) for p, n in decision.bindings] == [("high", "box")]
    decision = schedule([NODE], used(), [new, old], {}, {})
    assert [p.name for p, _ in decision.bindings] == ["old"]
    assert [p.name for p, _ in decision.unschedulable] == ["new"]


def test_the_decision_does_not_touch_its_inputs() -> None:
    state = used()
    schedule([NODE], state, [pod(cpu="1")], {}, {})
    assert state["box"] == Usage()


# -- gangs -------------------------------------------------------------------------------------------


def gang(name: str, members: list[PodInfo], *, minimum: int = 3, flavour: str = COSCHEDULING, **kw: Any) -> Group:
    return Group(key=(flavour, "ns", name), min_member=minimum, members=tuple(members), **kw)


def test_two_gangs_one_runs_the_other_waits_whole() -> None:
    a = [member(f"a-{i}", "a", cpu="1", created="2026-01-01T00:00:00Z") for i in range(3)]
    b = [member(f"b-{i}", "b", cpu="1", created="2026-01-01T00:00:01Z") for i in range(3)]
    groups = {
        g.key: g for g in (gang("a", a, created="2026-01-01T00:00:00Z"), gang("b", b, created="2026-01-01T00:00:01Z"))
    }
    decision = schedule([NODE], used(), [*b, *a], groups, {})
    assert sorted(p.name for p, _ in decision.bindings) == ["a-0", "a-1", "a-2"]
    assert sorted(p.name for p, _ in decision.unschedulable) == ["b-0", "b-1", "b-2"]
    message = decision.gangs[(COSCHEDULING, "ns", "b")]
    assert message.startswith("0/1 nodes are available: 1 Insufficient cpu.")
    assert "PodGroup ns/b gets rejected: 3 more pod(s) must be placed together for minMember 3, only 1 fit." in message


def test_a_gang_whose_members_are_partly_bound_needs_only_the_rest() -> None:
    bound = [replace(member(f"a-{i}", "a", cpu="1"), node_name="box") for i in range(2)]
    late = member("a-2", "a", cpu="1")
    g = gang("a", [*bound, late])
    decision = schedule([NODE], used(box=Usage({"cpu": 3000}, 2)), [late], {g.key: g}, {})
    assert [p.name for p, _ in decision.bindings] == ["a-2"]


def test_coscheduling_waits_for_enough_siblings() -> None:
    one = member("a-0", "a", cpu="1")
    decision = schedule([NODE], used(), [one], {(COSCHEDULING, "ns", "a"): gang("a", [one])}, {})
    assert not decision.bindings
    assert decision.unschedulable[0][1] == (
        "0/1 nodes are available: pre-filter pod a-0 cannot find enough sibling pods, current pods number: 1, "
        "minMember of group: 3. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.."
    )


def test_coscheduling_min_resources_must_fit_the_cluster() -> None:
    pods = [member(f"a-{i}", "a") for i in range(3)]
    g = gang("a", pods, min_resources={"cpu": 6000})
    decision = schedule([NODE], used(), pods, {g.key: g}, {})
    assert not decision.bindings
    assert "resource gap: cpu 2" in decision.gangs[g.key]


def test_a_label_naming_no_podgroup_schedules_the_pod_alone() -> None:
    lone = member("x", "missing", cpu="1")
    missing = Group(key=(COSCHEDULING, "ns", "missing"), min_member=0, members=(lone,), exists=False)
    decision = schedule([NODE], used(), [lone], {missing.key: missing}, {})
    assert [p.name for p, _ in decision.bindings] == ["x"]


def test_volcano_enqueues_what_fits_and_places_only_enqueued_groups() -> None:
    small = gang("small", [], minimum=2, flavour=VOLCANO_GROUP, min_resources={"cpu": 3000}, created="1")
    big = gang("big", [], minimum=1, flavour=VOLCANO_GROUP, min_resources={"cpu": 2000}, created="2")
    decision = schedule([NODE], used(), [], {small.key: small, big.key: big}, {})
    assert decision.enqueued == [small.key]
    assert "its minResources (cpu 2) do not fit the cluster's idle resources (cpu 1)" in decision.gangs[big.key]

    pods = [member(f"s-{i}", "small", VOLCANO_GROUP, cpu="1", schedulerName="volcano") for i in range(2)]
    waiting = [member("w", "big", VOLCANO_GROUP, cpu="1", schedulerName="volcano")]
    queued = replace(small, phase="Inqueue", members=tuple(pods))
    held = replace(big, members=tuple(waiting))
    decision = schedule([NODE], used(), [*pods, *waiting], {queued.key: queued, held.key: held}, {})
    assert sorted(p.name for p, _ in decision.bindings) == ["s-0", "s-1"]
    assert [p.name for p, _ in decision.unschedulable] == ["w"]


def test_volcano_gang_that_does_not_fit_says_so_in_volcano_words() -> None:
    pods = [member(f"v-{i}", "v", VOLCANO_GROUP, cpu="2", schedulerName="volcano") for i in range(3)]
    g = gang("v", pods, flavour=VOLCANO_GROUP, phase="Inqueue")
    decision = schedule([NODE], used(), pods, {g.key: g}, {})
    assert not decision.bindings
    assert decision.gangs[g.key] == (
        "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: "
        "1 Unschedulable, 2 Schedulable. Origin reason is v-2: 0/1 nodes are unavailable: 1 Insufficient cpu."
    )


def test_volcano_counts_succeeded_members_as_allocated() -> None:
    done = [replace(member(f"v-{i}", "v", VOLCANO_GROUP), node_name="box", phase="Succeeded") for i in range(2)]
    assert gang("v", done, flavour=VOLCANO_GROUP).assigned() == 2
    assert gang("v", done).assigned() == 0


def test_pod_info_reads_groups_as_each_scheduler_does() -> None:
    labelled = manifest()
    labelled["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "g"}
    labelled["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "v"}
    assert pod_info(labelled).group == (COSCHEDULING, "ns", "g")
    labelled["spec"]["schedulerName"] = "volcano"
    assert pod_info(labelled).group == (VOLCANO_GROUP, "ns", "v")
