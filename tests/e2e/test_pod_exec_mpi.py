"""The node's launch agent, as ``mpirun`` in a launcher pod calls it, runs commands inside worker pods.

The pods are an MPIJob's as upstream's operator makes them, written by hand (MPIJob itself is
``test_mpijob``'s, which runs mpirun on both Open MPI versions): a hostfile ConfigMap mounted at
/etc/mpi in the launcher, a headless Service, workers running ``/usr/sbin/sshd -De`` with
``hostname``/``subdomain`` set. The node runs a placeholder for sshd and gives every container its
exec client as Open MPI's launch agent (``node.podexec``). The agent answers as ssh does; deleting a
worker kills the rank it holds, and an agent that dies takes its remote command along.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually
from framework_envs import register

pytestmark = pytest.mark.e2e

OPENMPI5 = "ghcr.io/trainyard/examples-mpi:test"


@pytest.fixture(scope="module", autouse=True)
def environments(plane: Plane) -> None:
    register(plane, "mpi")


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"podexec-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))


def phase(kubectl: Kubectl, ns: str, name: str) -> str:
    return kubectl("get", "pod", name, "-n", ns, "-o", "jsonpath={.status.phase}")


def workers(kubectl: Kubectl, ns: str, job: str, image: str) -> list[str]:
    """The hostfile ConfigMap, the headless Service and two running workers of an MPIJob named ``job``."""
    names = [f"{job}-worker-{i}" for i in range(2)]
    hostfile = "".join(f"{n}.{job}.{ns}.svc slots=1\n" for n in names)
    objects: list[dict[str, Any]] = [
        {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"name": f"{job}-config"},
            "data": {"hostfile": hostfile},
        },
        {
            "kind": "Service",
            "apiVersion": "v1",
            "metadata": {"name": job},
            "spec": {"clusterIP": "None", "selector": {"job": job}},
        },
    ]
    for name in names:
        container = {"name": "worker", "image": image, "command": ["/usr/sbin/sshd", "-De"]}
        spec = {"hostname": name, "subdomain": job, "containers": [container]}
        objects.append(
            {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "labels": {"job": job}}, "spec": spec}
        )
    apply_in(kubectl, ns, objects)
    for name in names:
        eventually(lambda name=name: phase(kubectl, ns, name) == "Running", what=f"{name} Running")
    return names


def apply_in(kubectl: Kubectl, ns: str, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        obj["metadata"]["namespace"] = ns
    apply(kubectl, *objects)


def launcher(kubectl: Kubectl, ns: str, job: str, image: str, command: list[str], name: str = "") -> str:
    name = name or f"{job}-launcher"
    container = {
        "name": "launcher",
        "image": image,
        "command": command,
        "env": [
            {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
            {"name": "PRTE_MCA_prte_default_hostfile", "value": "/etc/mpi/hostfile"},
        ],
        "volumeMounts": [{"name": "mpi-job-config", "mountPath": "/etc/mpi"}],
    }
    volume = {
        "name": "mpi-job-config",
        "configMap": {"name": f"{job}-config", "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}]},
    }
    spec = {"restartPolicy": "Never", "containers": [container], "volumes": [volume]}
    apply_in(kubectl, ns, [{"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name}, "spec": spec}])
    return name


def finished(kubectl: Kubectl, ns: str, name: str) -> str:
    return eventually(
        lambda: (p := phase(kubectl, ns, name)) in ("Succeeded", "Failed") and p, timeout=120, what=f"{name} done"
    )


def test_the_launch_agent_runs_a_command_in_the_named_pod_as_ssh_would(kubectl: Kubectl, ns: str) -> None:
    image = OPENMPI5
    names = workers(kubectl, ns, "pi", image)
    # The workers' sshd is a placeholder that says how commands reach them.
    assert "through the node agent's exec" in kubectl("logs", names[0], "-n", ns)

    # The launch agent as ssh is called: a pod's DNS name, ssh options, the words joined into one command;
    # an unknown host or a stopped pod answers as ssh does (exit 255, its words on stderr).
    check = (
        '"$PRTE_MCA_plm_ssh_agent" -x -o ConnectionAttempts=10 '
        f"{names[1]}.pi.{ns}.svc.cluster.local 'echo $HOSTNAME' in '$(hostname)'; "
        'echo "status $?"; "$OMPI_MCA_plm_rsh_agent" nosuch-0 true; echo "status $?"'
    )
    probe = launcher(kubectl, ns, "pi", image, ["sh", "-c", check], name="probe")
    assert finished(kubectl, ns, probe) == "Succeeded"
    out = kubectl("logs", probe, "-n", ns).splitlines()
    assert out == [
        f"{names[1]} in {names[1]}",
        "status 0",
        "ssh: Could not resolve hostname nosuch-0: no running pod on this node has that name",
        "status 255",
    ], out


def rank_processes(token: str) -> list[int]:
    """The processes on this machine started as ``python`` whose command line carries ``token``.

    That is the ranks (or a command run remotely), not mpirun or the launch agent (they are other programs,
    or trainyard's Python by its full path).
    """
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[0] == b"python" and any(token.encode() in a for a in argv):
                found.append(int(entry.name))
    return found


def test_deleting_a_worker_kills_the_rank_it_runs(kubectl: Kubectl, ns: str) -> None:
    names = workers(kubectl, ns, "long", OPENMPI5)
    token = f"rank-{uuid.uuid4().hex[:8]}"
    code = f"import time; print('{token} started', flush=True); time.sleep(600)"
    name = launcher(kubectl, ns, "long", OPENMPI5, ["mpirun", "-n", "2", "python", "-c", code])
    eventually(lambda: kubectl("logs", name, "-n", ns).count(f"{token} started") == 2, timeout=90, what="ranks")
    assert len(rank_processes(token)) == 2

    kubectl("delete", "pod", names[1], "-n", ns, "--grace-period=1")
    # The deleted worker's rank goes with it, and mpirun, losing a daemon, ends the other one.
    eventually(lambda: not rank_processes(token), timeout=60, what="no rank left")
    assert finished(kubectl, ns, name) == "Failed"

    # A launch agent that dies (its pod deleted here; mpirun killing it alike) takes its remote command along.
    sleeper = f"{token}-sleeper"
    agent = f'"$PRTE_MCA_plm_ssh_agent" {names[0]} python -c "\\"import time; time.sleep(600)\\"" {sleeper}; sleep 600'
    client = launcher(kubectl, ns, "long", OPENMPI5, ["sh", "-c", agent], name="client")
    eventually(lambda: rank_processes(sleeper), what="the remote command")
    kubectl("delete", "pod", client, "-n", ns, "--grace-period=1")
    eventually(lambda: not rank_processes(sleeper), timeout=30, what="the remote command gone")
    assert phase(kubectl, ns, names[0]) == "Running"
