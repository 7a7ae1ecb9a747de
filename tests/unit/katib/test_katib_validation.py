"""Katib's Experiment admission: upstream's example shapes pass defaulted, bad ones fail with Katib's field paths."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainyard.api.field_errors import ErrorType
from trainyard.api.katib import default_experiment, validate_experiment

Obj = dict[str, Any]

BATCH_TRIAL = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "training-container",
                        "image": "ghcr.io/kubeflow/katib/pytorch-mnist-cpu:latest",
                        "command": [
                            "python3",
                            "/opt/pytorch-mnist/mnist.py",
                            "--lr=${trialParameters.learningRate}",
                            "--momentum=${trialParameters.momentum}",
                        ],
                    }
                ],
                "restartPolicy": "Never",
            }
        }
    },
}


def experiment(search: str = "random", **spec: Any) -> Obj:
    """examples/v1beta1/hp-tuning/random.yaml's shape, with another algorithm or fields."""
    base: Obj = {
        "objective": {"type": "minimize", "goal": 0.001, "objectiveMetricName": "loss"},
        "algorithm": {"algorithmName": search},
        "parallelTrialCount": 3,
        "maxTrialCount": 12,
        "maxFailedTrialCount": 3,
        "parameters": [
            {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.05"}},
            {"name": "momentum", "parameterType": "double", "feasibleSpace": {"min": "0.5", "max": "0.9"}},
        ],
        "trialTemplate": {
            "primaryContainerName": "training-container",
            "trialParameters": [
                {"name": "learningRate", "description": "Learning rate", "reference": "lr"},
                {"name": "momentum", "description": "Momentum", "reference": "momentum"},
            ],
            "trialSpec": copy.deepcopy(BATCH_TRIAL),
        },
    }
    base.update(spec)
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": "random"}, "spec": base}


def problems(obj: Obj, old: Obj | None = None) -> list[tuple[str, str]]:
    default_experiment(obj)
    return [(e.field, e.detail) for e in validate_experiment(obj, old)]


def paths(obj: Obj, old: Obj | None = None) -> list[str]:
    return [path for path, _ in problems(obj, old)]


def with_grid_steps(obj: Obj) -> Obj:
    for parameter, step in zip(obj["spec"]["parameters"], ("0.005", "0.1"), strict=True):
        parameter["feasibleSpace"]["step"] = step
    return obj


TRAINJOB_TRIAL = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "spec": {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {
            "numNodes": 2,
            "command": [
                "python3",
                "mnist.py",
                "--lr=${trialParameters.learningRate}",
                "--m=${trialParameters.momentum}",
            ],
        },
    },
}


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(experiment(), id="random"),
        pytest.param(experiment("tpe"), id="tpe"),
        pytest.param(experiment("multivariate-tpe"), id="multivariate-tpe"),
        pytest.param(with_grid_steps(experiment("grid")), id="grid"),
        pytest.param(
            experiment(
                "cmaes",
                algorithm={
                    "algorithmName": "cmaes",
                    "algorithmSettings": [{"name": "restart_strategy", "value": "ipop"}],
                },
            ),
            id="cmaes",
        ),
        pytest.param(
            experiment(
                earlyStopping={
                    "algorithmName": "medianstop",
                    "algorithmSettings": [
                        {"name": "min_trials_required", "value": "1"},
                        {"name": "start_step", "value": "2"},
                    ],
                },
                parallelTrialCount=2,
                maxTrialCount=15,
            ),
            id="medianstop",
        ),
        pytest.param(
            experiment(
                objective={
                    "type": "maximize",
                    "goal": 0.99,
                    "objectiveMetricName": "accuracy",
                    "additionalMetricNames": ["loss"],
                },
                metricsCollectorSpec={
                    "source": {
                        "filter": {"metricsFormat": ["{metricName: ([\\w|-]+), metricValue: ((-?\\d+)(\\.\\d+)?)}"]},
                        "fileSystemPath": {"path": "/katib/mnist.log", "kind": "File"},
                    },
                    "collector": {"kind": "File"},
                },
            ),
            id="file-metrics-collector",
        ),
        pytest.param(
            experiment(
                metricsCollectorSpec={
                    "collector": {"kind": "File"},
                    "source": {"fileSystemPath": {"path": "/katib/m.json", "kind": "File", "format": "JSON"}},
                }
            ),
            id="file-json",
        ),
        pytest.param(
            experiment(
                trialTemplate={
                    **experiment()["spec"]["trialTemplate"],
                    "primaryContainerName": "node",
                    "trialSpec": TRAINJOB_TRIAL,
                }
            ),
            id="trainjob-trial",
        ),
    ],
)
def test_upstream_example_shapes_are_accepted(obj: Obj) -> None:
    assert problems(obj) == []


def test_defaults_are_katibs() -> None:
    obj = experiment(parallelTrialCount=None)
    obj["spec"]["objective"]["additionalMetricNames"] = ["accuracy"]
    default_experiment(obj)
    spec = obj["spec"]
    assert spec["parallelTrialCount"] == 3 and spec["resumePolicy"] == "Never"
    # Katib gives additional metrics the objective's direction too (experiment_defaults.go).
    assert spec["objective"]["metricStrategies"] == [
        {"name": "loss", "value": "min"},
        {"name": "accuracy", "value": "min"},
    ]
    assert spec["metricsCollectorSpec"] == {"collector": {"kind": "StdOut"}}
    template = spec["trialTemplate"]
    assert template["successCondition"] == 'status.conditions.#(type=="Complete")#|#(status=="True")#'
    assert template["failureCondition"] == 'status.conditions.#(type=="Failed")#|#(status=="True")#'
    assert "primaryPodLabels" not in template, "a batch Job's pods are all primary"
    assert {p["feasibleSpace"]["distribution"] for p in spec["parameters"]} == {"uniform"}


@pytest.mark.parametrize(
    ("kind", "success", "labels"),
    [
        ("PyTorchJob", "Succeeded", {"training.kubeflow.org/job-role": "master"}),
        ("TFJob", "Succeeded", {"training.kubeflow.org/job-role": "master"}),
        (
            "TrainJob",
            "Complete",
            {"jobset.sigs.k8s.io/replicatedjob-name": "node", "batch.kubernetes.io/job-completion-index": "0"},
        ),
    ],
)
def test_kubeflow_trial_kinds_get_their_conditions_and_primary_pods(
    kind: str, success: str, labels: dict[str, str]
) -> None:
    obj = experiment()
    obj["spec"]["trialTemplate"]["trialSpec"]["kind"] = kind
    default_experiment(obj)
    template = obj["spec"]["trialTemplate"]
    assert template["successCondition"] == f'status.conditions.#(type=="{success}")#|#(status=="True")#'
    assert template["primaryPodLabels"] == labels


def test_file_collector_defaults_its_path_and_format() -> None:
    obj = experiment(metricsCollectorSpec={"collector": {"kind": "File"}})
    default_experiment(obj)
    assert obj["spec"]["metricsCollectorSpec"]["source"]["fileSystemPath"] == {
        "kind": "File",
        "path": "/var/log/katib/metrics.log",
        "format": "TEXT",
    }


def test_a_bad_experiment_gets_every_problem_with_its_path() -> None:
    obj = experiment(
        "bayesianoptimization",
        maxTrialCount=2,
        parallelTrialCount=3,
        maxFailedTrialCount=-1,
        objective={"type": "lower", "objectiveMetricName": "loss", "additionalMetricNames": ["loss"]},
        earlyStopping={"algorithmName": "hyperband"},
        metricsCollectorSpec={"collector": {"kind": "TensorFlowEvent"}},
    )
    obj["metadata"]["name"] = "Bad_Name"
    obj["spec"]["parameters"][0]["feasibleSpace"] = {"min": "0.05", "max": "0.01"}
    obj["spec"]["parameters"][1] = {"name": "momentum", "parameterType": "categorical", "feasibleSpace": {"min": "1"}}
    found = dict(problems(obj))
    assert set(found) == {
        "metadata.name",
        "spec.maxFailedTrialCount",
        "spec.parallelTrialCount",
        "spec.objective.type",
        "spec.objective.additionalMetricNames",
        "spec.algorithm.algorithmName",
        "spec.earlyStopping.algorithmName",
        "spec.parameters[0].feasibleSpace.max",
        "spec.parameters[1].feasibleSpace",
        "spec.parameters[1].feasibleSpace.list",
        "spec.metricsCollectorSpec.collector.kind",
    }
    assert "not supported by trainyard" in found["spec.algorithm.algorithmName"]
    assert '"random", "grid", "tpe", "multivariate-tpe", "cmaes"' in found["spec.algorithm.algorithmName"]
    assert "trainyard.runtime.report()" in found["spec.metricsCollectorSpec.collector.kind"]
    assert "should be less than or equal to spec.maxTrialCount" in found["spec.parallelTrialCount"]


def test_trial_parameters_and_placeholders_must_match() -> None:
    obj = experiment()
    template = obj["spec"]["trialTemplate"]
    template["trialParameters"] = [
        {"name": "learningRate", "reference": "lr"},
        {"name": "batch", "reference": "batchSize"},  # references no parameter, used nowhere
        {"name": "trialName", "reference": "${trialSpec.Name}"},  # a metadata reference, used nowhere
    ]
    found = dict(problems(obj))
    assert "does not exist in spec.parameters" in found["spec.trialTemplate.trialParameters[1].reference"]
    assert "not found in spec.trialTemplate" in found["spec.trialTemplate.trialParameters[2].name"]
    # ${trialParameters.momentum} is in the template but declared by no trial parameter.
    assert "${trialParameters.momentum}" in found["spec.trialTemplate.trialSpec"]
    assert "spec.trialTemplate.trialParameters[2].reference" not in found


def test_the_template_needs_kind_a_primary_container_it_has_and_supported_conditions() -> None:
    obj = experiment()
    template = obj["spec"]["trialTemplate"]
    template["primaryContainerName"] = "trainer"
    template["trialSpec"]["metadata"] = {"name": "fixed"}
    template["successCondition"] = 'status.[@this].#(phase=="Succeeded")#'
    found = dict(problems(obj))
    assert "one of training-container" in found["spec.trialTemplate.primaryContainerName"]
    assert "must be omitted" in found["spec.trialTemplate.trialSpec.metadata"]
    assert 'status.conditions.#(type=="Complete")#|#(status=="True")#' in found["spec.trialTemplate.successCondition"]


def test_an_unknown_trial_kind_needs_its_conditions_and_a_configmap_template_is_refused() -> None:
    obj = experiment()
    obj["spec"]["trialTemplate"]["trialSpec"]["kind"] = "Workflow"
    assert paths(obj) == ["spec.trialTemplate"]
    obj = experiment()
    template = obj["spec"]["trialTemplate"]
    del template["trialSpec"]
    template["configMap"] = {"configMapName": "templates", "configMapNamespace": "kubeflow", "templatePath": "job.yaml"}
    template["successCondition"] = template["failureCondition"] = "status.done"
    found = dict(problems(obj))
    assert "write it inline" in found["spec.trialTemplate.configMap"]


def test_parameter_spaces_fit_their_types() -> None:
    obj = experiment()
    obj["spec"]["parameters"] = [
        {"name": "a", "parameterType": "int", "feasibleSpace": {"min": "1.5", "max": "4", "step": "0"}},
        {
            "name": "b",
            "parameterType": "double",
            "feasibleSpace": {"min": "0", "max": "1", "distribution": "logUniform"},
        },
        {"name": "c", "parameterType": "discrete", "feasibleSpace": {"list": ["1", "x"]}},
        {"name": "d", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1", "distribution": "normal"}},
        {"name": "e", "parameterType": "unknown", "feasibleSpace": {"list": ["1"]}},
    ]
    obj["spec"]["trialTemplate"]["trialParameters"] = []
    obj["spec"]["trialTemplate"]["trialSpec"] = {"apiVersion": "batch/v1", "kind": "Job", "spec": {}}
    found = dict(problems(obj))
    assert set(found) == {
        "spec.parameters[0].feasibleSpace.min",
        "spec.parameters[0].feasibleSpace.step",
        "spec.parameters[1].feasibleSpace.min",
        "spec.parameters[2].feasibleSpace.list[1]",
        "spec.parameters[3].feasibleSpace.distribution",
        "spec.parameters[4].parameterType",
    }


def test_algorithm_settings_are_checked_as_katibs_suggestion_service_does() -> None:
    obj = experiment(
        "tpe",
        algorithm={
            "algorithmName": "tpe",
            "algorithmSettings": [{"name": "n_startup_trials", "value": "-1"}, {"name": "gamma", "value": "1"}],
        },
    )
    assert paths(obj) == ["spec.algorithm.algorithmSettings[0].value", "spec.algorithm.algorithmSettings[1].name"]
    assert "a grid needs feasibleSpace.step" in dict(problems(experiment("grid")))["spec.algorithm.algorithmName"]
    grid = with_grid_steps(experiment("grid", maxTrialCount=100))
    assert "all possible search combinations: 45" in dict(problems(grid))["spec.maxTrialCount"]


def test_nas_is_refused_with_what_to_use() -> None:
    obj = experiment(nasConfig={"graphConfig": {"numLayers": 2}})
    found = {e.field: e for e in (default_experiment(obj) or validate_experiment(obj))}
    assert found["spec.nasConfig"].type is ErrorType.FORBIDDEN


def running(obj: Obj, *, trials: int, reason: str | None = None, policy: str = "Never") -> Obj:
    default_experiment(obj)
    obj["spec"]["resumePolicy"] = policy
    conditions = [{"type": "Created", "status": "True"}]
    if reason is not None:
        conditions.append({"type": "Succeeded", "status": "True", "reason": reason})
    obj["status"] = {"trials": trials, "conditions": conditions}
    return obj


def test_only_the_counts_are_editable() -> None:
    old = running(experiment(), trials=4)
    new = copy.deepcopy(old)
    new["spec"]["maxTrialCount"] = 20
    new["spec"]["parallelTrialCount"] = 5
    assert problems(new, old) == []
    new["spec"]["algorithm"]["algorithmName"] = "tpe"
    assert paths(new, old) == ["spec"]
    new = copy.deepcopy(old)
    new["spec"]["maxTrialCount"] = 4
    assert paths(new, old) == ["spec.maxTrialCount"]


def test_a_finished_experiment_restarts_only_when_katib_allows_it() -> None:
    done = running(experiment(), trials=12, reason="ExperimentMaxTrialsReached")
    more = copy.deepcopy(done)
    more["spec"]["maxTrialCount"] = 16
    assert paths(more, done) == ["spec.resumePolicy"]
    done = running(experiment(), trials=12, reason="ExperimentMaxTrialsReached", policy="LongRunning")
    more = copy.deepcopy(done)
    more["spec"]["maxTrialCount"] = 16
    assert problems(more, done) == []
    # An unchanged spec (a label edit, the controller's finalizer) is no restart.
    assert problems(copy.deepcopy(done), done) == []


def test_push_needs_a_trial_kind_whose_status_takes_reports() -> None:
    pushed = {"collector": {"kind": "Push"}}
    found = problems(experiment(metricsCollectorSpec=pushed))
    assert [path for path, _ in found] == ["spec.metricsCollectorSpec.collector.kind"]
    assert "use StdOut" in found[0][1]
    job = experiment(metricsCollectorSpec=pushed)
    job["spec"]["trialTemplate"]["trialSpec"] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "training-container",
                                    "image": "x",
                                    "command": [
                                        "python",
                                        "${trialParameters.learningRate}",
                                        "${trialParameters.momentum}",
                                    ],
                                }
                            ]
                        }
                    },
                }
            }
        },
    }
    assert paths(job) == []
