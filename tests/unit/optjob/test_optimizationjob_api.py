"""OptimizationJob's CRD and admission: upstream's schema and CEL rules, each a field error in its words."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainyard.api import trainer
from trainyard.api.trainer import optimizationjob
from trainyard.api.webhooks import webhook_for
from trainyard.cluster.server.apiserver.writes import schema as structural


def body(**spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": trainer.API_VERSION,
        "kind": trainer.OPTIMIZATIONJOB,
        "metadata": {"name": "tune", "namespace": "ml"},
        "spec": {
            "objectives": [{"metric": "loss"}],
            "parameters": [
                {"name": "lr", "searchSpace": {"logUniform": {"min": "0.0001", "max": "0.1"}}},
                {"name": "batch-size", "searchSpace": {"categorical": {"choices": ["16", "32"]}}},
            ],
            "numTrials": 4,
            "parallelTrials": 2,
            "trainJobTemplate": {"spec": {"runtimeRef": {"name": "torch-distributed"}}},
        },
    }
    obj["spec"].update(spec)
    return obj


def admit(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """The plane's write path for a custom resource: prune, schema defaults and checks, then the webhook."""
    schema = optimizationjob.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    problems = [str(p) for p in structural.prune(obj, schema)]
    structural.apply_defaults(obj, schema)
    problems += [f"{field}: {detail}" for _, field, detail in structural.validate(obj, schema)]
    hook = webhook_for(trainer.GROUP, trainer.OPTIMIZATIONJOB)
    assert hook is not None
    hook.default(obj, old)
    return problems + [str(p) for p in hook.validate(obj, old)]


def test_a_good_one_is_admitted_with_upstreams_defaults() -> None:
    obj = body(numTrials=None, parallelTrials=None)
    del obj["spec"]["numTrials"], obj["spec"]["parallelTrials"]
    assert admit(obj) == []
    spec = obj["spec"]
    assert (spec["numTrials"], spec["parallelTrials"], spec["searchAlgorithm"]) == (1, 1, {"random": {}})
    assert spec["objectives"] == [{"metric": "loss", "direction": "Minimize"}]
    assert spec["parameters"][0]["searchSpace"]["logUniform"]["type"] == "Float"
    # the template's TrainJob spec gets the TrainJob's defaults too
    assert spec["trainJobTemplate"]["spec"]["runtimeRef"]["kind"] == trainer.CLUSTER_TRAINING_RUNTIME


def test_the_crd_is_upstreams_with_its_cel_rules_and_trainyards_columns() -> None:
    crd = optimizationjob.crd()
    assert crd["metadata"]["name"] == "optimizationjobs.trainer.kubeflow.org"
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert [r["message"] for r in spec["x-kubernetes-validations"]] == [
        optimizationjob.IMMUTABLE,
        optimizationjob.PARALLEL,
        optimizationjob.GRID,
    ]
    assert spec["properties"]["objectives"]["maxItems"] == 1
    assert [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")] == [
        "State",
        "Trials",
        "Succeeded",
        "Running",
        "Best",
        "Age",
    ]


@pytest.mark.parametrize(
    ("change", "wanted"),
    [
        ({"parallelTrials": 5}, 'spec: Invalid value: "object": parallelTrials cannot exceed numTrials'),
        (
            {"searchAlgorithm": {"grid": {}}},
            'spec: Invalid value: "object": Grid search requires all parameters to be Categorical; '
            "Uniform and LogUniform are not supported.",
        ),
        (
            {"searchAlgorithm": {"grid": {}, "random": {}}},
            'spec.searchAlgorithm: Invalid value: "object": exactly one of the fields in [random grid] must be set',
        ),
        (
            {"numTrials": 101},
            "spec.numTrials: Invalid value: 101: spec.numTrials in body should be less than or equal to 100",
        ),
    ],
)
def test_spec_rules(change: dict[str, Any], wanted: str) -> None:
    assert wanted in admit(body(**change))


def space(**searched: Any) -> list[dict[str, Any]]:
    return [{"name": "lr", "searchSpace": searched}]


@pytest.mark.parametrize(
    ("parameters", "wanted"),
    [
        (
            space(uniform={"min": "1", "max": "1"}),
            'spec.parameters[0].searchSpace.uniform: Invalid value: "object": min must be strictly less than max',
        ),
        (
            space(logUniform={"min": "0", "max": "1"}),
            'spec.parameters[0].searchSpace.logUniform: Invalid value: "object": min must be strictly greater than 0',
        ),
        (
            space(uniform={"min": "0", "max": "1"}, categorical={"choices": ["a"]}),
            'spec.parameters[0].searchSpace: Invalid value: "object": exactly one of the fields in '
            "[uniform logUniform categorical] must be set",
        ),
        (space(), 'spec.parameters[0].searchSpace: Invalid value: "object": exactly one of the fields in'),
        (space(uniform={"min": "0.1.2", "max": "1"}), "spec.parameters[0].searchSpace.uniform.min: Invalid value"),
        (
            [
                {"name": "learning-rate", "searchSpace": {"categorical": {"choices": ["a"]}}},
                {"name": "learning_rate", "searchSpace": {"categorical": {"choices": ["b"]}}},
            ],
            'spec.parameters[1].name: Invalid value: "learning_rate": its env name KUBEFLOW_TRAINER_OPT_LEARNING_RATE',
        ),
    ],
)
def test_parameter_rules(parameters: list[dict[str, Any]], wanted: str) -> None:
    found = admit(body(parameters=parameters))
    assert any(p.startswith(wanted) for p in found), found


def test_template_rules_are_the_templates_and_the_trainjobs() -> None:
    template = {
        "metadata": {"name": "fixed"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "managedBy": "someone/else",
            "trainer": {"env": [{"name": "KUBEFLOW_TRAINER_OPT_LR", "value": "1"}]},
        },
    }
    found = admit(body(trainJobTemplate=template))
    assert (
        'spec.trainJobTemplate.metadata: Invalid value: "object": name and namespace cannot be set in a template.'
        in found
    )
    assert any(p.startswith("spec.trainJobTemplate.spec.managedBy: Invalid value") for p in found), found
    assert (
        "spec.trainJobTemplate.spec.trainer.env[0].name: Forbidden: KUBEFLOW_TRAINER_OPT_LR is set by the "
        'OptimizationJob from parameter "lr": drop it from the template'
    ) in found


def test_the_spec_is_immutable() -> None:
    old = body()
    assert admit(old) == []
    new = copy.deepcopy(old)
    new["spec"]["numTrials"] = 8
    assert admit(new, old) == [
        'spec: Invalid value: "object": OptimizationJobSpec is immutable and cannot be updated after creation'
    ]
    same = copy.deepcopy(old)
    same["metadata"]["labels"] = {"team": "a"}
    assert admit(same, old) == []


def test_env_names_are_valid_whatever_the_parameter_name() -> None:
    assert optimizationjob.env_name("lr") == "KUBEFLOW_TRAINER_OPT_LR"
    assert optimizationjob.env_name("model.dropout-rate") == "KUBEFLOW_TRAINER_OPT_MODEL_DROPOUT_RATE"
