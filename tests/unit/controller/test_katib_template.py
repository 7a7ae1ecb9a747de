"""A Trial's job rendered from its Experiment's trialTemplate, as Katib renders it."""

from __future__ import annotations

import pytest
from katib_objects import experiment

from trainyard.api.katib.templates import TemplateError
from trainyard.controller.katib.template import render, trial


def test_parameters_and_meta_references_are_substituted_as_strings() -> None:
    job = render(experiment(), "digits-abc", {"lr": "0.01", "units": "32"})
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[2:] == ["--lr=0.01", "--units=32", "--name=digits-abc"]
    assert job["metadata"]["name"] == "digits-abc"
    assert job["metadata"]["namespace"] == "default"
    assert job["metadata"]["labels"] == {
        "katib.kubeflow.org/experiment": "digits",
        "katib.kubeflow.org/trial": "digits-abc",
    }


def test_a_value_that_needs_escaping_stays_one_string() -> None:
    job = render(experiment(), "t", {"lr": 'a"b\\c', "units": "1"})
    assert job["spec"]["template"]["spec"]["containers"][0]["command"][2] == '--lr=a"b\\c'


def test_an_assignment_no_trial_parameter_takes_is_an_error() -> None:
    exp = experiment()
    exp["spec"]["trialTemplate"]["trialParameters"].pop(1)
    with pytest.raises(TemplateError, match="not all trial parameters"):
        render(exp, "t", {"lr": "0.1", "units": "3"})


def test_the_trial_carries_the_template_and_the_assignment() -> None:
    exp = experiment()
    exp["spec"]["trialTemplate"]["retain"] = True
    assignment = {
        "name": "digits-abc",
        "parameterAssignments": [{"name": "lr", "value": "0.01"}, {"name": "units", "value": "32"}],
        "earlyStoppingRules": [{"name": "loss", "value": "0.5", "comparison": "greater", "startStep": 4}],
    }
    made = trial(exp, assignment, render(exp, "digits-abc", {"lr": "0.01", "units": "32"}))
    spec = made["spec"]
    assert made["metadata"]["labels"] == {"katib.kubeflow.org/experiment": "digits"}
    assert spec["retainRun"] is True
    assert spec["primaryContainerName"] == "training"
    assert spec["earlyStoppingRules"][0]["startStep"] == 4
    assert spec["objective"]["objectiveMetricName"] == "loss"
    assert spec["metricsCollector"] == {"collector": {"kind": "StdOut"}}
    assert spec["runSpec"]["kind"] == "Job"
