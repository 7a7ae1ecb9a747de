"""Probes and init containers on the local node, driven with kubectl against a real ``yard up``.

The containers are real processes: a small Python HTTP server whose health the test toggles
through a file, shell commands for exec probes, a socket that opens late for tcpSocket. The
plane runs with ``--restart-backoff 0.2`` so restarts caused by failed probes happen at once.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, Kubectl, Plane, eventually, free_port, own_plane
from trainyard.api.meta import parse_time

pytestmark = pytest.mark.e2e

# Serves GET /healthz: 200 while the file $FLAG exists and the probe sent its header, else 503.
HEALTH_SERVER = """\
import http.server, os
flag = os.environ["FLAG"]
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/healthz" and os.path.exists(flag) and self.headers.get("X-Probe") == "yes"
        if self.headers.get("User-Agent", "").startswith("kube-probe/"):
            open(flag + ".seen", "w").close()
        self.send_response(200 if ok else 503)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Health).serve_forever()
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-probes", "--restart-backoff", "0.2")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"probes-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def create_pod(kubectl: Kubectl, ns: str, name: str, spec: dict[str, Any]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}
    kubectl("create", "-f", "-", input=json.dumps(pod))


def get(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = kubectl.json("get", "pod", name, "-n", ns)
    return pod


def first_container(pod: dict[str, Any]) -> dict[str, Any]:
    """The first container's status, or {} while the node has not reported one (a fresh pod)."""
    statuses = pod.get("status", {}).get("containerStatuses") or [{}]
    return dict(statuses[0])


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def events(kubectl: Kubectl, ns: str, name: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = kubectl.json(
        "get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name}"
    )["items"]
    return found


def messages(kubectl: Kubectl, ns: str, name: str, reason: str) -> list[str]:
    return [e["message"] for e in events(kubectl, ns, name) if e["reason"] == reason]


def status_column(kubectl: Kubectl, ns: str, name: str) -> tuple[str, str]:
    """kubectl get's READY and STATUS cells for one pod."""
    cells = kubectl("get", "pod", name, "-n", ns, "--no-headers").split()
    return cells[1], cells[2]


def test_readiness_http_probe_drives_the_ready_condition(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    flag, port = tmp_path / "healthy", free_port()
    probe = {
        "httpGet": {"path": "/healthz", "port": "http", "httpHeaders": [{"name": "X-Probe", "value": "yes"}]},
        "periodSeconds": 1,
        "failureThreshold": 2,
    }
    create_pod(
        kubectl,
        ns,
        "web",
        {
            "containers": [
                {
                    "name": "web",
                    "image": "python:3.12",
                    "command": ["python3", "-c", HEALTH_SERVER],
                    "env": [{"name": "FLAG", "value": str(flag)}, {"name": "PORT", "value": str(port)}],
                    "ports": [{"name": "http", "containerPort": port}],
                    "readinessProbe": probe,
                }
            ]
        },
    )
    failed = "Readiness probe failed: HTTP probe failed with statuscode: 503"
    eventually(lambda: failed in messages(kubectl, ns, "web", "Unhealthy"), what="a failed readiness probe event")
    assert Path(f"{flag}.seen").exists()  # the probe announced itself as kube-probe/...
    pod = get(kubectl, ns, "web")
    assert pod["status"]["phase"] == "Running"
    container = pod["status"]["containerStatuses"][0]
    assert container["ready"] is False and container["started"] is True and "running" in container["state"]
    assert condition(pod, "Ready")["status"] == "False"
    assert condition(pod, "ContainersReady")["message"] == "containers with unready status: [web]"
    assert status_column(kubectl, ns, "web") == ("0/1", "Running")

    flag.touch()
    kubectl("wait", "--for=condition=Ready", "pod/web", "-n", ns, "--timeout=60s")
    assert status_column(kubectl, ns, "web") == ("1/1", "Running")
    assert get(kubectl, ns, "web")["status"]["containerStatuses"][0]["ready"] is True

    flag.unlink()
    eventually(
        lambda: condition(get(kubectl, ns, "web"), "Ready").get("status") == "False",
        what="the pod to turn unready again",
    )
    # Readiness never restarts a container.
    assert get(kubectl, ns, "web")["status"]["containerStatuses"][0]["restartCount"] == 0


def test_failed_exec_liveness_probe_restarts_the_container(kubectl: Kubectl, ns: str) -> None:
    # The probe passes while /data/alive exists (in the pod's emptyDir, seen through the container's
    # mounts) and $EXPECTED (from the container's env) matches; the process removes the file after a while.
    main = (
        "import pathlib, time; p = pathlib.Path('/data/alive'); p.touch(); time.sleep(3); p.unlink(); time.sleep(600)"
    )
    liveness = {
        "exec": {"command": ["sh", "-c", 'test -f /data/alive && test "$EXPECTED" = yes || { echo gone; exit 1; }']},
        "periodSeconds": 1,
        "failureThreshold": 2,
        "terminationGracePeriodSeconds": 1,
    }
    create_pod(
        kubectl,
        ns,
        "live",
        {
            "restartPolicy": "Always",
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [
                {
                    "name": "app",
                    "image": "python:3.12",
                    "command": ["python3", "-c", main],
                    "env": [{"name": "EXPECTED", "value": "yes"}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "livenessProbe": liveness,
                }
            ],
        },
    )
    restarted = eventually(
        lambda: (c := first_container(get(kubectl, ns, "live"))).get("restartCount", 0) >= 1 and c,
        timeout=90,
        what="the container to be restarted after failing its liveness probe",
    )
    assert restarted["lastState"]["terminated"]["exitCode"] in (137, 143)
    assert "Container app failed liveness probe, will be restarted" in messages(kubectl, ns, "live", "Killing")
    assert "Liveness probe failed: gone" in messages(kubectl, ns, "live", "Unhealthy")
    # The probe passed (it saw the container's env and mount) for the 3 s the file existed.
    ran = restarted["lastState"]["terminated"]
    assert parse_time(ran["finishedAt"]) - parse_time(ran["startedAt"]) >= timedelta(seconds=3)
    assert get(kubectl, ns, "live")["status"]["phase"] == "Running"


def test_startup_probe_gates_liveness_and_kills_a_container_that_never_starts(kubectl: Kubectl, ns: str) -> None:
    closed = free_port()
    create_pod(
        kubectl,
        ns,
        "slow",
        {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "app",
                    "image": "python:3.12",
                    "command": ["python3", "-c", "import time; time.sleep(600)"],
                    "startupProbe": {"tcpSocket": {"port": closed}, "periodSeconds": 1, "failureThreshold": 3},
                    "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1},
                }
            ],
        },
    )
    running = eventually(
        lambda: (c := first_container(get(kubectl, ns, "slow"))) and "running" in c.get("state", {}) and c,
        what="the container to run",
    )
    assert running["started"] is False and running["ready"] is False
    eventually(lambda: get(kubectl, ns, "slow")["status"]["phase"] == "Failed", timeout=90, what="the pod to fail")
    assert messages(kubectl, ns, "slow", "Killing") == ["Container app failed startup probe"]
    unhealthy = messages(kubectl, ns, "slow", "Unhealthy")
    assert f"Startup probe failed: dial tcp 127.0.0.1:{closed}: connect: connection refused" in unhealthy
    assert not [m for m in unhealthy if m.startswith("Liveness")]


def test_startup_then_readiness_over_tcp(kubectl: Kubectl, ns: str) -> None:
    port = free_port()
    listen_late = (
        "import socket, time; time.sleep(2); s = socket.socket(); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        f"s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(600)"
    )
    tcp = {"tcpSocket": {"port": port}, "periodSeconds": 1}
    create_pod(
        kubectl,
        ns,
        "late",
        {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "app",
                    "image": "python:3.12",
                    "command": ["python3", "-c", listen_late],
                    "startupProbe": {**tcp, "failureThreshold": 30},
                    "readinessProbe": tcp,
                }
            ],
        },
    )
    kubectl("wait", "--for=condition=Ready", "pod/late", "-n", ns, "--timeout=60s")
    container = get(kubectl, ns, "late")["status"]["containerStatuses"][0]
    assert container["started"] is True and container["ready"] is True and container["restartCount"] == 0


INIT = "import pathlib, sys, time; time.sleep(1.5); pathlib.Path('/shared/order').open('a').write(sys.argv[1] + '\\n')"


def init_pod(policy: str, second: list[str]) -> dict[str, Any]:
    mounts = [{"name": "shared", "mountPath": "/shared"}]
    return {
        "restartPolicy": policy,
        "volumes": [{"name": "shared", "emptyDir": {}}],
        "initContainers": [
            {"name": "first", "image": "busybox", "command": ["python3", "-c", INIT, "first"], "volumeMounts": mounts},
            {"name": "second", "image": "busybox", "command": second, "volumeMounts": mounts},
        ],
        "containers": [
            {
                "name": "main",
                "image": "python:3.12",
                "command": ["python3", "-c", "print(open('/shared/order').read().split())"],
                "volumeMounts": mounts,
            }
        ],
    }


def test_init_containers_run_in_order_before_the_main_containers(kubectl: Kubectl, ns: str) -> None:
    create_pod(kubectl, ns, "inits", init_pod("Never", ["python3", "-c", INIT, "second"]))
    seen: set[str] = set()

    def finished() -> bool:
        seen.add(status_column(kubectl, ns, "inits")[1])
        return get(kubectl, ns, "inits")["status"]["phase"] in ("Succeeded", "Failed")

    eventually(finished, timeout=120, interval=0.1, what="the pod to finish")
    assert {"Init:0/2", "Init:1/2"} <= seen, seen
    pod = get(kubectl, ns, "inits")
    assert pod["status"]["phase"] == "Succeeded", kubectl("describe", "pod", "inits", "-n", ns)
    assert kubectl("logs", "inits", "-n", ns, "-c", "main").strip() == "['first', 'second']"
    inits = pod["status"]["initContainerStatuses"]
    assert [(s["name"], s["state"]["terminated"]["reason"], s["ready"]) for s in inits] == [
        ("first", "Completed", True),
        ("second", "Completed", True),
    ]
    assert condition(pod, "Initialized")["status"] == "True"
    assert status_column(kubectl, ns, "inits")[1] == "Completed"


def test_main_containers_wait_in_pod_initializing(kubectl: Kubectl, ns: str) -> None:
    create_pod(kubectl, ns, "waits", init_pod("Never", ["python3", "-c", "import time; time.sleep(600)"]))

    def second_running() -> dict[str, Any] | None:
        pod = get(kubectl, ns, "waits")
        inits = pod["status"].get("initContainerStatuses") or [{}, {}]
        return pod if "running" in (inits[1].get("state") or {}) else None

    pod = eventually(second_running, timeout=60, what="the second init container to run")
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "PodInitializing"
    initialized = condition(pod, "Initialized")
    assert initialized["status"] == "False" and initialized["reason"] == "ContainersNotInitialized"
    assert initialized["message"] == "containers with incomplete status: [second]"
    assert status_column(kubectl, ns, "waits") == ("0/1", "Init:1/2")


def test_failed_init_container_fails_a_never_restarting_pod(kubectl: Kubectl, ns: str) -> None:
    create_pod(kubectl, ns, "broken", init_pod("Never", ["python3", "-c", "raise SystemExit(4)"]))
    eventually(lambda: get(kubectl, ns, "broken")["status"]["phase"] == "Failed", timeout=60, what="the pod to fail")
    pod = get(kubectl, ns, "broken")
    second = pod["status"]["initContainerStatuses"][1]
    assert second["state"]["terminated"]["exitCode"] == 4 and second["restartCount"] == 0
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "PodInitializing"
    assert status_column(kubectl, ns, "broken") == ("0/1", "Init:Error")


def test_failed_init_container_is_retried_under_on_failure(kubectl: Kubectl, ns: str) -> None:
    fail_once = (
        "import os, sys, pathlib; m = pathlib.Path('/shared/tried')\n"
        "if not m.exists(): m.touch(); sys.exit(1)\n"
        "pathlib.Path('/shared/order').open('a').write('second\\n')"
    )
    create_pod(kubectl, ns, "retried", init_pod("OnFailure", ["python3", "-c", fail_once]))
    eventually(
        lambda: get(kubectl, ns, "retried")["status"]["phase"] in ("Succeeded", "Failed"),
        timeout=120,
        what="the pod to finish",
    )
    pod = get(kubectl, ns, "retried")
    assert pod["status"]["phase"] == "Succeeded"
    assert pod["status"]["initContainerStatuses"][1]["restartCount"] == 1
    assert kubectl("logs", "retried", "-n", ns, "-c", "main").strip() == "['first', 'second']"


def test_grpc_readiness_probe(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    flag, port = tmp_path / "serving", free_port()
    server = str(REPO / "tests" / "grpc_health_server.py")
    create_pod(
        kubectl,
        ns,
        "rpc",
        {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "rpc",
                    "image": "python:3.12",
                    "command": ["python3", server, str(port), str(flag)],
                    "readinessProbe": {"grpc": {"port": port, "service": "trainer"}, "periodSeconds": 1},
                }
            ],
        },
    )
    unhealthy = 'Readiness probe failed: service unhealthy (responded with "NOT_SERVING")'
    eventually(lambda: unhealthy in messages(kubectl, ns, "rpc", "Unhealthy"), what="a NOT_SERVING probe event")
    assert status_column(kubectl, ns, "rpc") == ("0/1", "Running")
    flag.touch()
    kubectl("wait", "--for=condition=Ready", "pod/rpc", "-n", ns, "--timeout=60s")
