"""The seed's TrainingJob: its CRD admits the seed's examples as written, and refuses bad fields by path."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainyard.api import trainingjob
from trainyard.api.trainingjob import schema
from trainyard.api.webhooks import webhook_for
from trainyard.cluster.server.apiserver.writes import schema as structural

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples" / "trainingjob").glob("*.yaml"))


def admit(obj: dict[str, Any]) -> list[str]:
    """The plane's write path for a custom resource: prune, schema defaults, schema checks, the webhook."""
    s = schema.schema()
    problems = [str(p) for p in structural.prune(obj, s)]
    structural.apply_defaults(obj, s)
    problems += [f"{field}: {detail}" for _, field, detail in structural.validate(obj, s)]
    hook = webhook_for(trainingjob.GROUP, trainingjob.KIND)
    assert hook is not None
    hook.default(obj, None)
    return problems + [str(p) for p in hook.validate(obj, None)]


def basic(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": trainingjob.API_VERSION,
        "kind": trainingjob.KIND,
        "metadata": {"name": "mnist-training", "namespace": "ml-training"},
        "spec": {"model": "cnn", "dataset": "mnist", "numWorkers": 2},
    }
    body["spec"].update(spec)
    return body


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_seed_examples_are_admitted_as_written(path: Path) -> None:
    obj = yaml.safe_load(path.read_text())
    assert admit(obj) == []
    assert obj["spec"]["framework"] == "pytorch"
    assert obj["spec"]["gpusPerWorker"] >= 1


def test_crd_names_columns_and_defaults() -> None:
    crd = trainingjob.crd()
    assert crd["metadata"]["name"] == "trainingjobs.ml.example.com"
    assert crd["spec"]["names"]["shortNames"] == ["trj"]
    version = crd["spec"]["versions"][0]
    shown = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert shown == ["State", "Progress", "Epoch", "Age"]
    obj = basic()
    assert admit(obj) == []
    assert (obj["spec"]["gpusPerWorker"], obj["spec"]["framework"], obj["spec"]["suspend"]) == (1, "pytorch", False)


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"numWorkers": 0}, "spec.numWorkers"),
        ({"numWorkers": 101}, "spec.numWorkers"),
        ({"framework": "mxnet"}, "spec.framework"),
        ({"hyperparameters": {"optimizer": "lion"}}, "spec.hyperparameters.optimizer"),
        ({"hyperparameters": {"batchSize": 0}}, "spec.hyperparameters.batchSize"),
        ({"networking": {"backend": "tcp"}}, "spec.networking.backend"),
        ({"successPolicy": {"targetAccuracy": 1.5}}, "spec.successPolicy.targetAccuracy"),
        ({"checkpoint": {"enabled": True, "storage": {"type": "s3"}}}, "spec.checkpoint.storage.s3Bucket"),
        ({"checkpoint": {"enabled": True, "storage": {"type": "pvc"}}}, "spec.checkpoint.storage.pvcName"),
        ({"checkpoint": {"enabled": False, "frequency": 2}}, "spec.checkpoint.frequency"),
        ({"resources": {"limits": {"nvidia.com/gpu": 2}}}, "spec.resources.limits[nvidia.com/gpu]"),
        ({"framework": "jax", "networking": {"masterPort": 29500}}, "spec.networking.masterPort"),
        ({"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}, "spec.env[1].name"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_fields_are_refused_with_their_path(spec: dict[str, Any], path: str) -> None:
    problems = admit(basic(**spec))
    assert any(p.startswith(path + ":") for p in problems), problems


def test_required_fields_and_long_names() -> None:
    obj = basic()
    del obj["spec"]["model"]
    obj["metadata"]["name"] = "x" * 60
    problems = admit(obj)
    assert any(p.startswith("spec.model:") for p in problems), problems
    assert any(p.startswith("metadata.name:") for p in problems), problems


def test_only_suspend_changes_on_update() -> None:
    old = basic()
    admit(old)
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = True
    assert trainingjob.validate(new, old) == []
    new["spec"]["numWorkers"] = 3
    assert [e.field for e in trainingjob.validate(new, old)] == ["spec.numWorkers"]
