"""Container environments on the local node, driven with kubectl: what a process sees is what a kubelet gives it."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually
from trainyard.cluster import paths
from trainyard.cluster.paths import Layout

pytestmark = pytest.mark.e2e

PRINT_ENV = "import json, os; print(json.dumps(dict(os.environ)))"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    for obj in objects:
        kubectl("apply", "-f", "-", input=json.dumps(obj))


def pod(name: str, container: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "env-test"}, "annotations": {"team": "ml"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "python:3.12", "command": ["python3", "-c", PRINT_ENV], **container}
            ],
        },
    }


def phase(kubectl: Kubectl, name: str) -> str:
    return kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}")


def printed_env(kubectl: Kubectl, name: str) -> dict[str, str]:
    eventually(lambda: phase(kubectl, name) in ("Succeeded", "Failed"), timeout=120, what=f"pod {name} to finish")
    assert phase(kubectl, name) == "Succeeded", kubectl("describe", "pod", name)
    env: dict[str, str] = json.loads(kubectl("logs", name).strip().splitlines()[-1])
    return env


def test_value_from_and_env_from_reach_the_process(kubectl: Kubectl) -> None:
    apply(
        kubectl,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hp"}, "data": {"lr": "0.01", "EPOCHS": "3"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}},
    )
    field_paths = {
        "POD_NAME": "metadata.name",
        "POD_NS": "metadata.namespace",
        "POD_UID": "metadata.uid",
        "APP": "metadata.labels['app']",
        "TEAM": "metadata.annotations['team']",
        "NODE": "spec.nodeName",
        "POD_IP": "status.podIP",
    }
    container = {
        "resources": {"limits": {"memory": "512Mi", "cpu": "2"}},
        "envFrom": [{"configMapRef": {"name": "hp"}, "prefix": "HP_"}],
        "env": [
            *({"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in field_paths.items()),
            {"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "hp", "key": "lr"}}},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
            {"name": "MAYBE", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k", "optional": True}}},
            {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
            {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {"name": "RUN", "value": "lr=$(LR) epochs=$(HP_EPOCHS) on $(NODE)"},
        ],
    }
    apply(kubectl, pod("env-pod", container))
    env = printed_env(kubectl, "env-pod")
    created = kubectl.json("get", "pod", "env-pod")
    node = created["spec"]["nodeName"]
    assert env["POD_NAME"] == "env-pod" and env["POD_NS"] == "default"
    assert env["POD_UID"] == created["metadata"]["uid"]
    assert (env["APP"], env["TEAM"], env["NODE"], env["POD_IP"]) == ("env-test", "ml", node, created["status"]["podIP"])
    assert (env["LR"], env["TOKEN"], env["HP_lr"], env["HP_EPOCHS"]) == ("0.01", "s3cret", "0.01", "3")
    assert "MAYBE" not in env
    assert (env["MEM_MI"], env["CPUS"]) == ("512", "2")
    assert env["RUN"] == f"lr=0.01 epochs=3 on {node}"


def test_missing_config_map_waits_with_the_kubelet_reason_then_runs(kubectl: Kubectl) -> None:
    container = {"env": [{"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "lr"}}}]}
    apply(kubectl, pod("waits", container))

    def waiting() -> dict[str, Any] | None:
        statuses = kubectl.json("get", "pod", "waits").get("status", {}).get("containerStatuses") or [{}]
        state: dict[str, Any] | None = statuses[0].get("state", {}).get("waiting")
        return state if state and state.get("reason") == "CreateContainerConfigError" else None

    state = eventually(waiting, timeout=60, what="the container to wait on its ConfigMap")
    assert state["message"] == 'configmap "later" not found'
    assert phase(kubectl, "waits") == "Pending"
    events = kubectl("get", "events", "--field-selector", "involvedObject.name=waits")
    assert 'Error: configmap "later" not found' in events

    apply(kubectl, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "later"}, "data": {"other": "x"}})
    eventually(
        lambda: (waiting() or {}).get("message") == "couldn't find key lr in ConfigMap default/later",
        timeout=60,
        what="the message to name the missing key",
    )
    kubectl("patch", "configmap", "later", "--type=merge", "-p", '{"data": {"lr": "0.5"}}')
    assert printed_env(kubectl, "waits")["LR"] == "0.5"


def test_thread_counts_follow_the_cpu_share_unless_the_container_sets_them(kubectl: Kubectl) -> None:
    apply(
        kubectl,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "blas"}, "data": {"MKL_NUM_THREADS": "5"}},
    )
    threaded = pod("threads", {})
    main = threaded["spec"]["containers"][0]
    threaded["spec"]["containers"] = [
        # Small requests: the pod fits beside the other tests' pods on a 2-core node.
        {**main, "name": "limited", "resources": {"limits": {"cpu": "1500m"}, "requests": {"cpu": "100m"}}},
        {**main, "name": "own", "env": [{"name": "OMP_NUM_THREADS", "value": "3"}]},
        {
            **main,
            "name": "requested",
            "resources": {"requests": {"cpu": "100m"}},
            "envFrom": [{"configMapRef": {"name": "blas"}}],
        },
    ]
    apply(kubectl, threaded)
    eventually(lambda: phase(kubectl, "threads") in ("Succeeded", "Failed"), timeout=120, what="pod threads to finish")
    assert phase(kubectl, "threads") == "Succeeded", kubectl("describe", "pod", "threads")

    def seen(container: str) -> dict[str, str]:
        env = json.loads(kubectl("logs", "threads", "-c", container).strip().splitlines()[-1])
        return {k: v for k, v in env.items() if k.endswith("_THREADS")}

    assert seen("limited") == dict.fromkeys(THREAD_VARIABLES, "2")  # the limit, 1500m, rounded up
    # The container's own wins; MKL and OpenBLAS fall back on it, so the node leaves theirs unset.
    own = seen("own")
    assert own.pop("OMP_NUM_THREADS") == "3" and list(own) == ["TF_NUM_INTRAOP_THREADS"], own
    assert int(own["TF_NUM_INTRAOP_THREADS"]) >= 1  # the node's cores among the pods it runs now
    assert seen("requested") == {**dict.fromkeys(THREAD_VARIABLES, "1"), "MKL_NUM_THREADS": "5"}  # from envFrom

    said = [
        "Set OMP_NUM_THREADS=2 (and MKL_NUM_THREADS, OPENBLAS_NUM_THREADS, TF_NUM_INTRAOP_THREADS) in container "
        "limited: its cpu limit 1500m, rounded up",
        f"Set TF_NUM_INTRAOP_THREADS={own['TF_NUM_INTRAOP_THREADS']} in container own: no cpu limit or request, "
        "the node's ",
        "Set OMP_NUM_THREADS=1 (and OPENBLAS_NUM_THREADS, TF_NUM_INTRAOP_THREADS) in container requested: its cpu "
        "request 100m (no limit), rounded up; MKL_NUM_THREADS is the container's own",
    ]
    described = eventually(
        lambda: all(s in (text := kubectl("describe", "pod", "threads")) for s in said) and text,
        timeout=30,
        what="kubectl describe pod to show the ThreadsSet events",
    )
    assert re.search(r"Normal\s+ThreadsSet\s+.*\s+kubelet\s+Set OMP_NUM_THREADS=2 ", described), described


TRAIN_PY = """\
import os, pathlib, stat
print("train.py from the ConfigMap, rank", os.environ.get("RANK", "-"), "in", os.getcwd())
secret = pathlib.Path("/etc/creds/token")
print("secret", secret.read_text(), oct(stat.S_IMODE(secret.stat().st_mode)))
print("listing", sorted(os.listdir("/etc/creds")))
pathlib.Path("/scratch/out.txt").write_text("written in the pod")
print("scratch", pathlib.Path("/scratch/out.txt").read_text())
print("host", pathlib.Path("/host/marker").read_text())
"""


def script_objects(host_dir: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The seed 001 pattern: a training script in a ConfigMap mounted at /app, plus a Secret, emptyDir and hostPath."""
    objects = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "script"}, "data": {"train.py": TRAIN_PY}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "vol-creds"},
            "stringData": {"password": "pw", "other": "unlisted"},
        },
    ]
    spec = {
        "restartPolicy": "Never",
        "volumes": [
            {"name": "app", "configMap": {"name": "script"}},
            {
                "name": "creds",
                "secret": {
                    "secretName": "vol-creds",
                    "defaultMode": 0o400,
                    "items": [{"key": "password", "path": "token"}],
                },
            },
            {"name": "scratch", "emptyDir": {}},
            {"name": "host", "hostPath": {"path": host_dir, "type": "Directory"}},
        ],
        "containers": [
            {
                "name": "main",
                "image": "python:3.12",
                "command": ["python3", "/app/train.py"],
                "workingDir": "/app",
                "volumeMounts": [
                    {"name": "app", "mountPath": "/app"},
                    {"name": "creds", "mountPath": "/etc/creds", "readOnly": True},
                    {"name": "scratch", "mountPath": "/scratch"},
                    {"name": "host", "mountPath": "/host"},
                ],
            }
        ],
    }
    return objects, spec


def test_config_map_script_mounted_at_app_runs_with_its_volumes(kubectl: Kubectl, plane: Plane, tmp_path: Path) -> None:
    (tmp_path / "marker").write_text("from the host")
    objects, spec = script_objects(str(tmp_path))
    apply(kubectl, *objects, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "script-pod"}, "spec": spec})
    eventually(lambda: phase(kubectl, "script-pod") in ("Succeeded", "Failed"), timeout=120, what="the pod to finish")
    logs = kubectl("logs", "script-pod")
    assert phase(kubectl, "script-pod") == "Succeeded", logs
    assert "train.py from the ConfigMap, rank - in /app" in logs
    assert "secret pw 0o400" in logs and "listing ['token']" in logs
    assert "scratch written in the pod" in logs and "host from the host" in logs
    # The mounts are private to the pod: nothing appears at /app on the host.
    assert not Path("/app/train.py").exists()
    # As on a kubelet's tmpfs: the secret never reached the home's disk (its emptyDir did).
    uid = kubectl("get", "pod", "script-pod", "-o", "jsonpath={.metadata.uid}")
    volumes = Layout(plane.home).pod_dir("default", "script-pod", uid) / "volumes"
    assert sorted(p.name for p in volumes.iterdir()) == ["scratch"]


def test_pytorchjob_runs_a_script_from_a_config_map(kubectl: Kubectl, tmp_path: Path) -> None:
    (tmp_path / "marker").write_text("job host")
    objects, spec = script_objects(str(tmp_path))
    spec.pop("restartPolicy")
    spec["containers"][0]["name"] = "pytorch"
    replica = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": spec}}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "cm-script"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": replica}},
    }
    apply(kubectl, *objects, job)

    def logs() -> str:
        result = kubectl.run("logs", "cm-script-worker-0")
        return result.stdout if result.returncode == 0 else ""

    assert "train.py from the ConfigMap, rank 1 in /app" in eventually(
        lambda: "rank 1" in logs() and logs(), timeout=180, what="the worker to print from the mounted script"
    )
    master = eventually(
        lambda: (r := kubectl.run("logs", "cm-script-master-0")).returncode == 0 and "rank 0" in r.stdout and r.stdout,
        timeout=180,
        what="the master to print from the mounted script",
    )
    assert "host job host" in master


def test_volume_of_a_missing_config_map_waits_then_mounts(kubectl: Kubectl) -> None:
    spec = {
        "restartPolicy": "Never",
        "volumes": [
            {"name": "app", "configMap": {"name": "late-script", "items": [{"key": "run.py", "path": "r.py"}]}}
        ],
        "containers": [
            {
                "name": "main",
                "image": "python:3.12",
                "command": ["python3", "/opt/code/r.py"],
                "volumeMounts": [{"name": "app", "mountPath": "/opt/code", "readOnly": True}],
            }
        ],
    }
    apply(kubectl, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mount-waits"}, "spec": spec})
    message = 'MountVolume.SetUp failed for volume "app" : configmap "late-script" not found'
    eventually(
        lambda: message in kubectl("get", "events", "--field-selector", "involvedObject.name=mount-waits"),
        timeout=60,
        what="a FailedMount event",
    )
    events = kubectl.json("get", "events", "--field-selector", "involvedObject.name=mount-waits")["items"]
    assert any(e["reason"] == "FailedMount" and e["type"] == "Warning" for e in events)
    status = kubectl.json("get", "pod", "mount-waits")["status"]
    assert status["phase"] == "Pending"
    assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"

    late = {"run.py": "import os; print('late script ran, read-only:', not os.access('/opt/code', os.W_OK))"}
    apply(kubectl, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late-script"}, "data": late})
    eventually(lambda: phase(kubectl, "mount-waits") == "Succeeded", timeout=120, what="the pod to run once mounted")
    assert "late script ran, read-only: True" in kubectl("logs", "mount-waits")


def test_mounts_under_missing_host_directories_change_nothing_on_the_host(kubectl: Kubectl, plane: Plane) -> None:
    # As Kubeflow Trainer's MPI runtimes mount their SSH secret at /home/mpiuser/.ssh and the hostfile at
    # /etc/mpi: the directories exist in the pod only, and so does what it writes beside them.
    fresh = f"yard-{uuid.uuid4().hex[:10]}"
    home, etc = Path("/home") / fresh, Path("/etc") / fresh
    apply(
        kubectl,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "fresh-ssh"}, "stringData": {"id_rsa": "k3y"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fresh-mpi"}, "data": {"hostfile": "w-0"}},
    )
    script = (
        f"set -e; echo key $(cat {home}/.ssh/id_rsa) hostfile $(cat {etc}/cfg/hostfile); "
        f"echo from-the-pod > {home}/train.py; "
        f'echo exec sees $("$OMPI_MCA_plm_rsh_agent" mounts-fresh cat {home}/train.py); sleep 600'
    )
    spec = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "volumes": [
            {"name": "ssh", "secret": {"secretName": "fresh-ssh", "defaultMode": 0o600}},
            {"name": "mpi", "configMap": {"name": "fresh-mpi"}},
        ],
        "containers": [
            {
                "name": "main",
                "image": "python:3.12",
                "command": ["sh", "-c", script],
                "volumeMounts": [
                    {"name": "ssh", "mountPath": f"{home}/.ssh", "readOnly": True},
                    {"name": "mpi", "mountPath": f"{etc}/cfg"},
                ],
                # An exec probe runs in the container's own mount namespace too.
                "readinessProbe": {"exec": {"command": ["test", "-f", f"{home}/train.py"]}, "periodSeconds": 1},
            }
        ],
    }
    apply(kubectl, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mounts-fresh"}, "spec": spec})
    try:
        logs = eventually(
            lambda: "exec sees" in (out := kubectl.run("logs", "mounts-fresh").stdout) and out,
            timeout=120,
            what="the pod to read its mounts and exec into itself",
        )
        assert "key k3y hostfile w-0" in logs and "exec sees from-the-pod" in logs, logs
        kubectl("wait", "--for=condition=Ready", "pod/mounts-fresh", "--timeout=60s")
        assert not home.exists() and not etc.exists()
        # The secret and config map live in memory (a kubelet's tmpfs) while the pod runs...
        uid = kubectl("get", "pod", "mounts-fresh", "-o", "jsonpath={.metadata.uid}")
        node = kubectl("get", "pod", "mounts-fresh", "-o", "jsonpath={.spec.nodeName}")
        memory = paths.memory_root(Layout(plane.home)) / node / f"default_mounts-fresh_{uid}"
        assert (memory / "ssh" / "id_rsa").read_text() == "k3y" and (memory / "mpi" / "hostfile").exists()
    finally:
        kubectl("delete", "pod", "mounts-fresh", "--wait=true", "--timeout=60s")
    assert not home.exists() and not etc.exists()
    assert not memory.exists()  # ...and go with it
