"""A container's thread counts follow its CPU share on the local node, unless it sets them itself."""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.cluster.clients.node import threads
from trainyard.cluster.clients.node.threads import Threads, decide

ALL = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")


def container(**resources: dict[str, Any]) -> dict[str, Any]:
    return {"name": "pytorch", "resources": resources}


@pytest.mark.parametrize(
    ("resources", "cores", "pods", "count", "because"),
    [
        pytest.param({"limits": {"cpu": "1"}}, 16, 1, 1, "its cpu limit 1", id="limit"),
        pytest.param({"limits": {"cpu": "500m"}}, 16, 1, 1, "its cpu limit 500m, rounded up", id="limit-below-a-core"),
        pytest.param({"limits": {"cpu": "1500m"}}, 16, 1, 2, "its cpu limit 1500m, rounded up", id="limit-rounded-up"),
        pytest.param(
            {"limits": {"cpu": "4"}, "requests": {"cpu": "1"}}, 16, 8, 4, "its cpu limit 4", id="limit-before-request"
        ),
        pytest.param({"requests": {"cpu": "2"}}, 16, 8, 2, "its cpu request 2 (no limit)", id="request"),
        pytest.param(
            {"requests": {"cpu": "0.1"}}, 16, 1, 1, "its cpu request 100m (no limit), rounded up", id="small-request"
        ),
        pytest.param({}, 2, 2, 1, "no cpu limit or request, the node's 2 cores among its 2 pods", id="shared"),
        pytest.param({}, 16, 3, 5, "no cpu limit or request, the node's 16 cores among its 3 pods", id="rounded-down"),
        pytest.param({}, 2, 5, 1, "no cpu limit or request, the node's 2 cores among its 5 pods", id="at-least-one"),
        pytest.param({}, 1, 1, 1, "no cpu limit or request, the node's 1 core among its 1 pod", id="alone"),
        pytest.param({"limits": {"memory": "1Gi"}}, 4, 1, 4, "no cpu limit or request", id="memory-only"),
        pytest.param({"limits": {"cpu": "0"}}, 4, 2, 2, "no cpu limit or request", id="zero-limit-is-none"),
    ],
)
def test_the_share_is_the_limit_else_the_request_else_the_nodes_cores_among_its_pods(
    resources: dict[str, Any], cores: int, pods: int, count: int, because: str
) -> None:
    plan = decide(container(**resources), {}, cores=cores, pods=pods)
    assert plan.count == count
    assert plan.because.startswith(because)
    assert plan.env == dict.fromkeys(ALL, str(count))


@pytest.mark.parametrize(
    ("nproc", "count", "said"),
    [
        ("4", 2, ", divided among the 4 processes of PET_NPROC_PER_NODE"),
        ("16", 1, ", divided among the 16 processes of PET_NPROC_PER_NODE"),
        # A PyTorchJob's default, whether or not its pods run torchrun: no count to divide by.
        ("auto", 8, ""),
        ("gpu", 8, ""),
        ("1", 8, ""),
        ("0", 8, ""),
    ],
)
def test_a_launchers_processes_divide_the_share(nproc: str, count: int, said: str) -> None:
    # torchrun keeps an OMP_NUM_THREADS it finds, so the node's must already be per worker.
    plan = decide(container(limits={"cpu": "8"}), {"PET_NPROC_PER_NODE": nproc}, cores=16, pods=1)
    assert (plan.count, plan.because) == (count, f"its cpu limit 8{said}")
    assert plan.env["OMP_NUM_THREADS"] == str(count)


def test_a_variable_the_container_sets_is_its_own() -> None:
    plan = decide(container(), {"MKL_NUM_THREADS": "3", "TF_NUM_INTRAOP_THREADS": ""}, cores=4, pods=2)
    assert plan.env == {"OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}
    assert plan.own == ("MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")


def test_mkl_and_openblas_follow_a_containers_own_omp_num_threads() -> None:
    # Both read OMP_NUM_THREADS when their own variable is unset: the container chose for them too.
    plan = decide(container(), {"OMP_NUM_THREADS": "3"}, cores=4, pods=1)
    assert plan.env == {"TF_NUM_INTRAOP_THREADS": "4"}
    everything = decide(container(), dict.fromkeys(ALL, "3"), cores=4, pods=1)
    assert everything.env == {} and everything.event("pytorch") is None


def test_the_event_says_what_was_set_and_why() -> None:
    plan = decide(container(limits={"cpu": "1"}), {}, cores=2, pods=2)
    assert plan.event("pytorch") == (
        "Set OMP_NUM_THREADS=1 (and MKL_NUM_THREADS, OPENBLAS_NUM_THREADS, TF_NUM_INTRAOP_THREADS) "
        "in container pytorch: its cpu limit 1"
    )
    own = decide(container(), {"OMP_NUM_THREADS": "3"}, cores=2, pods=2)
    assert own.event("trainer") == (
        "Set TF_NUM_INTRAOP_THREADS=1 in container trainer: no cpu limit or request, the node's 2 cores among "
        "its 2 pods; OMP_NUM_THREADS is the container's own"
    )
    two = Threads(2, "x", {"OMP_NUM_THREADS": "2"}, ("MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"))
    assert (
        two.event("c")
        == "Set OMP_NUM_THREADS=2 in container c: x; MKL_NUM_THREADS, OPENBLAS_NUM_THREADS are the container's own"
    )


def pod(uid: str, phase: str | None = None) -> dict[str, Any]:
    return {"metadata": {"uid": uid}, "status": {"phase": phase} if phase else {}}


def test_the_pods_sharing_the_node_are_those_not_done_this_one_included() -> None:
    node = [pod("a", "Running"), pod("b", "Pending"), pod("c"), pod("d", "Succeeded"), pod("e", "Failed")]
    active = [p for p in node if threads.active(p)]
    assert [p["metadata"]["uid"] for p in active] == ["a", "b", "c"]
    assert threads.pods_running(active, "a") == 3
    assert threads.pods_running(active, "new") == 4  # not in the cache yet, counted all the same
    assert threads.pods_running([], "alone") == 1


@pytest.mark.parametrize(
    ("capacity", "machine", "cores"), [(2000, 2, 2), (64000, 2, 2), (1000, 16, 1), (500, 16, 1), (2500, 16, 2)]
)
def test_the_nodes_cores_are_its_capacity_on_this_machines_cpus(capacity: int, machine: int, cores: int) -> None:
    assert threads.node_cores(capacity, machine) == cores
