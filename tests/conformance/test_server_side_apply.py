"""Server-side apply through real clients: ``kubectl apply --server-side`` and lightkube's ``apply``.

Field ownership is what makes SSA more than a merge: a manager's removed fields disappear,
fields owned by another manager conflict (409) unless forced, and an object first managed by
client-side apply migrates to server-side apply without losing or duplicating anything.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap

from conftest import Kubectl, Plane

pytestmark = pytest.mark.e2e

NS = "ssa"


@pytest.fixture(scope="module", autouse=True)
def namespace(kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))


def configmap(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> str:
    meta: dict[str, object] = {"name": name, "namespace": NS}
    if labels:
        meta["labels"] = labels
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})


def managers(kubectl: Kubectl, *target: str) -> dict[tuple[str, str], dict]:
    obj = kubectl.json("get", *target, "-n", NS, "--show-managed-fields")
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def test_apply_creates_updates_and_removes_unapplied_fields(kubectl: Kubectl) -> None:
    out = kubectl("apply", "--server-side", "-f", "-", input=configmap("one", {"a": "1", "b": "2"}, {"app": "x"}))
    assert "configmap/one serverside-applied" in out
    assert managers(kubectl, "cm", "one")[("kubectl", "Apply")] == {
        "f:data": {"f:a": {}, "f:b": {}},
        "f:metadata": {"f:labels": {"f:app": {}}},
    }
    kubectl("apply", "--server-side", "-f", "-", input=configmap("one", {"a": "1"}))
    obj = kubectl.json("get", "cm", "one", "-n", NS)
    assert obj["data"] == {"a": "1"}
    assert "labels" not in obj["metadata"]
    # managedFields are there but hidden by default, as on a real cluster.
    assert "managedFields" not in obj["metadata"]


def test_a_field_changed_by_another_manager_conflicts_until_forced(kubectl: Kubectl) -> None:
    kubectl("apply", "--server-side", "-f", "-", input=configmap("two", {"a": "1"}))
    kubectl("patch", "cm", "two", "-n", NS, "-p", '{"data":{"a":"9"}}')
    assert managers(kubectl, "cm", "two")[("kubectl-patch", "Update")] == {"f:data": {"f:a": {}}}
    failed = kubectl.run("apply", "--server-side", "-f", "-", input=configmap("two", {"a": "1"}))
    assert failed.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: .data.a' in failed.stderr
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=configmap("two", {"a": "1"}))
    assert kubectl.json("get", "cm", "two", "-n", NS)["data"] == {"a": "1"}
    assert ("kubectl-patch", "Update") not in managers(kubectl, "cm", "two")


def test_an_unchanged_apply_writes_nothing(kubectl: Kubectl) -> None:
    kubectl("apply", "--server-side", "-f", "-", input=configmap("three", {"a": "1"}))
    before = kubectl.json("get", "cm", "three", "-n", NS)["metadata"]["resourceVersion"]
    kubectl("apply", "--server-side", "-f", "-", input=configmap("three", {"a": "1"}))
    assert kubectl.json("get", "cm", "three", "-n", NS)["metadata"]["resourceVersion"] == before


def test_client_side_apply_migrates_to_server_side_apply(kubectl: Kubectl) -> None:
    manifest = textwrap.dedent(
        f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: migrate, namespace: {NS}}}
        spec:
          restartPolicy: Never
          containers:
          - name: c
            image: busybox
            command: ["sleep", "600"]
            env: [{{name: ONE, value: "1"}}, {{name: TWO, value: "2"}}]
        """
    )
    kubectl("apply", "-f", "-", input=manifest)
    assert ("kubectl-client-side-apply", "Update") in managers(kubectl, "pod", "migrate")
    kubectl("apply", "--server-side", "-f", "-", input=manifest.replace("image: busybox", "image: busybox:1.37"))
    owners = managers(kubectl, "pod", "migrate")
    assert ("kubectl-client-side-apply", "Update") not in owners
    env = owners[("kubectl", "Apply")]["f:spec"]["f:containers"]['k:{"name":"c"}']["f:env"]
    assert set(env) == {'k:{"name":"ONE"}', 'k:{"name":"TWO"}'}
    pod = kubectl.json("get", "pod", "migrate", "-n", NS)
    assert pod["spec"]["containers"][0]["image"] == "busybox:1.37"
    assert pod["spec"]["containers"][0]["env"] == [{"name": "ONE", "value": "1"}, {"name": "TWO", "value": "2"}]
    kubectl("delete", "pod", "migrate", "-n", NS, "--grace-period=0", "--force")


def test_dry_run_apply_persists_nothing(kubectl: Kubectl) -> None:
    out = kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=configmap("dry", {"a": "1"}))
    assert "serverside-applied (server dry run)" in out
    assert kubectl.run("get", "cm", "dry", "-n", NS).returncode == 1


def test_lightkube_apply_creates_and_updates_custom_resources(plane: Plane, kubectl: Kubectl) -> None:
    client = Client(KubeConfig.from_file(plane.kubeconfig), field_manager="conformance")
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "applied", "namespace": NS},
        "spec": {
            "runPolicy": {"suspend": True},
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "pytorch", "image": "x", "command": ["true"]}]}},
                }
            },
        },
    }
    PyTorchJob = create_namespaced_resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
    client.apply(PyTorchJob.from_dict(job))
    job["metadata"]["labels"] = {"team": "a"}
    applied = client.apply(PyTorchJob.from_dict(job))
    assert applied.metadata.labels == {"team": "a"}
    owners = {(e.manager, e.operation) for e in applied.metadata.managedFields}
    assert ("conformance", "Apply") in owners

    client.apply(ConfigMap(metadata=ObjectMeta(name="lk", namespace=NS), data={"a": "1"}))
    client.patch(ConfigMap, "lk", {"data": {"a": "2"}}, namespace=NS, field_manager="editor")
    with pytest.raises(ApiError) as exc:
        client.apply(ConfigMap(metadata=ObjectMeta(name="lk", namespace=NS), data={"a": "3"}))
    assert exc.value.status.code == 409
    assert exc.value.status.details.causes[0].field == ".data.a"
    forced = client.apply(ConfigMap(metadata=ObjectMeta(name="lk", namespace=NS), data={"a": "3"}), force=True)
    assert forced.data == {"a": "3"}
