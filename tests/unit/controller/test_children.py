"""The children a reconcile pass builds, audited against upstream (reference §3.1, §4.1).

Service labels are the four operator labels only; Worker pods wait for the master with an init
container in cluster mode (a TCP check, configurable or off) and never on one machine; the
operator's env goes to the pod's containers, not to its init containers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from job_builders import DNS, HOST, JOB_ROLE, child_labels, created, job, pod, run, stored_status, template

from trainyard.api import PYTORCHJOB
from trainyard.api.defaults import apply_defaults
from trainyard.controller import children
from trainyard.frameworks.network import WAIT_SCRIPT, WaitForMaster
from trainyard.frameworks.registry import plugin_for

USER_LABELS = {"app": "mnist", "team": "vision"}


def labelled_template() -> dict[str, Any]:
    return template(metadata={"labels": USER_LABELS})


@pytest.mark.parametrize("settings", [DNS, HOST], ids=["cluster-dns", "host"])
@pytest.mark.parametrize(("masters", "rtype", "index"), [(1, "Master", 0), (1, "Worker", 1), (0, "Worker", 0)])
def test_service_labels_are_the_operator_labels_only(settings: Any, masters: int, rtype: str, index: int) -> None:
    owner = job(masters, 2, tmpl=labelled_template(), ports=True)
    plan = run(owner, settings=settings)
    name = f"mnist-{rtype.lower()}-{index}"

    svc = created(plan, "Service")[name].to_dict()
    pod_labels = created(plan, "Pod")[name].metadata.labels

    assert svc["metadata"]["labels"] == child_labels(owner, rtype, index)
    assert svc["spec"]["selector"] == child_labels(owner, rtype, index)
    assert USER_LABELS.items() <= pod_labels.items()
    assert (JOB_ROLE in pod_labels) is (index == 0 and (rtype == "Master" or not masters))


def init_containers(plan: Any, name: str) -> list[dict[str, Any]]:
    return created(plan, "Pod")[name].to_dict()["spec"].get("initContainers", [])


def wait_for(host: str, port: int, tries: int = 100, seconds: int = 2, image: str = "busybox:1.36") -> dict[str, Any]:
    return {
        "name": "init-pytorch",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", WAIT_SCRIPT, "wait-for-master", host, str(port), str(tries), str(seconds)],
        "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}, "requests": {"cpu": "50m", "memory": "10Mi"}},
    }


CUSTOM_PORT = template(container={"ports": [{"name": "pytorchjob-port", "containerPort": 29500}]})
USER_INIT = template(spec={"initContainers": [{"name": "fetch-data", "image": "alpine", "command": ["true"]}]})

INIT_CASES = [
    # id, masters, settings, template, pod, expected init containers
    ("worker-waits-for-master", 1, DNS, None, "mnist-worker-1", [wait_for("mnist-master-0", 23456)]),
    ("master-does-not-wait", 1, DNS, None, "mnist-master-0", []),
    ("worker-only-job-does-not-wait", 0, DNS, None, "mnist-worker-0", []),
    ("host-mode-never-waits", 1, HOST, None, "mnist-worker-0", []),
    ("disabled", 1, replace(DNS, wait_for_master=None), None, "mnist-worker-0", []),
    (
        "configured-image-and-tries",
        1,
        replace(DNS, wait_for_master=WaitForMaster(image="registry.local/tools/busybox:1", max_tries=30)),
        None,
        "mnist-worker-0",
        [wait_for("mnist-master-0", 23456, tries=30, image="registry.local/tools/busybox:1")],
    ),
    ("declared-master-port", 1, DNS, CUSTOM_PORT, "mnist-worker-0", [wait_for("mnist-master-0", 29500)]),
    (
        "after-the-users-own",
        1,
        DNS,
        USER_INIT,
        "mnist-worker-0",
        [{"name": "fetch-data", "image": "alpine", "command": ["true"]}, wait_for("mnist-master-0", 23456)],
    ),
    (
        "users-own-kept-on-master",
        1,
        DNS,
        USER_INIT,
        "mnist-master-0",
        [{"name": "fetch-data", "image": "alpine", "command": ["true"]}],
    ),
]


@pytest.mark.parametrize(
    ("masters", "settings", "tmpl", "pod", "expected"), [c[1:] for c in INIT_CASES], ids=[c[0] for c in INIT_CASES]
)
def test_wait_for_master_init_container(
    masters: int, settings: Any, tmpl: dict[str, Any] | None, pod: str, expected: list[dict[str, Any]]
) -> None:
    assert init_containers(run(job(masters, 2, tmpl=tmpl, ports=True), settings=settings), pod) == expected


def test_init_containers_get_no_operator_env() -> None:
    plan = run(job(1, 1, tmpl=USER_INIT))

    for container in init_containers(plan, "mnist-worker-0"):
        assert "env" not in container


def test_default_settings_wait_in_cluster_mode() -> None:
    assert DNS.wait_for_master == WaitForMaster(image="busybox:1.36", max_tries=100, interval_seconds=2)


def test_an_elastic_c10d_job_needs_one_more_host_port_for_its_rendezvous_host() -> None:
    plugin = plugin_for("PyTorchJob")
    elastic = apply_defaults(job(0, 2, extra_spec={"elasticPolicy": {"minReplicas": 1}}), PYTORCHJOB)
    fixed = apply_defaults(job(0, 2, extra_spec={"elasticPolicy": {"rdzvPort": 29500}}), PYTORCHJOB)
    static = apply_defaults(job(0, 2), PYTORCHJOB)

    workers = ["worker-0/pytorchjob-port", "worker-1/pytorchjob-port"]
    assert children.required_port_keys(elastic, plugin) == [*workers, "rdzv/c10d"]
    assert children.required_port_keys(fixed, plugin) == workers
    assert children.required_port_keys(static, plugin) == workers
    host = run(elastic).create
    assert [(o.kind, o.name) for o in host if children.is_rendezvous(o)] == [
        ("Pod", "mnist-rdzv"),
        ("Service", "mnist-rdzv"),
    ]
    assert not any(children.is_rendezvous(o) for o in host if o.name != "mnist-rdzv")


@pytest.mark.parametrize(
    ("conditions", "phases", "kept"),
    [
        (("Created", "Running"), ("Running", "Running"), True),
        (("Created", "Running=False", "Succeeded"), ("Succeeded", "Running"), True),  # a worker still runs
        (("Created", "Running=False", "Succeeded"), ("Succeeded", None), True),  # nor has it reported yet
        (("Created", "Running=False", "Succeeded"), ("Succeeded", "Succeeded"), False),
        (("Created", "Running=False", "Failed"), ("Failed", "Succeeded"), False),
        (("Created", "Running=False", "Failed"), (), False),  # cleanPodPolicy deleted them
    ],
    ids=["running", "worker-running", "worker-unreported", "all-ended", "failed", "pods-gone"],
)
def test_a_job_keeps_its_host_ports_until_it_finished_and_every_pod_ended(
    conditions: tuple[str, ...], phases: tuple[str | None, ...], kept: bool
) -> None:
    owner = job(1, 1, ports=True, status=stored_status(*conditions))
    pods = [pod(owner, rtype, 0, phase=phase) for rtype, phase in zip(("Master", "Worker"), phases, strict=False)]
    assert children.held_ports(owner, pods) == (children.allocated_ports(owner) if kept else {})
    assert children.allocated_ports(owner)  # the annotation records them either way
