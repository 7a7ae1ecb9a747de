"""PersistentVolumeClaims, downwardAPI and projected volumes on the local node, driven with kubectl.

Claims of the default ``local-path`` class become a directory per claim when their first pod
starts; user-created PersistentVolumes bind statically; data outlives pods and goes with the claim.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"claims-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def apply(kubectl: Kubectl, ns: str, *objects: dict[str, Any]) -> None:
    for obj in objects:
        kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(obj))


def claim(name: str, **spec: Any) -> dict[str, Any]:
    body = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, **spec}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": body}


def pod(name: str, script: str, claim_name: str, *, read_only: bool = False, policy: str = "Never") -> dict[str, Any]:
    source: dict[str, Any] = {"claimName": claim_name, **({"readOnly": True} if read_only else {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": policy,
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "data", "persistentVolumeClaim": source}],
            "containers": [
                {
                    "name": "main",
                    "image": "python:3.12",
                    "command": ["python3", "-c", script],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
        },
    }


def phase(kubectl: Kubectl, ns: str, name: str) -> str:
    return kubectl("get", "pod", name, "-n", ns, "-o", "jsonpath={.status.phase}")


def finished(kubectl: Kubectl, ns: str, name: str) -> str:
    eventually(lambda: phase(kubectl, ns, name) in ("Succeeded", "Failed"), timeout=120, what=f"{name} to finish")
    assert phase(kubectl, ns, name) == "Succeeded", kubectl("describe", "pod", name, "-n", ns)
    return kubectl("logs", name, "-n", ns)


def row(kubectl: Kubectl, *args: str) -> list[str]:
    return kubectl("get", *args, "--no-headers").split()


def events(kubectl: Kubectl, ns: str, name: str) -> list[tuple[str, str]]:
    items = kubectl.json("get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name}")["items"]
    return [(e["reason"], e["message"]) for e in items]


WRITE = "import pathlib; pathlib.Path('/data/result.txt').write_text('trained weights'); print('written')"
READ = (
    "import os, pathlib; print(pathlib.Path('/data/result.txt').read_text(), "
    "'writable' if os.access('/data', os.W_OK) else 'read-only')"
)


def test_a_local_path_claim_is_provisioned_for_its_first_pod_and_outlives_it(kubectl: Kubectl, ns: str) -> None:
    assert row(kubectl, "storageclass", "local-path")[:4] == [
        "local-path",
        "(default)",
        "rancher.io/local-path",
        "Delete",
    ]
    apply(kubectl, ns, claim("data"))
    pending = kubectl.json("get", "pvc", "data", "-n", ns)
    assert pending["status"]["phase"] == "Pending"
    assert (
        eventually(
            lambda: kubectl.json("get", "pvc", "data", "-n", ns)["spec"].get("storageClassName"),
            what="the default class to be assigned",
        )
        == "local-path"
    )
    eventually(
        lambda: (
            ("WaitForFirstConsumer", "waiting for first consumer to be created before binding")
            in events(kubectl, ns, "data")
        ),
        what="the claim to wait for its first consumer",
    )
    assert kubectl.json("get", "pvc", "data", "-n", ns)["status"]["phase"] == "Pending"

    apply(kubectl, ns, pod("writer", WRITE, "data"))
    assert finished(kubectl, ns, "writer").strip() == "written"
    bound = kubectl.json("get", "pvc", "data", "-n", ns)
    volume = f"pvc-{bound['metadata']['uid']}"
    assert bound["spec"]["volumeName"] == volume and bound["status"]["phase"] == "Bound"
    assert bound["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    assert row(kubectl, "pvc", "data", "-n", ns)[:6] == ["data", "Bound", volume, "1Gi", "RWO", "local-path"]
    reasons = [reason for reason, _ in events(kubectl, ns, "data")]
    assert {"Provisioning", "ProvisioningSucceeded"} <= set(reasons)
    pv = kubectl.json("get", "pv", volume)
    directory = Path(pv["spec"]["hostPath"]["path"])
    assert (directory / "result.txt").read_text() == "trained weights"
    assert row(kubectl, "pv", volume)[:6] == [volume, "1Gi", "RWO", "Delete", "Bound", f"{ns}/data"]

    # The data survives the pod; a later pod mounting the claim read-only sees it and cannot write.
    kubectl("delete", "pod", "writer", "-n", ns)
    apply(kubectl, ns, pod("reader", READ, "data", read_only=True))
    assert finished(kubectl, ns, "reader").strip() == "trained weights read-only"

    # pvc-protection: a claim in use by a running pod stays Terminating until the pod is gone.
    apply(kubectl, ns, pod("holder", "import time; time.sleep(600)", "data"))
    eventually(lambda: phase(kubectl, ns, "holder") == "Running", what="the holder to run")
    kubectl("delete", "pvc", "data", "-n", ns, "--wait=false")
    eventually(lambda: row(kubectl, "pvc", "data", "-n", ns)[1] == "Terminating", what="the claim to be Terminating")
    assert directory.exists()
    kubectl("delete", "pod", "holder", "-n", ns)
    eventually(lambda: kubectl.run("get", "pvc", "data", "-n", ns).returncode == 1, timeout=60, what="the claim to go")
    eventually(lambda: kubectl.run("get", "pv", volume).returncode == 1, timeout=60, what="its volume to be deleted")
    assert not directory.exists()


def test_a_pod_whose_claim_is_missing_waits_then_runs(kubectl: Kubectl, ns: str) -> None:
    apply(kubectl, ns, pod("early", WRITE, "later"))
    message = (
        "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: "
        f'error processing PVC {ns}/later: failed to fetch PVC from API server: persistentvolumeclaims "later" '
        "not found"
    )
    eventually(lambda: ("FailedMount", message) in events(kubectl, ns, "early"), what="a FailedMount event")
    status = kubectl.json("get", "pod", "early", "-n", ns)["status"]
    assert status["phase"] == "Pending"
    assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
    apply(kubectl, ns, claim("later"))
    assert finished(kubectl, ns, "early").strip() == "written"


def test_a_claim_survives_container_restarts(kubectl: Kubectl, ns: str) -> None:
    # Counts its runs in the claim: fails on the first, succeeds on the second.
    script = (
        "import pathlib, sys; p = pathlib.Path('/data/runs'); n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "p.write_text(str(n)); print('run', n); sys.exit(0 if n > 1 else 1)"
    )
    apply(kubectl, ns, claim("counter"), pod("counts", script, "counter", policy="OnFailure"))
    assert finished(kubectl, ns, "counts").strip() == "run 2"


def test_a_user_volume_binds_statically_and_is_retained(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    (tmp_path / "result.txt").write_text("from the host")
    volume_name = f"manual-{ns}"
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume_name, "labels": {"set": ns}},
        "spec": {
            "capacity": {"storage": "5Gi"},
            "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
            "storageClassName": "manual",
            "hostPath": {"path": str(tmp_path)},
        },
    }
    kubectl("apply", "-f", "-", input=json.dumps(volume))
    eventually(lambda: row(kubectl, "pv", volume_name)[4] == "Available", what="the volume to be Available")
    wanted = claim("static", storageClassName="manual", selector={"matchLabels": {"set": ns}})
    apply(kubectl, ns, wanted)
    eventually(lambda: row(kubectl, "pvc", "static", "-n", ns)[1] == "Bound", what="the claim to bind")
    assert row(kubectl, "pvc", "static", "-n", ns)[2:6] == [volume_name, "5Gi", "RWO,ROX", "manual"]
    apply(kubectl, ns, pod("static-reader", READ, "static"))
    assert finished(kubectl, ns, "static-reader").strip() == "from the host writable"
    kubectl("delete", "pod", "static-reader", "-n", ns)
    kubectl("delete", "pvc", "static", "-n", ns)
    eventually(lambda: row(kubectl, "pv", volume_name)[4] == "Released", what="the volume to be Released")
    assert (tmp_path / "result.txt").exists()
    kubectl("delete", "pv", volume_name)


def test_invalid_claim_is_refused(kubectl: Kubectl, ns: str) -> None:
    result = kubectl.run("apply", "-n", ns, "-f", "-", input=json.dumps(claim("bad", accessModes=[], resources={})))
    assert result.returncode == 1
    assert "spec.accessModes: Required value: at least 1 access mode is required" in result.stderr
    assert "spec.resources[storage]: Required value" in result.stderr


SHOW = """\
import os
for root, _, files in sorted(os.walk('/etc/podinfo')):
    for f in sorted(files):
        path = os.path.join(root, f)
        print(path, oct(os.stat(path).st_mode & 0o777), repr(open(path).read()))
"""


def test_downward_api_and_projected_volumes(kubectl: Kubectl, ns: str) -> None:
    apply(
        kubectl,
        ns,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"lr": "0.1"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sec"}, "stringData": {"token": "t0k"}},
    )
    field = {"fieldRef": {"fieldPath": "metadata.labels"}}
    spec = {
        "restartPolicy": "Never",
        "volumes": [
            {
                "name": "info",
                "downwardAPI": {
                    "items": [
                        {"path": "labels", **field},
                        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 0o600},
                        {
                            "path": "cpu",
                            "resourceFieldRef": {"containerName": "main", "resource": "limits.cpu", "divisor": "1m"},
                        },
                    ]
                },
            },
            {
                "name": "all",
                "projected": {
                    "defaultMode": 0o440,
                    "sources": [
                        {"configMap": {"name": "cfg"}},
                        {"secret": {"name": "sec", "items": [{"key": "token", "path": "creds/token"}]}},
                        {
                            "downwardAPI": {
                                "items": [{"path": "team", "fieldRef": {"fieldPath": "metadata.labels['team']"}}]
                            }
                        },
                    ],
                },
            },
        ],
        "containers": [
            {
                "name": "main",
                "image": "python:3.12",
                "command": ["python3", "-c", SHOW],
                "resources": {"limits": {"cpu": "500m"}},
                "volumeMounts": [
                    {"name": "info", "mountPath": "/etc/podinfo/info"},
                    {"name": "all", "mountPath": "/etc/podinfo/all"},
                ],
            }
        ],
    }
    meta = {"name": "info", "labels": {"team": "ml", "app": "trainer"}}
    apply(kubectl, ns, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    assert finished(kubectl, ns, "info").splitlines() == [
        "/etc/podinfo/all/lr 0o440 '0.1'",
        "/etc/podinfo/all/team 0o440 'ml'",
        "/etc/podinfo/all/creds/token 0o440 't0k'",
        "/etc/podinfo/info/cpu 0o644 '500'",
        '/etc/podinfo/info/labels 0o644 \'app="trainer"\\nteam="ml"\'',
        "/etc/podinfo/info/name 0o600 'info'",
    ]
