"""The PyTorchJob surface through the real kubectl: the seed examples, ``kubectl scale``, admission.

The plane declares three (simulated) GPUs so the seed that asks for one GPU per replica runs as
written. Replicas run tiny ``python -c`` commands instead of training: what is under test is the
operator's handling of the manifests, not the training code.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

SEEDS = Path(__file__).parent / "seeds"
IMAGE = "python:3.11"
SLEEP = ["python", "-c", "import time; time.sleep(600)"]
SELECTOR = (
    "training.kubeflow.org/job-name={job},training.kubeflow.org/operator-name=pytorchjob-controller,"
    "training.kubeflow.org/replica-type=worker"
)
DEPRECATED = "Warning: spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-job-surface", "--gpus", "3")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"surface-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "pytorchjobs", "--all", "-n", name, "--wait=false")
    kubectl.run("delete", "namespace", name, "--wait=false")


def with_command(manifest: dict[str, Any], command: list[str]) -> dict[str, Any]:
    """The manifest with only image and command changed (containers added where the seed has none)."""
    out = copy.deepcopy(manifest)
    for spec in out["spec"]["pytorchReplicaSpecs"].values():
        pod = spec.setdefault("template", {}).setdefault("spec", {})
        containers = pod.setdefault("containers", [{"name": "pytorch"}])
        for container in containers:
            container["image"] = IMAGE
            container["command"] = command
    return out


def state(kubectl: Kubectl, ns: str, name: str) -> str:
    return kubectl("get", "pytorchjob", name, "-n", ns, "-o", "jsonpath={.status.conditions[-1:].type}")


def pods(kubectl: Kubectl, ns: str, selector: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in kubectl.json("get", "pods", "-n", ns, "-l", selector)["items"]}


def env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env", [])}


# -- the seed examples --------------------------------------------------------------------------------

SEED_ENV = {
    # seed, a worker pod, variables it must have (reference §3.1)
    "pytorch-training": (
        "pytorch-training-worker-1",
        {"RANK": "2", "WORLD_SIZE": "3", "PET_NNODES": "1:4", "PET_RDZV_BACKEND": "c10d", "PET_NPROC_PER_NODE": "auto"},
    ),
    "elastic-pytorch-training": (
        "elastic-pytorch-training-worker-0",
        {"RANK": "1", "PET_NNODES": "1:4", "PET_MAX_RESTARTS": "3", "PET_RDZV_BACKEND": "c10d"},
    ),
    "resnet50-ddp": ("resnet50-ddp-worker-1", {"RANK": "2", "WORLD_SIZE": "3", "PET_NNODES": "3"}),
    "elastic-workers": ("elastic-workers-worker-3", {"PET_NNODES": "2:4", "PET_MAX_RESTARTS": "100"}),
}


def test_seed_examples_run_to_success(kubectl: Kubectl, ns: str) -> None:
    names = []
    for path in sorted(SEEDS.glob("*.yaml")):
        manifest = with_command(yaml.safe_load(path.read_text()), ["python", "-c", "print('done', flush=True)"])
        names.append(manifest["metadata"]["name"])
        applied = kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(manifest))
        assert f"pytorchjob.kubeflow.org/{manifest['metadata']['name']} created" in applied
    assert sorted(names) == sorted(SEED_ENV)

    for name in names:
        final = eventually(
            lambda name=name: (s := state(kubectl, ns, name)) in ("Succeeded", "Failed") and s,
            timeout=240,
            what=f"{name} to finish",
        )
        assert final == "Succeeded", kubectl("describe", "pytorchjob", name, "-n", ns)
        job = kubectl.json("get", "pytorchjob", name, "-n", ns)
        assert job["status"]["startTime"] and job["status"]["completionTime"]
        worker, expected = SEED_ENV[name]
        got = env(kubectl.json("get", "pod", worker, "-n", ns))
        assert {k: got.get(k) for k in expected} == expected
    gpus = [
        c["resources"]["limits"]["nvidia.com/gpu"]
        for p in pods(kubectl, ns, "training.kubeflow.org/job-name=resnet50-ddp").values()
        for c in p["spec"]["containers"]
    ]
    assert gpus == [1, 1, 1]


# -- kubectl scale -----------------------------------------------------------------------------------


def sleeper(name: str, workers: int) -> dict[str, Any]:
    template = {"spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "pytorch"}]}}
    return with_command(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": name},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": copy.deepcopy(template)},
                    "Worker": {"replicas": workers, "template": copy.deepcopy(template)},
                }
            },
        },
        SLEEP,
    )


def running_workers(kubectl: Kubectl, ns: str, selector: str) -> list[str]:
    return sorted(n for n, p in pods(kubectl, ns, selector).items() if p["status"].get("phase") == "Running")


def test_kubectl_scale_adds_and_removes_workers(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(sleeper("scaled", 1)))
    selector = SELECTOR.format(job="scaled")
    eventually(
        lambda: (
            kubectl("get", "pytorchjob", "scaled", "-n", ns, "-o", "jsonpath={.status.replicaStatuses.Worker.active}")
            == "1"
        ),
        timeout=120,
        what="worker-0 to run",
    )
    assert (
        kubectl("get", "pytorchjob", "scaled", "-n", ns, "-o", "jsonpath={.status.replicaStatuses.Worker.selector}")
        == selector
    )

    assert (
        kubectl("scale", "pytorchjob/scaled", "-n", ns, "--replicas=3").strip()
        == "pytorchjob.kubeflow.org/scaled scaled"
    )

    expected = ["scaled-worker-0", "scaled-worker-1", "scaled-worker-2"]
    eventually(lambda: running_workers(kubectl, ns, selector) == expected, timeout=120, what="three running workers")
    services = kubectl.json("get", "services", "-n", ns, "-l", selector)["items"]
    assert sorted(s["metadata"]["name"] for s in services) == expected
    scale = eventually(
        lambda: (
            (s := kubectl.json("get", "pytorchjob", "scaled", "-n", ns, "--subresource=scale"))["status"]["replicas"]
            == 3
            and s
        ),
        what="the scale subresource to report three active workers",
    )
    assert (scale["kind"], scale["spec"]["replicas"], scale["status"]["selector"]) == ("Scale", 3, selector)
    added = pods(kubectl, ns, selector)["scaled-worker-2"]
    assert (env(added)["RANK"], env(added)["WORLD_SIZE"]) == ("3", "4")
    # One machine: the master's port is local, so no worker waits for it in an init container.
    assert all("initContainers" not in p["spec"] for p in pods(kubectl, ns, selector).values())

    kubectl("scale", "pytorchjob/scaled", "-n", ns, "--replicas=1")

    eventually(
        lambda: (
            sorted(pods(kubectl, ns, selector)) == ["scaled-worker-0"]
            and [s["metadata"]["name"] for s in kubectl.json("get", "services", "-n", ns, "-l", selector)["items"]]
            == ["scaled-worker-0"]
        ),
        timeout=120,
        what="workers 1 and 2 and their Services to be removed",
    )
    assert (
        kubectl("get", "pytorchjob", "scaled", "-n", ns, "-o", "jsonpath={.spec.pytorchReplicaSpecs.Worker.replicas}")
        == "1"
    )
    assert state(kubectl, ns, "scaled") == "Running"


# -- admission through kubectl ---------------------------------------------------------------------------


def suspended(name: str, **spec: Any) -> dict[str, Any]:
    body = sleeper(name, 1)
    body["spec"]["runPolicy"] = {"suspend": True, "managedBy": "kubeflow.org/training-operator"}
    body["spec"].update(spec)
    return body


def test_deprecated_field_is_a_warning_kubectl_prints(kubectl: Kubectl, ns: str) -> None:
    body = suspended("old-style", elasticPolicy={"nProcPerNode": 2})

    created = kubectl.run("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(body))

    assert created.returncode == 0, created.stderr
    assert DEPRECATED in created.stderr
    assert "pytorchjob.kubeflow.org/old-style created" in created.stdout
    again = kubectl.run(
        "apply", "-n", ns, "-f", "-", input=yaml.safe_dump(suspended("current-style", nprocPerNode="2"))
    )
    assert again.returncode == 0 and "Warning" not in again.stderr


def test_managed_by_cannot_change(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(suspended("owned")))
    patch = {"spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}}

    refused = kubectl.run("patch", "pytorchjob", "owned", "-n", ns, "--type=merge", "-p", json.dumps(patch))

    assert refused.returncode != 0
    assert (
        'The PyTorchJob "owned" is invalid: spec.runPolicy.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": '
        "field is immutable" in refused.stderr
    )
    kept = kubectl("get", "pytorchjob", "owned", "-n", ns, "-o", "jsonpath={.spec.runPolicy.managedBy}")
    assert kept == "kubeflow.org/training-operator"
    other = {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}}}
    assert "patched" in kubectl("patch", "pytorchjob", "owned", "-n", ns, "--type=merge", "-p", json.dumps(other))
