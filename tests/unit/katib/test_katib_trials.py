"""What a Trial controller reads of Katib's API: conditions on a job, the job a template makes, how yard shows it."""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.api import families
from trainyard.api.katib import conditions, default_experiment, holds, templates
from trainyard.api.katib.family import FAMILY, VIEW, best_cell, experiment_state, sample
from trainyard.api.katib.schema import crds

Obj = dict[str, Any]
COMPLETE = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
FAILED = 'status.conditions.#(type=="Failed")#|#(status=="True")#'


def job(*conds: tuple[str, str], **status: Any) -> Obj:
    listed = [{"type": t, "status": s, "reason": f"{t}Reason", "message": f"{t} message"} for t, s in conds]
    return {"kind": "Job", "status": {"conditions": listed, **status}}


@pytest.mark.parametrize(
    ("expression", "obj", "expected"),
    [
        pytest.param(COMPLETE, job(("Complete", "True")), True, id="complete"),
        pytest.param(COMPLETE, job(("Complete", "False")), False, id="complete-false"),
        pytest.param(COMPLETE, job(("Failed", "True")), False, id="other-type"),
        pytest.param(FAILED, job(("Suspended", "False"), ("Failed", "True")), True, id="failed-second"),
        pytest.param(COMPLETE, {"kind": "Job"}, False, id="no-status"),
        pytest.param('status.conditions.#(type=="Complete")', job(("Complete", "False")), True, id="first-match"),
        pytest.param('status.conditions.#(status!="True")#', job(("Running", "True")), False, id="not-equal"),
        pytest.param("status", job(), True, id="plain-object"),
        pytest.param("status.succeeded", job(succeeded=1), False, id="scalar-is-not-a-condition"),
        pytest.param("status.conditions.0", job(("Created", "True")), True, id="index"),
        pytest.param('status.conditions.#(type=="Complete")#.reason', job(("Complete", "True")), True, id="mapped"),
        pytest.param("status.phase|@this", job(), None, id="modifier"),
    ],
)
def test_conditions_hold_as_gjson_finds_them(expression: str, obj: Obj, expected: bool | None) -> None:
    if expected is None:
        assert conditions.problem(expression) is not None
        with pytest.raises(conditions.ConditionSyntaxError, match="supported"):
            holds(expression, obj)
    else:
        assert conditions.problem(expression) is None
        assert holds(expression, obj) is expected


def test_the_matched_condition_gives_the_reason_and_message() -> None:
    found = conditions.match(FAILED, job(("Created", "True"), ("Failed", "True")))
    assert found is not None and (found["reason"], found["message"]) == ("FailedReason", "Failed message")


def experiment() -> Obj:
    trial_spec = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"labels": {"team": "vision"}},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "training-container",
                            "command": [
                                "train",
                                "--lr=${trialParameters.learningRate}",
                                "--note=${trialParameters.note}",
                            ],
                            "env": [{"name": "TRIAL", "value": "${trialParameters.trialName}"}],
                        }
                    ]
                }
            }
        },
    }
    parameters = [
        {"name": "learningRate", "reference": "lr"},
        {"name": "note", "reference": "${trialSpec.Labels[team]}"},
        {"name": "trialName", "reference": "${trialSpec.Name}"},
    ]
    return {"spec": {"trialTemplate": {"trialParameters": parameters, "trialSpec": trial_spec}}}


def test_a_trial_job_is_the_template_with_its_placeholders_filled() -> None:
    made = templates.run_spec(experiment(), name="random-abc", namespace="ml", assignments={"lr": '0.01"'})
    container = made["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["train", '--lr=0.01"', "--note=vision"]
    assert container["env"] == [{"name": "TRIAL", "value": "random-abc"}]
    assert made["metadata"] == {"labels": {"team": "vision"}, "name": "random-abc", "namespace": "ml"}


def test_a_trial_job_needs_every_assignment_and_nothing_more() -> None:
    with pytest.raises(templates.TemplateError, match="lr"):
        templates.run_spec(experiment(), name="t", namespace="ml", assignments={})
    with pytest.raises(templates.TemplateError, match="not all trial parameters"):
        templates.run_spec(experiment(), name="t", namespace="ml", assignments={"lr": "1", "momentum": "2"})


def katib_experiment(**status: Any) -> Obj:
    obj: Obj = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": "random", "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": "tpe"},
            "maxTrialCount": 16,
            "parameters": [{"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}}],
            "trialTemplate": {"trialSpec": {"apiVersion": "batch/v1", "kind": "Job"}},
        },
        "status": status,
    }
    default_experiment(obj)
    return obj


def test_yard_reads_an_experiment_as_a_search() -> None:
    best = {
        "bestTrialName": "random-x",
        "parameterAssignments": [{"name": "lr", "value": "0.02"}],
        "observation": {"metrics": [{"name": "loss", "min": "0.031", "max": "0.9", "latest": "0.04"}]},
    }
    obj = katib_experiment(
        conditions=[{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}],
        trialsSucceeded=5,
        trialsRunning=2,
        trialsFailed=1,
        currentOptimalTrial=best,
        succeededTrialList=["random-x"],
        runningTrialList=["random-y", "random-z"],
    )
    cells = {header: read(obj) for header, read in VIEW.columns}
    assert {k: v for k, v in cells.items() if k != "AGE"} == {
        "ALGORITHM": "tpe",
        "TRIALS": "6/16",
        "RUNNING": "2",
        "FAILED": "1",
        "BEST": "loss=0.031",  # minimize: the metric's min
    }
    assert VIEW.state(obj) == "Running" and VIEW.is_running(obj)
    sections = {title: rows for title, _, rows in VIEW.sections(obj)}
    assert sections["Best parameters"] == [["lr", "0.02"]]
    assert sections["Trials"] == [["random-y", "Running"], ["random-z", "Running"], ["random-x", "Succeeded"]]
    assert ("Best trial", "random-x (loss=0.031)") in VIEW.fields(obj)
    measured = sample(obj)
    assert (measured.state, measured.progress, measured.workers) == ("Running", 31.25, 2)


def test_an_experiment_state_is_its_last_true_condition() -> None:
    assert experiment_state(katib_experiment()) == "Created"
    done = katib_experiment(
        conditions=[{"type": "Running", "status": "False"}, {"type": "Succeeded", "status": "True"}]
    )
    assert experiment_state(done) == "Succeeded" and VIEW.outcome(done) == "Succeeded"
    assert best_cell(done) == "-"
    assert sample(done).state == "Completed"


def test_the_family_serves_katibs_three_crds_with_its_columns() -> None:
    by_kind = {c["spec"]["names"]["kind"]: c for c in crds()}
    assert set(by_kind) == {"Experiment", "Suggestion", "Trial"}
    for crd in by_kind.values():
        version = crd["spec"]["versions"][0]
        assert (crd["spec"]["group"], version["name"]) == ("kubeflow.org", "v1beta1")
        assert version["subresources"] == {"status": {}}
        assert crd["spec"]["names"]["categories"] == ["all", "kubeflow", "katib"]
    columns = {k: [c["name"] for c in v["spec"]["versions"][0]["additionalPrinterColumns"]] for k, v in by_kind.items()}
    assert columns == {
        "Experiment": ["Type", "Status", "Age"],
        "Suggestion": ["Type", "Status", "Requested", "Assigned", "Age"],
        "Trial": ["Type", "Status", "Age"],
    }
    spec = by_kind["Experiment"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["trialTemplate"]["properties"]["trialSpec"]["x-kubernetes-preserve-unknown-fields"]
    assert families.FAMILIES[FAMILY.name] is FAMILY and families.family_of("Experiment") is FAMILY
    assert families.family_of("Trial") is None, "Trials and Suggestions are served, not jobs of yard's"
