"""Kubeflow Trainer v2's kinds: CRD schemas, the webhook's defaults and rules, the shipped runtimes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainyard.api import trainer
from trainyard.api.trainer import catalog, schema, webhook
from trainyard.api.webhooks import webhook_for
from trainyard.cluster.server.apiserver.writes import schema as structural


def sdk_body(**trainer_fields: Any) -> dict[str, Any]:
    """What ``TrainerClient.train`` POSTs (no namespace, no runtimeRef.apiGroup, numbers as quantities)."""
    fields = {
        "command": ["bash", "-c", "torchrun train.py"],
        "env": [{"name": "LR", "value": "0.1"}],
        "numNodes": 2,
        "resourcesPerNode": {"limits": {"cpu": 2.0, "memory": "1Gi"}, "requests": {"cpu": 1}},
        **trainer_fields,
    }
    return {
        "apiVersion": trainer.API_VERSION,
        "kind": trainer.TRAINJOB,
        "metadata": {"name": "a1b2c3d4e5f6"},
        "spec": {"runtimeRef": {"name": "torch-distributed", "kind": "ClusterTrainingRuntime"}, "trainer": fields},
    }


def admit(obj: dict[str, Any], s: dict[str, Any]) -> list[Any]:
    """The plane's custom-resource write path: prune, defaults, schema checks."""
    unknown = structural.prune(obj, s)
    structural.apply_defaults(obj, s)
    return unknown + structural.validate(obj, s)


def test_crds_kinds_scopes_columns_and_status() -> None:
    by_kind = {c["spec"]["names"]["kind"]: c for c in trainer.crds()}
    assert set(by_kind) == {"TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"}
    assert by_kind["ClusterTrainingRuntime"]["spec"]["scope"] == "Cluster"
    assert by_kind["TrainingRuntime"]["spec"]["scope"] == "Namespaced"
    job = by_kind["TrainJob"]["spec"]["versions"][0]
    assert job["subresources"] == {"status": {}}
    assert [c["jsonPath"] for c in job["additionalPrinterColumns"]] == [
        ".status.state",
        ".spec.runtimeRef.name",
        ".status.trainerStatus.progressPercentage",
        ".status.trainerStatus.estimatedRemainingSeconds",
        ".metadata.creationTimestamp",
    ]
    for crd in trainer.crds():
        assert structural.structural_problems(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "") == []


def test_the_sdks_body_passes_the_schema_with_upstreams_defaults() -> None:
    obj = sdk_body()
    assert admit(obj, schema.trainjob_schema()) == []
    spec = obj["spec"]
    assert spec["runtimeRef"] == {
        "name": "torch-distributed",
        "kind": "ClusterTrainingRuntime",
        "apiGroup": "trainer.kubeflow.org",
    }
    assert spec["managedBy"] == trainer.CONTROLLER_NAME and spec["suspend"] is False
    assert spec["trainer"]["resourcesPerNode"]["limits"]["cpu"] == 2.0
    assert webhook.validate(obj) == []


def test_schema_rejects_bad_numbers_and_quantities() -> None:
    obj = sdk_body(numNodes=0, resourcesPerNode={"limits": {"cpu": "two"}})
    fields = {cause[1] for cause in admit(obj, schema.trainjob_schema())}
    assert fields == {"spec.trainer.numNodes", "spec.trainer.resourcesPerNode.limits.cpu"}
    status = {"state": "Dancing", "jobsStatus": [{"name": "node", "ready": -1}]}
    fields = {
        cause[1] for cause in structural.validate(status, schema.trainjob_schema()["properties"]["status"], "status")
    }
    assert fields == {"status.state", "status.jobsStatus[0].ready"}


def test_default_fills_what_the_sdk_leaves_out_and_stamps_patches() -> None:
    obj = sdk_body()
    obj["spec"]["runtimePatches"] = [{"manager": "me"}]
    webhook.default(obj)
    assert obj["spec"]["runtimeRef"]["apiGroup"] == trainer.GROUP
    assert obj["spec"]["managedBy"] == trainer.CONTROLLER_NAME and obj["spec"]["suspend"] is False
    stamped = obj["spec"]["runtimePatches"][0]["time"]
    again = copy.deepcopy(obj)
    again["spec"]["runtimePatches"][0].pop("time")
    webhook.default(again, obj)
    assert again["spec"]["runtimePatches"][0]["time"] == stamped


def test_every_problem_with_field_paths_and_upstreams_words() -> None:
    obj = sdk_body(numProcPerNode=0)
    obj["metadata"]["name"] = "9-Bad"
    obj["spec"]["managedBy"] = "someone/else"
    obj["spec"]["runtimeRef"] = {"name": "x", "apiGroup": "kubeflow.org", "kind": "PyTorchJob"}
    obj["spec"]["initializer"] = {"dataset": {"storageUri": "not a uri"}, "model": {"storageUri": "hf://m"}}
    problems = {e.field: e.message for e in webhook.validate(obj)}
    assert problems == {
        "metadata.name": 'Invalid value: "object": metadata.name must match RFC 1035 DNS label format',
        "spec.managedBy": (
            'Invalid value: "string": ManagedBy must be trainer.kubeflow.org/trainjob-controller'
            " or kueue.x-k8s.io/multikueue if set"
        ),
        "spec.runtimeRef.apiGroup": problems["spec.runtimeRef.apiGroup"],
        "spec.initializer.dataset.storageUri": (
            'Invalid value: "string": storageUri may be empty, or it must be a valid URI (scheme://...)'
        ),
        "spec.trainer.numProcPerNode": 'Invalid value: "integer": numProcPerNode must be greater than or equal to 1',
    }
    assert "unsupported runtime: PyTorchJob.kubeflow.org" in problems["spec.runtimeRef.apiGroup"]
    long_name = sdk_body()
    long_name["metadata"]["name"] = "a" * 64
    assert [e.field for e in webhook.validate(long_name)] == ["metadata.name"]


def test_immutable_fields_on_update() -> None:
    old = sdk_body()
    old["spec"]["runtimePatches"] = [
        {
            "manager": "kueue",
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}}}
                        ]
                    }
                }
            },
        }
    ]
    webhook.default(old)
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = True  # may change
    new["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"][
        "spec"
    ]["template"]["spec"]["nodeSelector"] = {"a": "c"}
    assert webhook.validate(new, old) == []
    new["spec"]["runtimeRef"]["name"] = "jax-distributed"
    new["spec"]["trainer"]["numNodes"] = 4
    new["spec"]["managedBy"] = trainer.MULTIKUEUE
    pod = new["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"][
        "spec"
    ]["template"]["spec"]
    old_pod = old["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"
    ]["spec"]["template"]["spec"]
    old_pod["serviceAccountName"], pod["serviceAccountName"] = "a", "b"
    fields = [e.field for e in webhook.validate(new, old)]
    assert fields == [
        "spec.runtimeRef",
        "spec.trainer",
        "spec.managedBy",
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"
        ".serviceAccountName",
    ]
    assert all(e.message.endswith("field is immutable") for e in webhook.validate(new, old))


def test_runtime_rules() -> None:
    good = catalog.runtimes()[0]
    assert trainer.validate_runtime(good) == []
    bad = copy.deepcopy(good)
    bad["spec"]["mlPolicy"] = {"torch": {}, "mpi": {"numProcPerNode": 0}}
    rjob = bad["spec"]["template"]["spec"]["replicatedJobs"][0]
    rjob["replicas"] = 2
    rjob["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "trainer"
    fields = [e.field for e in trainer.validate_runtime(bad)]
    assert fields == [
        "spec.mlPolicy",
        "spec.mlPolicy.mpi.numProcPerNode",
        "spec.template.spec.replicatedJobs[0].replicas",
        "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers",
    ]
    empty = {"metadata": {"name": "r"}, "spec": {"mlPolicy": {"numNodes": 1}}}
    assert [e.field for e in trainer.validate_runtime(empty)] == ["spec.template.spec.replicatedJobs"]


def test_reserved_env_against_the_runtime() -> None:
    torch, _, xgboost, deepspeed, _ = catalog.runtimes()
    job = sdk_body(env=[{"name": "PET_NNODES", "value": "3"}, {"name": "DMLC_TASK_ID", "value": "0"}])
    assert [e.field for e in trainer.runtime_problems(job, torch)] == ["spec.trainer.env"]
    assert "[PET_NNODES]" in trainer.runtime_problems(job, torch)[0].message
    assert [e.field for e in trainer.runtime_problems(job, xgboost)] == ["spec.trainer.env[1]"]
    assert trainer.runtime_problems(sdk_body(), deepspeed) == []


@pytest.mark.parametrize("runtime", catalog.runtimes(), ids=lambda r: r["metadata"]["name"])
def test_shipped_runtimes_carry_what_the_sdk_needs(runtime: dict[str, Any]) -> None:
    assert runtime["kind"] == trainer.CLUSTER_TRAINING_RUNTIME and runtime["apiVersion"] == trainer.API_VERSION
    assert runtime["metadata"]["labels"][trainer.FRAMEWORK_LABEL]
    assert runtime["spec"]["mlPolicy"]["numNodes"] == 1
    rjobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    ancestors = [r for r in rjobs if r["template"].get("metadata", {}).get("labels", {}).get(trainer.ANCESTOR_LABEL)]
    assert len(ancestors) == 1 and ancestors[0]["template"]["metadata"]["labels"][trainer.ANCESTOR_LABEL] == "trainer"
    node = ancestors[0]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert node["name"] == trainer.NODE and node["image"]
    copied = copy.deepcopy(runtime)
    assert admit(copied, schema.runtime_schema()) == [] and copied["spec"] == runtime["spec"]  # nothing pruned
    assert trainer.validate_runtime(runtime) == []


def test_shipped_runtimes_names_and_mpi_shape() -> None:
    by_name = {r["metadata"]["name"]: r for r in catalog.runtimes()}
    assert list(by_name) == [
        "torch-distributed",
        "jax-distributed",
        "xgboost-distributed",
        "deepspeed-distributed",
        "mlx-distributed",
    ]
    assert trainer.DEFAULT_RUNTIME in by_name
    for name in ("deepspeed-distributed", "mlx-distributed"):
        spec = by_name[name]["spec"]
        assert spec["mlPolicy"]["mpi"]["runLauncherAsNode"] is True
        assert spec["template"]["spec"]["successPolicy"]["targetReplicatedJobs"] == ["launcher"]
        node, launcher = spec["template"]["spec"]["replicatedJobs"]
        assert node["template"]["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["tcpSocket"] == {
            "port": 2222
        }
        assert launcher["dependsOn"] == [{"name": "node", "status": "Ready"}]


def test_upgrade_only_touches_unmodified_shipped_copies() -> None:
    wanted = catalog.runtimes()[0]
    installed = catalog.shipped(wanted)
    assert catalog.upgrade(installed, wanted) is None  # already current
    newer = copy.deepcopy(wanted)
    newer["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "image"
    ] = "pytorch/pytorch:next"
    upgraded = catalog.upgrade(installed, newer)
    assert upgraded is not None and upgraded["spec"] == newer["spec"]
    assert upgraded["metadata"]["annotations"][catalog.SHIPPED_ANNOTATION] == catalog.fingerprint(newer)
    edited = copy.deepcopy(installed)
    edited["spec"]["mlPolicy"]["numNodes"] = 2
    assert catalog.upgrade(edited, newer) is None
    users = copy.deepcopy(wanted)  # the user's own, never annotated
    assert catalog.upgrade(users, newer) is None


def test_the_webhook_table_has_the_four_kinds() -> None:
    for kind in (trainer.TRAINJOB, trainer.TRAINING_RUNTIME, trainer.CLUSTER_TRAINING_RUNTIME):
        assert webhook_for(trainer.GROUP, kind) is not None
    assert webhook_for("jobset.x-k8s.io", "JobSet") is not None
    assert webhook_for(trainer.GROUP, "Other") is None
