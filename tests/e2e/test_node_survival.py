"""Training processes outlive a SIGKILLed control plane, and the next ``yard up`` takes them over.

Each container runs under its own shim process, so killing the plane (``kill -9`` of the pid in
``$TRAINYARD_HOME/plane.json``) leaves it running and logging. The restarted node agent adopts
what still runs (same process, same log, restart policy still applied) and reports what ended
while it was away with the exit status its shim recorded. The plane here is this module's own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

# Ticks until the file $GO exists, then exits with the code written in it (0 on a second run).
WAIT_FOR_GO = """
import os, pathlib, sys, time
go = pathlib.Path(os.environ["GO"])
ran = pathlib.Path(os.environ["GO"] + ".ran")
print(f"pid {os.getpid()}", flush=True)
n = 0
while not go.exists():
    print(f"tick {n}", flush=True)
    n += 1
    time.sleep(0.2)
code = 0 if ran.exists() else int(go.read_text() or 0)
ran.touch()
print(f"done {code}", flush=True)
sys.exit(code)
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-survival", "--restart-backoff", "0.2")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def kill_plane(plane: Plane) -> None:
    pid = json.loads((plane.home / "plane.json").read_text())["pid"]
    os.kill(pid, signal.SIGKILL)
    eventually(lambda: not alive(pid), what="the control plane to die")


def restart_plane(plane: Plane) -> None:
    plane.yard("up", "--port", str(plane.port), "--workspace", str(REPO), "--restart-backoff", "0.2")


def waiting_pod(name: str, go: Path, policy: str, *, init: Path | None = None) -> dict[str, Any]:
    container = {
        "name": "c",
        "image": "python:3.11",
        "command": ["python3", "-c", WAIT_FOR_GO],
        "env": [{"name": "GO", "value": str(go)}],
    }
    spec: dict[str, Any] = {"restartPolicy": policy, "terminationGracePeriodSeconds": 2, "containers": [container]}
    if init is not None:
        spec["initContainers"] = [{**container, "name": "init", "env": [{"name": "GO", "value": str(init)}]}]
        spec["containers"] = [{"name": "c", "image": "python:3.11", "command": ["python3", "-c", "print('main ran')"]}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def create(kubectl: Kubectl, ns: str, pod: dict[str, Any]) -> str:
    created = json.loads(kubectl("create", "-n", ns, "-f", "-", "-o", "json", input=json.dumps(pod)))
    return str(created["metadata"]["uid"])


def status(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    pod = kubectl.json("get", "pod", name, "-n", ns)
    result: dict[str, Any] = pod.get("status") or {}
    return result


def container(kubectl: Kubectl, ns: str, name: str, field: str = "containerStatuses") -> dict[str, Any]:
    found: dict[str, Any] = (status(kubectl, ns, name).get(field) or [{}])[0]
    return found


def state_file(plane: Plane, ns: str, name: str, uid: str, container: str = "c") -> dict[str, Any]:
    path = plane.home / "pods" / f"{ns}_{name}_{uid}" / "state" / f"{container}.json"
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return data


def log_file(plane: Plane, ns: str, name: str, uid: str) -> str:
    path = plane.home / "pods" / f"{ns}_{name}_{uid}" / "logs" / "c.log"
    return path.read_text() if path.exists() else ""


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"survival-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def test_training_survives_a_killed_plane_and_is_adopted(
    plane: Plane, kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    uid = create(kubectl, ns, waiting_pod("trainer", go, "OnFailure"))
    running = eventually(
        lambda: (c := container(kubectl, ns, "trainer")).get("state", {}).get("running") and c,
        what="the pod to run",
    )
    pid = eventually(lambda: state_file(plane, ns, "trainer", uid).get("pid"), what="the container's pid")
    assert f"pid {pid}" in eventually(lambda: log_file(plane, ns, "trainer", uid), what="the first log lines")

    kill_plane(plane)
    assert alive(pid), "the training process died with the control plane"
    before = log_file(plane, ns, "trainer", uid).count("tick")
    eventually(
        lambda: log_file(plane, ns, "trainer", uid).count("tick") > before + 2,
        what="the process to keep logging while the plane is down",
    )

    restart_plane(plane)
    assert alive(pid)
    adopted = container(kubectl, ns, "trainer")
    assert status(kubectl, ns, "trainer")["phase"] == "Running"
    assert adopted["restartCount"] == 0 and adopted["state"]["running"] == running["state"]["running"]
    follow = subprocess.Popen(
        ["kubectl", "logs", "-f", "trainer", "-n", ns],
        env=kubectl.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(
            lambda: log_file(plane, ns, "trainer", uid).count("tick") > before + 10,
            what="more log lines after the restart",
        )
        go.write_text("0")
        out, err = follow.communicate(timeout=120)
    finally:
        follow.kill()
    assert follow.returncode == 0, err
    ticks = [int(line.split()[1]) for line in out.splitlines() if line.startswith("tick ")]
    assert ticks == list(range(len(ticks))) and len(ticks) > before + 10
    assert out.splitlines()[0] == f"pid {pid}" and out.splitlines()[-1] == "done 0"
    eventually(lambda: status(kubectl, ns, "trainer").get("phase") in ("Succeeded", "Failed"), what="the pod to finish")
    assert status(kubectl, ns, "trainer")["phase"] == "Succeeded"
    done = container(kubectl, ns, "trainer")
    assert done["restartCount"] == 0 and done["state"]["terminated"]["exitCode"] == 0
    assert done["state"]["terminated"]["reason"] == "Completed"
    assert not alive(pid)


def test_exits_while_the_plane_is_down_are_reported_with_their_real_status(
    plane: Plane, kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    go = {name: tmp_path / name for name in ("never0", "never3", "retry", "lost", "lost-go", "init")}
    pods = {
        "never0": waiting_pod("never0", go["never0"], "Never"),
        "never3": waiting_pod("never3", go["never3"], "Never"),
        "retry": waiting_pod("retry", go["retry"], "OnFailure"),
        "lost": waiting_pod("lost", go["lost-go"], "OnFailure"),
        # Its init container still runs when the plane dies: the pod is Pending, its start half done.
        "init": waiting_pod("init", go["never0"], "Never", init=go["init"]),
    }
    uids = {name: create(kubectl, ns, pod) for name, pod in pods.items()}
    for name in ("never0", "never3", "retry", "lost"):
        eventually(lambda n=name: "running" in container(kubectl, ns, n).get("state", {}), what=f"{name} to run")
    eventually(
        lambda: "running" in container(kubectl, ns, "init", "initContainerStatuses").get("state", {}),
        what="the init container to run",
    )
    assert status(kubectl, ns, "init")["phase"] == "Pending"
    lost = state_file(plane, ns, "lost", uids["lost"])

    kill_plane(plane)
    go["never0"].write_text("0")
    go["never3"].write_text("3")
    go["retry"].write_text("3")
    go["init"].write_text("0")
    # The lost pod's shim and process die without anyone recording how.
    os.kill(lost["shimPid"], signal.SIGKILL)
    os.killpg(lost["pgid"], signal.SIGKILL)
    for name in ("never0", "never3", "retry"):
        eventually(lambda n=name: "exit" in state_file(plane, ns, n, uids[n]), what=f"{name} to exit")
    eventually(lambda: "exit" in state_file(plane, ns, "init", uids["init"], "init"), what="the init container to exit")
    recorded = state_file(plane, ns, "never3", uids["never3"])["exit"]
    assert recorded["exitCode"] == 3 and recorded["reason"] == "Error"

    restart_plane(plane)

    def finished(name: str) -> dict[str, Any] | None:
        s = status(kubectl, ns, name)
        return s if s.get("phase") in ("Succeeded", "Failed") else None

    never0 = eventually(lambda: finished("never0"), what="never0 to finish")
    assert never0["phase"] == "Succeeded"
    assert never0["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    never3 = eventually(lambda: finished("never3"), what="never3 to finish")
    assert never3["phase"] == "Failed"
    terminated = never3["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3 and terminated["reason"] == "Error" and terminated["finishedAt"]

    # OnFailure: restarted in place after the exit it missed, and the second run succeeds.
    retry = eventually(lambda: finished("retry"), what="retry to finish")
    assert retry["phase"] == "Succeeded"
    assert retry["containerStatuses"][0]["restartCount"] == 1
    assert retry["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 3
    assert "done 3" in kubectl("logs", "retry", "-n", ns, "--previous")

    # Nothing was recorded: reported like a kubelet's lost container, then restarted per policy.
    restarted = eventually(
        lambda: (c := container(kubectl, ns, "lost")).get("restartCount") == 1 and "running" in c["state"] and c,
        what="the lost container to be restarted",
    )
    last = restarted["lastState"]["terminated"]
    assert last["exitCode"] == 137 and last["reason"] == "ContainerStatusUnknown"
    assert "could not be located" in last["message"]
    go["lost-go"].write_text("0")
    assert eventually(lambda: finished("lost"), what="lost to finish")["phase"] == "Succeeded"

    # The Pending pod picks up where it was: init done (exit 0 recorded), main container runs.
    init = eventually(lambda: finished("init"), what="the init pod to finish")
    assert init["phase"] == "Succeeded"
    assert init["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert init["initContainerStatuses"][0]["restartCount"] == 0
    assert kubectl("logs", "init", "-n", ns, "-c", "c").strip() == "main ran"


def test_yard_down_after_a_kill_stops_what_was_left_running(
    plane: Plane, kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    uid = create(kubectl, ns, waiting_pod("orphan", tmp_path / "go", "Always"))
    pid = eventually(lambda: state_file(plane, ns, "orphan", uid).get("pid"), what="the container's pid")
    eventually(lambda: "running" in container(kubectl, ns, "orphan").get("state", {}), what="the pod to run")
    kill_plane(plane)
    assert alive(pid)
    down = plane.yard("down")
    assert "container(s) left running by a control plane that was killed" in down.stdout
    assert not alive(pid)
    restart_plane(plane)
    # Always: the agent finds the exit `yard down` caused and restarts the container in place.
    restarted = eventually(
        lambda: (c := container(kubectl, ns, "orphan")).get("restartCount", 0) >= 1 and "running" in c["state"] and c,
        what="the container to be restarted",
    )
    assert restarted["lastState"]["terminated"]["exitCode"] == 143
    assert status(kubectl, ns, "orphan")["phase"] == "Running"


def test_a_deletion_the_killed_plane_did_not_finish_is_finished_after_restart(
    plane: Plane, kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    # Ignores SIGTERM, so the stop outlasts the plane: the next agent must finish it (SIGKILL after the grace).
    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + WAIT_FOR_GO
    pod = waiting_pod("stubborn", tmp_path / "go", "Always")
    pod["spec"]["terminationGracePeriodSeconds"] = 3
    pod["spec"]["containers"][0]["command"] = ["python3", "-c", stubborn]
    uid = create(kubectl, ns, pod)
    pid = eventually(lambda: state_file(plane, ns, "stubborn", uid).get("pid"), what="the container's pid")
    eventually(lambda: "running" in container(kubectl, ns, "stubborn").get("state", {}), what="the pod to run")
    kubectl("delete", "pod", "stubborn", "-n", ns, "--wait=false")
    kill_plane(plane)
    assert alive(pid)
    restart_plane(plane)
    eventually(lambda: kubectl.run("get", "pod", "stubborn", "-n", ns).returncode != 0, what="the pod to be gone")
    assert not alive(pid)
    assert state_file(plane, ns, "stubborn", uid)["exit"]["exitCode"] == 137


def test_an_adopted_container_is_probed_again(plane: Plane, kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    ready.touch()
    pod = waiting_pod("probed", tmp_path / "go", "Never")
    pod["spec"]["containers"][0]["readinessProbe"] = {
        "exec": {"command": ["test", "-e", str(ready)]},
        "periodSeconds": 1,
    }

    def is_ready() -> bool:
        return bool(container(kubectl, ns, "probed").get("ready"))

    create(kubectl, ns, pod)
    eventually(is_ready, what="the readiness probe to pass")
    kill_plane(plane)
    restart_plane(plane)
    # Probes of the adopted container run again: taking the file away makes it unready.
    eventually(is_ready, what="the adopted container to be ready again")
    ready.unlink()
    eventually(lambda: not is_ready(), what="the adopted container's readiness probe to fail")
    conditions = {c["type"]: c["status"] for c in status(kubectl, ns, "probed")["conditions"]}
    assert conditions["Ready"] == "False" and status(kubectl, ns, "probed")["phase"] == "Running"
    (tmp_path / "go").write_text("0")
