"""An Experiment's defaults, as Katib v0.19's mutating webhook sets them (``experiment_defaults.go``).

``default_experiment(obj)`` fills, in place and only where the field is absent or empty:

* ``parallelTrialCount`` 3 and ``resumePolicy`` ``Never``;
* ``objective.metricStrategies``: one per metric that has none, the objective's and each of
  ``additionalMetricNames``, ``min`` for ``minimize`` and ``max`` for ``maximize`` (Katib gives the
  additional metrics the objective's direction too; ``latest`` only when the type is neither);
* ``trialTemplate.successCondition`` / ``failureCondition`` by the trial's kind (``KUBEFLOW_JOB_KINDS``;
  a batch ``Job`` and a ``TrainJob`` ``Complete``, the ``kubeflow.org/v1`` jobs ``Succeeded``; both
  ``Failed``) and, for the Kubeflow kinds, ``primaryPodLabels`` (the master's, a TrainJob's node 0);
* ``metricsCollectorSpec.collector.kind`` ``StdOut``; a ``File`` collector's
  ``source.fileSystemPath`` kind ``File``, path ``DEFAULT_METRICS_FILE``, format ``TEXT``;
* each parameter's ``feasibleSpace.distribution`` ``uniform``.

Katib sets no ``primaryContainerName`` (its validator requires one). Admission runs this before the
schema is checked, so a field of the wrong type is left for the schema to reject. Pure.
"""

from __future__ import annotations

from typing import Any

from trainyard.api.katib import DEFAULT_METRICS_FILE, FILE_COLLECTOR, NEVER_RESUME, STDOUT_COLLECTOR
from trainyard.api.meta import Obj

DEFAULT_PARALLEL_TRIALS = 3
DEFAULT_DISTRIBUTION = "uniform"
TEXT_FORMAT = "TEXT"
JSON_FORMAT = "JSON"
FILE_KIND = "File"

JOB_SUCCESS = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
"""A batch/v1 Job's (and a TrainJob's) success, as Katib's constants write it."""
JOB_FAILURE = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
KUBEFLOW_SUCCESS = 'status.conditions.#(type=="Succeeded")#|#(status=="True")#'
KUBEFLOW_FAILURE = JOB_FAILURE

BATCH_JOB = "Job"
TRAINJOB = "TrainJob"
KUBEFLOW_JOB_KINDS = ("TFJob", "PyTorchJob", "XGBoostJob", "MPIJob", TRAINJOB)
"""The trial kinds Katib defaults (``KubeflowJobKinds``), matched by kind alone as Katib does."""
MASTER_POD_LABELS = {"training.kubeflow.org/job-role": "master"}
TRAINJOB_POD_LABELS = {"jobset.sigs.k8s.io/replicatedjob-name": "node", "batch.kubernetes.io/job-completion-index": "0"}


def _dict(value: Any) -> Obj | None:
    return value if isinstance(value, dict) else None


def trial_conditions(kind: str) -> tuple[str, str] | None:
    """Katib's default (success, failure) conditions of a trial job's kind; None where it has none."""
    if kind in (BATCH_JOB, TRAINJOB):
        return JOB_SUCCESS, JOB_FAILURE
    if kind in KUBEFLOW_JOB_KINDS:
        return KUBEFLOW_SUCCESS, KUBEFLOW_FAILURE
    return None


def metric_strategy(objective_type: Any) -> str:
    return {"minimize": "min", "maximize": "max"}.get(str(objective_type), "latest")


def _objective(objective: Obj) -> None:
    strategies = objective.get("metricStrategies")
    if not isinstance(strategies, list):
        if strategies is not None:
            return
        strategies = objective["metricStrategies"] = []
    named = {s.get("name") for s in strategies if isinstance(s, dict)}
    wanted = metric_strategy(objective.get("type"))
    additional = objective.get("additionalMetricNames")
    metrics = [objective.get("objectiveMetricName"), *(additional if isinstance(additional, list) else [])]
    for metric in metrics:
        if isinstance(metric, str) and metric not in named:
            strategies.append({"name": metric, "value": wanted})
            named.add(metric)


def _trial_template(template: Obj) -> None:
    trial_spec = _dict(template.get("trialSpec"))
    if trial_spec is None:
        return
    kind = str(trial_spec.get("kind") or "")
    found = trial_conditions(kind)
    if found is None:
        return
    success, failure = found
    if not template.get("successCondition"):
        template["successCondition"] = success
    if not template.get("failureCondition"):
        template["failureCondition"] = failure
    if kind in KUBEFLOW_JOB_KINDS and not template.get("primaryPodLabels"):
        template["primaryPodLabels"] = dict(TRAINJOB_POD_LABELS if kind == TRAINJOB else MASTER_POD_LABELS)


def _metrics_collector(spec: Obj) -> None:
    collector_spec = spec.setdefault("metricsCollectorSpec", {})
    if not isinstance(collector_spec, dict):
        return
    collector = collector_spec.setdefault("collector", {"kind": STDOUT_COLLECTOR})
    if not isinstance(collector, dict):
        return
    if not collector.get("kind"):
        collector["kind"] = STDOUT_COLLECTOR
    if collector["kind"] != FILE_COLLECTOR:
        return
    source = collector_spec.setdefault("source", {})
    path = source.setdefault("fileSystemPath", {}) if isinstance(source, dict) else None
    if not isinstance(path, dict):
        return
    for key, value in (("kind", FILE_KIND), ("path", DEFAULT_METRICS_FILE), ("format", TEXT_FORMAT)):
        if not path.get(key):
            path[key] = value


def default_experiment(obj: Obj, old: Obj | None = None) -> None:
    """Katib's ``SetDefault``, in place (on create and on update, as its mutating webhook runs)."""
    del old  # Katib defaults an update as it defaults a create
    spec = _dict(obj.get("spec"))
    if spec is None:
        return
    if spec.get("parallelTrialCount") is None:
        spec["parallelTrialCount"] = DEFAULT_PARALLEL_TRIALS
    if not spec.get("resumePolicy"):
        spec["resumePolicy"] = NEVER_RESUME
    objective = _dict(spec.get("objective"))
    if objective is not None:
        _objective(objective)
    template = _dict(spec.get("trialTemplate"))
    if template is not None:
        _trial_template(template)
    _metrics_collector(spec)
    for parameter in spec.get("parameters") or []:
        space = _dict(parameter.get("feasibleSpace")) if isinstance(parameter, dict) else None
        if space is not None and not space.get("distribution"):
            space["distribution"] = DEFAULT_DISTRIBUTION
