"""A Trial made from its Experiment's ``trialTemplate`` and one parameter assignment, as Katib makes it.

The job is ``trialSpec`` with its placeholders filled (``api.katib.templates.run_spec``, as Katib's
manifest generator), named like its Trial, in its namespace, carrying the Experiment's and the
Trial's labels.

Under the File metrics collector, the job's primary container gets what Katib's pod webhook gives
it: an ``emptyDir`` at the metrics file's directory, and its command wrapped (``sh``, as Katib's
wrapper needs) so that when the training exits, the file's lines reach the container's output,
each marked with ``FILE_PREFIX``, where the collector reads them through the API like StdOut.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from trainyard.api import katib
from trainyard.api.katib.templates import TemplateError, run_spec
from trainyard.api.meta import Obj

FILE_PREFIX = "[katib-metrics-file] "
"""How the wrapped command marks the metrics file's lines in the primary container's output."""
METRICS_VOLUME = "katib-metrics"
_SHOW_FILE = (
    '"$@"; code=$?; if [ -f "$KATIB_METRICS_FILE" ]; then '
    'while IFS= read -r line || [ -n "$line" ]; do printf \'%s%s\\n\' "$KATIB_METRICS_PREFIX" "$line"; done '
    '< "$KATIB_METRICS_FILE"; fi; exit $code'
)


def render(experiment: Obj, name: str, assignments: Mapping[str, str]) -> Obj:
    """The trial's job: ``trialSpec`` with ``assignments`` (parameter name to value) filled in
    (``api.katib.templates``), labelled with its Experiment and Trial, set up for its collector."""
    rendered = run_spec(experiment, name=name, namespace=experiment["metadata"]["namespace"], assignments=assignments)
    labels = rendered.setdefault("metadata", {}).setdefault("labels", {})
    labels[katib.EXPERIMENT_LABEL] = experiment["metadata"]["name"]
    labels[katib.TRIAL_LABEL] = name
    # Its pods too, where the job holds their templates (``yard logs experiment/x``, Katib's trial label).
    for pod_template in _pod_templates(rendered):
        pod_labels = pod_template.setdefault("metadata", {}).setdefault("labels", {})
        pod_labels[katib.EXPERIMENT_LABEL] = experiment["metadata"]["name"]
        pod_labels[katib.TRIAL_LABEL] = name
    collector = ((spec_of(experiment).get("metricsCollectorSpec") or {}).get("collector") or {}).get("kind")
    if collector == katib.FILE_COLLECTOR:
        _with_metrics_file(rendered, experiment)
    return rendered


def spec_of(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def metrics_file(experiment_or_trial: Obj) -> str:
    """The File collector's path (Katib's default when the spec names none)."""
    spec = spec_of(experiment_or_trial)
    collector = spec.get("metricsCollectorSpec") or spec.get("metricsCollector") or {}
    path = ((collector.get("source") or {}).get("fileSystemPath") or {}).get("path")
    return str(path or katib.DEFAULT_METRICS_FILE)


def _pod_templates(node: Any) -> list[Obj]:
    """Every pod template in a job manifest: the dicts whose ``spec`` holds a ``containers`` list."""
    found: list[Obj] = []
    if isinstance(node, dict):
        if isinstance(node.get("spec"), dict) and isinstance(node["spec"].get("containers"), list):
            found.append(node)
        for value in node.values():
            found += _pod_templates(value)
    elif isinstance(node, list):
        for value in node:
            found += _pod_templates(value)
    return found


def _with_metrics_file(job: Obj, experiment: Obj) -> None:
    template = spec_of(experiment).get("trialTemplate") or {}
    primary = template.get("primaryContainerName")
    path = metrics_file(experiment)
    directory = path.rpartition("/")[0] or "/"
    for pod in (template["spec"] for template in _pod_templates(job)):
        wrapped = False
        for container in pod["containers"]:
            if primary and container.get("name") != primary:
                continue
            command = [*(container.get("command") or []), *(container.get("args") or [])]
            if not command:
                raise TemplateError(
                    "spec.trialTemplate.trialSpec: the File metrics collector wraps the primary container's command, "
                    f"and container {container.get('name')!r} has none: set its command"
                )
            container["command"] = ["sh", "-c", _SHOW_FILE, "sh", *command]
            container.pop("args", None)
            container["env"] = [
                *(
                    e
                    for e in container.get("env") or []
                    if e.get("name") not in ("KATIB_METRICS_FILE", "KATIB_METRICS_PREFIX")
                ),
                {"name": "KATIB_METRICS_FILE", "value": path},
                {"name": "KATIB_METRICS_PREFIX", "value": FILE_PREFIX},
            ]
            mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") != METRICS_VOLUME]
            container["volumeMounts"] = [*mounts, {"name": METRICS_VOLUME, "mountPath": directory}]
            wrapped = True
        if wrapped:
            volumes = [v for v in pod.get("volumes") or [] if v.get("name") != METRICS_VOLUME]
            pod["volumes"] = [*volumes, {"name": METRICS_VOLUME, "emptyDir": {}}]


def trial(experiment: Obj, assignment: Obj, job: Obj) -> Obj:
    """The Trial object for ``assignment`` (one of its Suggestion's ``status.suggestions``)."""
    spec = experiment.get("spec") or {}
    template = spec.get("trialTemplate") or {}
    name = str(assignment["name"])
    labels: dict[str, Any] = {
        **((template.get("trialMetadata") or {}).get("labels") or {}),
        **(assignment.get("labels") or {}),
    }
    labels[katib.EXPERIMENT_LABEL] = experiment["metadata"]["name"]
    trial_spec: Obj = {
        "objective": copy.deepcopy(spec.get("objective") or {}),
        "parameterAssignments": copy.deepcopy(assignment.get("parameterAssignments") or []),
        "runSpec": job,
        "metricsCollector": copy.deepcopy(spec.get("metricsCollectorSpec") or {}),
    }
    for source, target in (
        ("retain", "retainRun"),
        ("primaryPodLabels", "primaryPodLabels"),
        ("primaryContainerName", "primaryContainerName"),
        ("successCondition", "successCondition"),
        ("failureCondition", "failureCondition"),
    ):
        if template.get(source) not in (None, "", {}):
            trial_spec[target] = copy.deepcopy(template[source])
    if assignment.get("earlyStoppingRules"):
        trial_spec["earlyStoppingRules"] = copy.deepcopy(assignment["earlyStoppingRules"])
    if assignment.get("labels"):
        trial_spec["labels"] = copy.deepcopy(assignment["labels"])
    metadata: Obj = {"name": name, "namespace": experiment["metadata"]["namespace"], "labels": labels}
    annotations = (template.get("trialMetadata") or {}).get("annotations")
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": katib.API_VERSION, "kind": katib.TRIAL, "metadata": metadata, "spec": trial_spec}
