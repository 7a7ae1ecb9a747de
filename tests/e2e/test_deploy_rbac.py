"""The ClusterRole and Role of ``deploy/`` cover every request the operator really makes.

``python -m trainyard.operator`` runs as its own process against a ``yard up --no-operator`` plane,
through a recording HTTP proxy (the kubeconfig it is given points there). Every request is turned
into the (API group, resource[/subresource], verb) that a real API server's authorizer checks, and
the run is driven through every path of the operator that writes: leader election, children,
status, events, host ports, gang scheduling with both PodGroup flavours (scheduler-plugins, then
Volcano), PriorityClass lookup, the elastic HPA (created, replaced when the job changes, deleted
on suspend), scaling, suspend and TTL deletion. The granted rules must cover all of it, and every
granted rule must have been used, except the ones a real cluster asks for and no request shows.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_process import OperatorProcess
from recording_proxy import Recorder, differences, grants, proxied, recording

from conftest import Kubectl, Plane, eventually, own_plane
from trainyard.api.kinds import KINDS
from trainyard.operator.manifests import LEASE_RULES, cluster_rules

pytestmark = pytest.mark.e2e

# Granted although no request shows them: with blockOwnerDeletion on the children's ownerReferences,
# a real API server's OwnerReferencesPermissionEnforcement admission checks `update` on the owner's
# finalizers subresource when a child is created; the embedded plane has no such plugin.
ADMISSION_ONLY = {
    ("kubeflow.org", "pytorchjobs/finalizers", "update"),
    ("trainer.kubeflow.org", "trainjobs/finalizers", "update"),
    ("ml.example.com", "trainingjobs/finalizers", "update"),
    ("trainer.kubeflow.org", "optimizationjobs/finalizers", "update"),
    ("kubeflow.org", "experiments/finalizers", "update"),
    ("kubeflow.org", "trials/finalizers", "update"),
}
# The status server reviews tokens and reads a v1 job to merge its training progress into; it is served
# only with the webhook's certificates, which this test's operator does not have
# (tests/e2e/test_trainjob_status.py drives it in a plane).
NOT_DRIVEN = {("authentication.k8s.io", "tokenreviews", "create"), ("kubeflow.org", "pytorchjobs", "get")}
# A Katib Trial's job of these kinds takes the path a batch Job's takes, which is driven (create, then
# delete once finished): one kind of trial job stands for all.
TRIAL_JOBS = {
    ("trainer.kubeflow.org", "trainjobs", "delete"),
    ("ml.example.com", "trainingjobs", "create"),
    ("ml.example.com", "trainingjobs", "delete"),
}

# Every kind's jobs get the rules of one template; the jobs driven here are PyTorchJobs.
JOB_PLURALS = {("kubeflow.org", info.plural) for info in KINDS.values()}
PYTORCHJOBS = ("kubeflow.org", "pytorchjobs")


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    # plain http: the recording proxy in front of the plane is a plain http one
    yield from own_plane(tmp_path_factory, "yard-rbac", "--no-operator", "--cpus", "8", secure=False)


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache-rbac"))


@pytest.fixture
def recorder(plane: Plane) -> Iterator[Recorder]:
    with recording(plane) as server:
        yield server


def job(name: str, ns: str, *, workers: int, seconds: int, master: bool = True, **spec: Any) -> dict[str, Any]:
    def replicas(n: int) -> dict[str, Any]:
        container = {"name": "pytorch", "image": "python:3.11", "command": ["sleep", str(seconds)]}
        pod = {"terminationGracePeriodSeconds": 1, "priorityClassName": "deploy-high", "containers": [container]}
        return {"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": pod}}

    specs = {**({"Master": replicas(1)} if master else {}), **({"Worker": replicas(workers)} if workers else {})}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"pytorchReplicaSpecs": specs, **spec},
    }


def get(kubectl: Kubectl, what: str, name: str, ns: str) -> dict[str, Any] | None:
    result = kubectl.run("get", what, name, "-n", ns, "-o", "json")
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
        return None
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def patch(kubectl: Kubectl, ns: str, name: str, body: dict[str, Any]) -> None:
    kubectl("patch", "pytorchjob", name, "-n", ns, "--type=merge", "-p", json.dumps(body))


def pod_count(kubectl: Kubectl, ns: str, name: str) -> int:
    """The job's replica pods (an elastic job's rendezvous host ``<job>-rdzv`` has no replica type)."""
    selector = f"training.kubeflow.org/job-name={name},training.kubeflow.org/replica-type"
    return len(kubectl("get", "pods", "-n", ns, "-l", selector, "-o", "name").split())


def scale_and_suspend(kubectl: Kubectl, ns: str, name: str, group: str, pods: int) -> None:
    """Pods, then one more Worker (the PodGroup's minMember changes: replaced), then suspend (all deleted)."""
    eventually(lambda: pod_count(kubectl, ns, name) == pods, timeout=120, what=f"{name}'s {pods} pods")
    eventually(lambda: get(kubectl, group, name, ns), timeout=60, what=f"{name}'s PodGroup")
    kubectl("scale", f"pytorchjob/{name}", "-n", ns, "--replicas=2")
    eventually(
        lambda: ((get(kubectl, group, name, ns) or {}).get("spec") or {}).get("minMember") == pods + 1,
        timeout=60,
        what=f"the PodGroup replaced with minMember {pods + 1}",
    )
    patch(kubectl, ns, name, {"spec": {"runPolicy": {"suspend": True}}})
    eventually(lambda: get(kubectl, group, name, ns) is None, timeout=60, what=f"{name}'s PodGroup deleted")
    eventually(lambda: pod_count(kubectl, ns, name) == 0, timeout=60, what=f"{name}'s pods deleted")


def mpijob_children(kubectl: Kubectl, ns: str) -> None:
    """An MPIJob's: Service, hostfile ConfigMap (updated as its worker runs), SSH Secret, launcher Job
    (suspended, then resumed: its startTime cleared through the status subresource, then updated);
    a Service someone changed is put back."""
    sleep = ["python", "-c", "import time; time.sleep(3600)"]
    spec = {"terminationGracePeriodSeconds": 1, "containers": [{"name": "m", "image": "python:3.11", "command": sleep}]}
    mpi = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "mpi", "namespace": ns},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": spec}},
                "Worker": {"replicas": 1, "template": {"spec": spec}},
            }
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(mpi))
    running = "echo mpi-worker-0.mpi"
    eventually(
        lambda: (
            running
            in ((get(kubectl, "configmap", "mpi-config", ns) or {}).get("data") or {}).get("discover_hosts.sh", "")
        ),
        timeout=120,
        what="discover_hosts.sh updated with the running worker",
    )
    eventually(lambda: (get(kubectl, "job", "mpi-launcher", ns) or {}).get("status", {}).get("startTime"), timeout=60)
    kubectl("patch", "service", "mpi", "-n", ns, "--type=merge", "-p", json.dumps({"spec": {"selector": {"x": "y"}}}))
    eventually(
        lambda: "x" not in ((get(kubectl, "service", "mpi", ns) or {}).get("spec") or {}).get("selector", {"x": 1}),
        timeout=60,
        what="the Service's selector put back",
    )
    suspend = {"spec": {"runPolicy": {"suspend": True}}}
    kubectl("patch", "mpijob", "mpi", "-n", ns, "--type=merge", "-p", json.dumps(suspend))
    eventually(lambda: (get(kubectl, "job", "mpi-launcher", ns) or {}).get("spec", {}).get("suspend"), timeout=60)
    resume = {"spec": {"runPolicy": {"suspend": False}}}
    kubectl("patch", "mpijob", "mpi", "-n", ns, "--type=merge", "-p", json.dumps(resume))
    eventually(
        lambda: (get(kubectl, "job", "mpi-launcher", ns) or {}).get("spec", {}).get("suspend") is False,
        timeout=60,
        what="the launcher Job resumed",
    )
    kubectl("delete", "mpijob", "mpi", "-n", ns, "--wait=false")


def trainingjob_children(kubectl: Kubectl, ns: str) -> None:
    """A TrainingJob's PyTorchJob: created suspended, then resumed (replaced); the TrainingJob's status patched."""
    body = {
        "apiVersion": "ml.example.com/v1",
        "kind": "TrainingJob",
        "metadata": {"name": "trj", "namespace": ns},
        "spec": {
            "model": "mlp",
            "dataset": "digits",
            "numWorkers": 1,
            "gpusPerWorker": 0,
            "suspend": True,
            "image": "python:3.11",
            "command": ["python", "-c", "pass"],
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(body))
    eventually(lambda: get(kubectl, "pytorchjob", "trj", ns), timeout=60, what="the TrainingJob's PyTorchJob")
    kubectl("patch", "trainingjob", "trj", "-n", ns, "--type=merge", "-p", json.dumps({"spec": {"suspend": False}}))
    eventually(
        lambda: (
            not ((get(kubectl, "pytorchjob", "trj", ns) or {}).get("spec", {}).get("runPolicy") or {}).get("suspend")
        ),
        timeout=60,
        what="the PyTorchJob resumed",
    )


def optimizationjob_children(kubectl: Kubectl, ns: str) -> None:
    """An OptimizationJob's trial TrainJob created; the OptimizationJob's status patched."""
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "OptimizationJob",
        "metadata": {"name": "opt", "namespace": ns},
        "spec": {
            "objectives": [{"metric": "loss"}],
            "parameters": [{"name": "lr", "searchSpace": {"categorical": {"choices": ["0.1"]}}}],
            "trainJobTemplate": {
                "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"command": ["python", "-c", "pass"]}}
            },
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(body))
    eventually(lambda: get(kubectl, "trainjob", "opt-trial-0", ns), timeout=60, what="the OptimizationJob's trial")
    eventually(
        lambda: (
            ((get(kubectl, "optimizationjob", "opt", ns) or {}).get("status") or {}).get("trialsRunning") is not None
        ),
        timeout=60,
        what="the OptimizationJob's status",
    )


def experiment(name: str, ns: str, seconds: float, **spec: Any) -> dict[str, Any]:
    script = f"import time; print('loss=0.5', flush=True); time.sleep({seconds})"
    container = {
        "name": "training",
        "image": "python:3.11",
        "command": ["python", "-c", script, "${trialParameters.lr}"],
    }
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": "random"},
            "parameters": [{"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.1", "max": "1"}}],
            "trialTemplate": {
                "primaryContainerName": "training",
                "trialParameters": [{"name": "lr", "reference": "lr"}],
                "trialSpec": {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
                },
            },
            **spec,
        },
    }


def experiment_children(kubectl: Kubectl, ns: str) -> None:
    """Katib's: a Suggestion and Trials created, trial Jobs created and deleted once finished (their
    output read through pods/log), a Trial deleted when parallelTrialCount is lowered."""
    kubectl("create", "-f", "-", input=json.dumps(experiment("quick", ns, 0, parallelTrialCount=1, maxTrialCount=1)))
    kubectl("create", "-f", "-", input=json.dumps(experiment("slow", ns, 3600, parallelTrialCount=2, maxTrialCount=4)))

    def succeeded(name: str) -> bool:
        return bool(((get(kubectl, "experiment", name, ns) or {}).get("status") or {}).get("trialsSucceeded"))

    def trials(name: str) -> list[str]:
        found = kubectl.json("get", "trials", "-n", ns, "-l", f"katib.kubeflow.org/experiment={name}")
        return [t["metadata"]["name"] for t in found["items"]]

    eventually(lambda: succeeded("quick"), timeout=120, what="the quick Experiment's trial succeeded")
    (quick,) = trials("quick")
    eventually(lambda: get(kubectl, "job", quick, ns) is None, timeout=60, what="the finished trial's Job deleted")

    eventually(lambda: len(trials("slow")) == 2, timeout=60, what="two slow trials")
    kubectl(
        "patch", "experiment", "slow", "-n", ns, "--type=merge", "-p", json.dumps({"spec": {"parallelTrialCount": 1}})
    )
    eventually(lambda: len(trials("slow")) == 1, timeout=60, what="a slow trial deleted")
    kubectl("delete", "experiment", "slow", "-n", ns, "--wait=false")


def trainjob_children(kubectl: Kubectl, ns: str) -> None:
    """A TrainJob's: its JobSet created suspended, resumed (replaced), deleted at the deadline; an MPI
    runtime's hostfile ConfigMap and SSH Secret; runtimes read at both scopes."""
    sleep = ["python", "-c", "import time; time.sleep(3600)"]
    pod = {
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "node", "image": "python:3.11", "command": sleep}],
    }
    trainer_step = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}}
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "mpi-rt", "namespace": ns, "labels": {"trainer.kubeflow.org/framework": "mpi"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "mpi": {"runLauncherAsNode": True}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "launcher",
                            "template": {"metadata": trainer_step, "spec": {"template": {"spec": pod}}},
                        },
                        {"name": "node", "template": {"spec": {"template": {"spec": pod}}}},
                    ]
                }
            },
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(runtime))

    def trainjob(name: str, ref: dict[str, str], **spec: Any) -> None:
        body = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"runtimeRef": ref, **spec},
        }
        kubectl("create", "-f", "-", input=json.dumps(body))

    trainjob("tj", {"name": "mpi-rt", "kind": "TrainingRuntime"}, trainer={"numNodes": 2}, suspend=True)
    eventually(lambda: get(kubectl, "jobset", "tj", ns), timeout=60, what="the TrainJob's JobSet")
    assert get(kubectl, "configmap", "tj-mpi-hostfile", ns) and get(kubectl, "secret", "tj-mpi-ssh-auth", ns)
    resume = {"spec": {"suspend": False, "activeDeadlineSeconds": 2}}
    kubectl("patch", "trainjob", "tj", "-n", ns, "--type=merge", "-p", json.dumps(resume))
    eventually(lambda: get(kubectl, "jobset", "tj", ns) is None, timeout=60, what="the JobSet deleted at the deadline")
    trainjob("tj-torch", {"name": "torch-distributed"}, trainer={"command": ["python", "-c", "pass"]})
    eventually(
        lambda: ((get(kubectl, "trainjob", "tj-torch", ns) or {}).get("status") or {}).get("state") == "Complete",
        timeout=120,
        what="the torch-distributed TrainJob Complete",
    )


def test_the_roles_cover_exactly_what_the_operator_asks_for(
    plane: Plane, kubectl: Kubectl, recorder: Recorder, tmp_path: Path
) -> None:
    ns = f"rbac-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", ns)
    kubectl("create", "priorityclass", "deploy-high", "--value=1000")
    through = proxied(plane, recorder, tmp_path / "proxied")
    log = tmp_path / "operator.log"
    election = ["--leader-elect", "--leader-election-namespace", ns, "--leader-elect-retry-period", "1s"]

    # Phase 1: scheduler-plugins PodGroups, the elastic HPA, leader election, TTL.
    first = OperatorProcess(through, log, *election, "--gang-scheduler-name", "scheduler-plugins-scheduler")
    first.start()
    try:
        utilization = {"type": "Utilization", "averageUtilization": 50}
        cpu = {"type": "Resource", "resource": {"name": "cpu", "target": utilization}}
        elastic = job(
            "elastic",
            ns,
            workers=1,
            seconds=3600,
            master=False,
            elasticPolicy={"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d", "metrics": [cpu]},
        )
        kubectl("create", "-f", "-", input=json.dumps(elastic))
        eventually(lambda: get(kubectl, "hpa", "elastic", ns), timeout=120, what="the elastic job's HPA")
        patch(kubectl, ns, "elastic", {"spec": {"elasticPolicy": {"maxReplicas": 4}}})
        eventually(
            lambda: ((get(kubectl, "hpa", "elastic", ns) or {}).get("spec") or {}).get("maxReplicas") == 4,
            timeout=60,
            what="the HPA replaced with maxReplicas 4",
        )
        scale_and_suspend(kubectl, ns, "elastic", "podgroups.scheduling.x-k8s.io", pods=1)
        eventually(lambda: get(kubectl, "hpa", "elastic", ns) is None, timeout=60, what="the HPA deleted on suspend")

        ttl = job("ttl", ns, workers=0, seconds=0, runPolicy={"ttlSecondsAfterFinished": 0})
        kubectl("create", "-f", "-", input=json.dumps(ttl))
        eventually(lambda: get(kubectl, "pytorchjob", "ttl", ns) is None, timeout=180, what="the TTL job deleted")
        mpijob_children(kubectl, ns)
        trainjob_children(kubectl, ns)
        trainingjob_children(kubectl, ns)
        optimizationjob_children(kubectl, ns)
        experiment_children(kubectl, ns)
    finally:
        first.stop()

    # Phase 2: Volcano PodGroups.
    second = OperatorProcess(through, log, "--gang-scheduler-name", "volcano")
    second.start()
    try:
        kubectl("create", "-f", "-", input=json.dumps(job("gang", ns, workers=1, seconds=3600)))
        scale_and_suspend(kubectl, ns, "gang", "podgroups.scheduling.volcano.sh", pods=2)
    finally:
        second.stop()

    observed = recorder.authorizations()
    granted = grants(r.manifest() for r in (*cluster_rules(), *LEASE_RULES))
    print(recorder.summary())
    assert observed, log.read_text()
    missing, unused = differences(observed, granted, plurals=JOB_PLURALS, template=PYTORCHJOBS)
    assert not missing, f"the operator asked for what deploy/ does not grant: {sorted(missing)}"
    unused -= ADMISSION_ONLY | NOT_DRIVEN | TRIAL_JOBS
    assert not unused, f"deploy/ grants what the operator never asked for: {sorted(unused)}"
    lease_verbs = {t for t in observed if t[1] == "leases"}
    assert lease_verbs == {t for r in LEASE_RULES for t in r.triples()}
