"""examples/hpo: every manifest is admitted as written, and each trial's command names what the search sets.

The Katib Experiments go through Katib's defaults and validator (``api.katib``), the OptimizationJob
through its checks (``api.trainer.optimizationjob``) and its TrainingRuntime through the runtime's:
what ``kubectl apply`` would answer, without a plane. Each Experiment's trial command passes
every trial parameter as the flag ``train_digits.py`` reads, and the OptimizationJob's parameters
are the names whose ``KUBEFLOW_TRAINER_OPT_*`` variables it reads.
"""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from trainyard.api.katib.defaults import default_experiment
from trainyard.api.katib.validation import validate_experiment
from trainyard.api.trainer import optimizationjob
from trainyard.api.trainer.webhook import validate_runtime

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "hpo"
EXPERIMENTS = ("random.yaml", "tpe.yaml", "median-stop.yaml", "file-collector.yaml")


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_digits", EXAMPLE / "train_digits.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def containers(trial_spec: dict[str, Any]) -> list[dict[str, Any]]:
    if trial_spec["kind"] == "Job":
        return list(trial_spec["spec"]["template"]["spec"]["containers"])
    replicas = trial_spec["spec"]["pytorchReplicaSpecs"].values()
    return [c for r in replicas for c in r["template"]["spec"]["containers"]]


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_experiment_is_admitted_and_passes_every_parameter(name: str) -> None:
    experiment = yaml.safe_load((EXAMPLE / name).read_text())
    defaulted = copy.deepcopy(experiment)
    default_experiment(defaulted)
    assert validate_experiment(defaulted) == []
    template = experiment["spec"]["trialTemplate"]
    searched = {p["name"] for p in experiment["spec"]["parameters"]}
    references = {t["name"]: t["reference"] for t in template["trialParameters"]}
    assert set(references.values()) == searched
    for container in containers(template["trialSpec"]):
        assert container["name"] == template["primaryContainerName"]
        assert container["command"][:2] == ["python", "train_digits.py"]
        # The flags parse once Katib has put numbers in place of the placeholders.
        filled = [re.sub(r"\$\{trialParameters\.\w+\}", "0.1", arg) for arg in container["command"][2:]]
        assert script().parse(filled).epochs > 0
        for placeholder, reference in references.items():
            assert f"--{reference}=${{trialParameters.{placeholder}}}" in container["command"]


def test_the_optimizationjob_and_its_runtime_are_admitted_and_name_the_scripts_variables() -> None:
    runtime, job = yaml.safe_load_all((EXAMPLE / "optimizationjob.yaml").read_text())
    assert validate_runtime(runtime) == []
    assert optimizationjob.validate(job) == []
    assert job["spec"]["trainJobTemplate"]["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    train_digits = script()
    for parameter in job["spec"]["parameters"]:
        name = parameter["name"]
        assert optimizationjob.env_name(name) == train_digits.ENV_PREFIX + name.upper()
        assert name in train_digits.DEFAULTS


def test_the_script_reads_argv_before_optimizationjobs_env(monkeypatch: pytest.MonkeyPatch) -> None:
    train_digits = script()
    monkeypatch.setenv("KUBEFLOW_TRAINER_OPT_LR", "0.2")
    monkeypatch.delenv("KUBEFLOW_TRAINER_OPT_MOMENTUM", raising=False)
    args = train_digits.parse(["--momentum=0.7"])
    assert (args.lr, args.momentum) == (0.2, 0.7)
    assert train_digits.parse(["--lr=0.05"]).lr == 0.05
