"""The seeds' debugging commands, verbatim, with the real kubectl against a plane.

Seed 001: ``kubectl exec -it <pod> -- /bin/bash``, ``kubectl exec <pod> -- printenv TF_CONFIG``,
``kubectl exec <pod> -- printenv | grep -E "MASTER|RANK|WORLD"``, ``kubectl exec -it <chief-pod> --
netstat -tuln`` and ``kubectl logs <pod-name> --previous``, all in its namespace
``kubeflow-training``. Seed 003: "kubectl exec into a worker and nslookup <jobname>-master-0" (the
replica's headless Service, resolved by the plane's cluster DNS from inside the pod: through the
resolv.conf the node gave it, with ``getent hosts`` as glibc resolves and with a DNS-only query
as ``nslookup`` makes, which reads no /etc/hosts).

The replicas run small commands (a socket listening on the port TF_CONFIG gives the chief, a
sleep): what the commands inspect is what the operator and the node gave the pods.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import REPO, Kubectl, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

NS = "kubeflow-training"  # seed 001's namespace
LISTEN = (
    "import json, os, socket, time\n"
    "config = json.loads(os.environ['TF_CONFIG'])\n"
    "task = config['task']\n"
    "port = int(config['cluster'][task['type']][task['index']].rsplit(':', 1)[1])\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('0.0.0.0', port))\n"
    "s.listen()\n"
    "print('listening on', port, flush=True)\n"
    "time.sleep(600)\n"
)


def replica(command: list[str], container: str) -> dict[str, Any]:
    spec = {"containers": [{"name": container, "image": "python:3.11", "command": command}]}
    return {"replicas": 1, "restartPolicy": "Never", "template": {"spec": spec}}


TFJOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "metadata": {"name": "tf-debug", "namespace": NS},
    "spec": {
        "tfReplicaSpecs": {
            "Chief": replica(["python", "-c", LISTEN], "tensorflow"),
            "Worker": replica(["python", "-c", LISTEN], "tensorflow"),
        }
    },
}
PYTORCHJOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "pt-debug", "namespace": NS},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": replica(["sleep", "600"], "pytorch"),
            "Worker": replica(["sleep", "600"], "pytorch"),
        }
    },
}
ONCE = "if [ -e ran-once ]; then sleep 600; fi; touch ran-once; echo first run; exit 1"
RESTARTED = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "restarted", "namespace": NS},
    "spec": {
        "restartPolicy": "OnFailure",
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "command": ["sh", "-c", ONCE],
            }
        ],
    },
}


@pytest.fixture(scope="module")
def jobs(kubectl: Kubectl) -> Iterator[None]:
    kubectl.run("create", "namespace", NS)
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [TFJOB, PYTORCHJOB]}))
    kubectl("apply", "-f", "-", input=json.dumps(RESTARTED))
    for pod in ("tf-debug-chief-0", "tf-debug-worker-0", "pt-debug-master-0", "pt-debug-worker-0"):
        eventually(lambda pod=pod: ready(kubectl, pod), timeout=120, what=f"{pod} Ready")
    yield
    kubectl.run("delete", "namespace", NS, "--wait=false")


def ready(kubectl: Kubectl, pod: str) -> bool:
    path = "jsonpath={.status.conditions[?(@.type=='Ready')].status}"
    return kubectl.run("get", "pod", pod, "-n", NS, "-o", path).stdout == "True"


def shell(kubectl: Kubectl, line: str) -> subprocess.CompletedProcess[str]:
    """``line`` as a user types it in a shell (pipes and all), with the test's kubeconfig."""
    return subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=kubectl.env, timeout=60, cwd=REPO)


def test_printenv_shows_tf_config_and_the_distributed_variables(kubectl: Kubectl, jobs: None) -> None:
    tf = shell(kubectl, f"kubectl exec tf-debug-chief-0 -n {NS} -- printenv TF_CONFIG")
    assert tf.returncode == 0, tf.stderr
    config = json.loads(tf.stdout)
    assert config["task"] == {"type": "chief", "index": 0}
    assert set(config["cluster"]) == {"chief", "worker"}

    pt = shell(kubectl, f'kubectl exec pt-debug-worker-0 -n {NS} -- printenv | grep -E "MASTER|RANK|WORLD"')
    assert pt.returncode == 0, pt.stderr
    variables = dict(line.split("=", 1) for line in pt.stdout.splitlines())
    assert variables["WORLD_SIZE"] == "2"
    assert variables["RANK"] == "1"
    assert "MASTER_ADDR" in variables
    assert "MASTER_PORT" in variables


def test_netstat_in_the_chief_shows_its_replica_port(kubectl: Kubectl, jobs: None) -> None:
    config = json.loads(kubectl("exec", "tf-debug-chief-0", "-n", NS, "--", "printenv", "TF_CONFIG"))
    port = config["cluster"]["chief"][0].rsplit(":", 1)[1]

    def listens() -> bool:
        result = shell(kubectl, f"kubectl exec -it tf-debug-chief-0 -n {NS} -- netstat -tuln < /dev/null")
        assert result.returncode == 0, result.stderr
        listening = [line for line in result.stdout.splitlines() if "LISTEN" in line]
        return any(line.split()[3].endswith(f":{port}") for line in listening)

    # Ready means the process started; on a busy machine it binds its port a moment later.
    eventually(listens, timeout=60, what=f"the chief listening on {port}")


def test_a_worker_resolves_the_masters_service_name(kubectl: Kubectl, jobs: None) -> None:
    for name in ("pt-debug-master-0", f"pt-debug-master-0.{NS}", f"pt-debug-master-0.{NS}.svc.cluster.local"):
        hosts = kubectl.run("exec", "pt-debug-worker-0", "-n", NS, "--", "getent", "hosts", name)
        assert hosts.returncode == 0, (name, hosts.stdout, hosts.stderr)
        assert hosts.stdout.split()[0] == "127.0.0.1"
    # As nslookup asks: a DNS query through the pod's resolv.conf and its search path, no /etc/hosts.
    query = (
        "import dns.resolver; "
        "answer = dns.resolver.resolve('pt-debug-master-0', 'A', search=True); "
        "print(answer.canonical_name, *answer)"
    )
    result = kubectl.run("exec", "pt-debug-worker-0", "-n", NS, "--", "python", "-c", query)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [f"pt-debug-master-0.{NS}.svc.cluster.local.", "127.0.0.1"]
    missing = kubectl.run("exec", "pt-debug-worker-0", "-n", NS, "--", "getent", "hosts", "pt-debug-master-9")
    assert missing.returncode == 2  # getent's "not found"


def test_an_interactive_shell_in_a_pod(kubectl: Kubectl, jobs: None) -> None:
    args = ["exec", "-it", "pt-debug-master-0", "-n", NS, "--", "/bin/bash"]
    out = interactive(kubectl, args, "echo rank=$RANK tty=$(tty)\nexit 7\n")
    assert "rank=0 tty=/dev/" in out.text
    assert out.exit_code == 7


def test_logs_previous_shows_the_run_before_the_restart(kubectl: Kubectl, jobs: None) -> None:
    restarts = "jsonpath={.status.containerStatuses[0].restartCount}"
    eventually(lambda: kubectl("get", "pod", "restarted", "-n", NS, "-o", restarts) not in ("", "0"), timeout=90)
    result = shell(kubectl, f"kubectl logs restarted -n {NS} --previous")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "first run"


class Interaction:
    def __init__(self, text: str, exit_code: int) -> None:
        self.text, self.exit_code = text, exit_code


def interactive(kubectl: Kubectl, args: list[str], typed: str, timeout: float = 60) -> Interaction:
    """Run kubectl with a terminal of its own, type ``typed``, and collect what the terminal shows."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        ["kubectl", *args], stdin=terminal, stdout=terminal, stderr=terminal, env=kubectl.env, close_fds=True
    )
    os.close(terminal)
    seen = b""
    typed_yet = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready_fds, _, _ = select.select([controller], [], [], 0.2)
            if ready_fds:
                try:
                    chunk = os.read(controller, 4096)
                except OSError:  # the terminal closed: kubectl is gone
                    break
                if not chunk:
                    break
                seen += chunk
            if not typed_yet and (b"$ " in seen or b"# " in seen):
                os.write(controller, typed.encode())
                typed_yet = True
            if process.poll() is not None and not ready_fds:
                break
        return Interaction(seen.decode(errors="replace"), process.wait(timeout=10))
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)
