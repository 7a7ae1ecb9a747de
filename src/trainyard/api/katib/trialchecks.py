"""An Experiment's trial template and metrics collector, checked as Katib's validator checks them.

Split from ``validation`` (which calls ``template_problems`` and ``collector_problems``): the rules
on ``spec.trialTemplate`` (source, parameters and placeholders, conditions, primary container)
and on ``spec.metricsCollectorSpec`` (collector kinds, file source, filters). Pure.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from trainyard.api.field_errors import ErrorType, FieldError, quote
from trainyard.api.katib import (
    COLLECTORS,
    FILE_COLLECTOR,
    PUSH_COLLECTOR,
    TRIAL_PARAMETER_FORMAT,
    conditions,
    templates,
)
from trainyard.api.katib.defaults import FILE_KIND, JSON_FORMAT, TEXT_FORMAT
from trainyard.api.katib.kinds import trial_kind
from trainyard.api.meta import Obj

NOT_SUPPORTED = "not supported by trainyard"
TEMPLATE = "spec.trialTemplate"
COLLECTOR = "spec.metricsCollectorSpec"
SOURCE = f"{COLLECTOR}.source"
COLLECTOR_ADVICE = (
    "print name=value lines (StdOut), write them to a file (File) or report them with trainyard.runtime.report() (Push)"
)
CONFIGMAP_ADVICE = f"{NOT_SUPPORTED}: a trial template from a ConfigMap; write it inline as {TEMPLATE}.trialSpec"
_TWO_GROUPS = re.compile(r".*\(.*\).*\(.*\).*")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, path, f"{quote(value)}: {detail}")


def container_names(value: Any) -> list[str]:
    """The names of every container list in the template (a Job's, each replica's), in order."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("containers", "initContainers") and isinstance(item, list):
                found += [str(c["name"]) for c in item if isinstance(c, dict) and c.get("name")]
            else:
                found += container_names(item)
    elif isinstance(value, list):
        for item in value:
            found += container_names(item)
    return list(dict.fromkeys(found))


def _conditions(template: Obj) -> list[FieldError]:
    if not template.get("successCondition") or not template.get("failureCondition"):
        return [FieldError(ErrorType.REQUIRED, TEMPLATE, "successCondition and failureCondition must be specified")]
    out = []
    for key in ("successCondition", "failureCondition"):
        why = conditions.problem(str(template[key]))
        if why is not None:
            out.append(FieldError(ErrorType.INVALID, f"{TEMPLATE}.{key}", f"{quote(template[key])}: {why}"))
    return out


def _trial_parameters(spec: Obj, template: Obj, trial_spec: Obj) -> list[FieldError]:
    names = {_dict(p).get("name") for p in spec.get("parameters") or []}
    out: list[FieldError] = []
    used = set(templates.placeholders(trial_spec))
    seen_names: set[str] = set()
    seen_refs: set[str] = set()
    declared: set[str] = set()
    for i, row in enumerate(template.get("trialParameters") or []):
        row = _dict(row)
        path = f"{TEMPLATE}.trialParameters[{i}]"
        name, reference = str(row.get("name") or ""), str(row.get("reference") or "")
        if not name or not reference or "{" in name or "}" in name:
            detail = "name and reference must be specified and name must not contain '{' or '}'"
            out.append(_invalid(path, "", detail))
            continue
        if name in seen_names:
            detail = f"parameter name {name} can't be duplicated in spec.trialTemplate.trialParameters"
            out.append(_invalid(f"{path}.name", name, detail))
            continue
        if reference in seen_refs:
            detail = f"parameter reference {reference} can't be duplicated in spec.trialTemplate.trialParameters"
            out.append(_invalid(f"{path}.reference", reference, detail))
            continue
        seen_names.add(name)
        seen_refs.add(reference)
        placeholder = TRIAL_PARAMETER_FORMAT % name
        declared.add(placeholder)
        if names and not templates.is_meta_reference(reference) and reference not in names:
            detail = (
                f"parameter reference {reference} does not exist in spec.parameters "
                f"({', '.join(sorted(str(n) for n in names))}) and is no trial metadata reference "
                f"(${{trialSpec.Name}}, Namespace, Kind, APIVersion, Labels[key], Annotations[key])"
            )
            out.append(_invalid(f"{path}.reference", reference, detail))
        if placeholder not in used:
            detail = f"parameter name: {name} in spec.trialParameters not found in spec.trialTemplate ({placeholder})"
            out.append(_invalid(f"{path}.name", name, detail))
    undeclared = [p for p in templates.placeholders(trial_spec) if p not in declared]
    if undeclared:
        detail = f"parameters: {' '.join(undeclared)} in spec.trialTemplate not found in spec.trialParameters"
        out.append(_invalid(f"{TEMPLATE}.trialSpec", "...", detail))
    return out


def _trial_spec(template: Obj, trial_spec: Obj) -> list[FieldError]:
    out: list[FieldError] = []
    metadata = _dict(trial_spec.get("metadata"))
    if metadata.get("name") or metadata.get("namespace"):
        detail = "metadata.name and metadata.namespace in spec.trialTemplate must be omitted"
        out.append(_invalid(f"{TEMPLATE}.trialSpec.metadata", "...", detail))
    if not trial_spec.get("apiVersion") or not trial_spec.get("kind"):
        detail = "APIVersion and Kind in spec.trialTemplate must be specified"
        out.append(FieldError(ErrorType.REQUIRED, f"{TEMPLATE}.trialSpec", detail))
    primary = template.get("primaryContainerName")
    containers = container_names(trial_spec)
    # trainyard's: the container whose output is the trial's metrics must exist where the template
    # lists containers at all (a TrainJob's come from its runtime: its "node").
    if primary and containers and primary not in containers:
        detail = f"must name a container of spec.trialTemplate.trialSpec: one of {', '.join(containers)}"
        out.append(_invalid(f"{TEMPLATE}.primaryContainerName", primary, detail))
    return out


def template_problems(spec: Obj) -> list[FieldError]:
    """Katib's ``validateTrialTemplate``, with trainyard's limits (inline templates; the conditions' subset)."""
    template = spec.get("trialTemplate")
    if not isinstance(template, dict):
        return [FieldError(ErrorType.REQUIRED, TEMPLATE, "must be specified")]
    out: list[FieldError] = []
    if not template.get("primaryContainerName"):
        out.append(FieldError(ErrorType.REQUIRED, f"{TEMPLATE}.primaryContainerName", "must be specified"))
    out += _conditions(template)
    if template.get("trialParameters") is None:
        return [*out, FieldError(ErrorType.REQUIRED, f"{TEMPLATE}.trialParameters", "must be specified")]
    has_spec, has_map = template.get("trialSpec") is not None, template.get("configMap") is not None
    if has_spec and has_map:
        detail = "only one of spec.trialTemplate.trialSpec or spec.trialTemplate.configMap can be specified"
        return [*out, FieldError(ErrorType.FORBIDDEN, f"{TEMPLATE}.configMap", detail)]
    if has_map:
        return [*out, FieldError(ErrorType.FORBIDDEN, f"{TEMPLATE}.configMap", CONFIGMAP_ADVICE)]
    if not has_spec:
        detail = "spec.trialTemplate.trialSpec or spec.trialTemplate.configMap must be specified"
        return [*out, FieldError(ErrorType.REQUIRED, f"{TEMPLATE}.trialSpec", detail)]
    trial_spec = _dict(template["trialSpec"])
    return out + _trial_parameters(spec, template, trial_spec) + _trial_spec(template, trial_spec)


def _file_source(collector_spec: Obj) -> list[FieldError]:
    source = _dict(collector_spec.get("source"))
    path = _dict(source.get("fileSystemPath"))
    out: list[FieldError] = []
    where = f"{SOURCE}.fileSystemPath"
    if path.get("kind") != FILE_KIND or not posixpath.isabs(str(path.get("path") or "")):
        out.append(FieldError(ErrorType.REQUIRED, f"{where}.path", "file path where metrics file exists is required"))
    file_format = path.get("format")
    if file_format not in (TEXT_FORMAT, JSON_FORMAT):
        detail = f"format of metrics file is required for metrics collector: {TEXT_FORMAT} or {JSON_FORMAT}"
        out.append(FieldError(ErrorType.REQUIRED, f"{where}.format", detail))
    if file_format == JSON_FORMAT and source.get("filter") is not None:
        out.append(_invalid(f"{SOURCE}.filter", "", "filter must be nil when format of metrics file is json"))
    return out


def _push_source(spec: Obj) -> list[FieldError]:
    """Push reads what training reports into its job's status: a kind whose status holds no reports cannot."""
    trial_spec = _dict(_dict(spec.get("trialTemplate")).get("trialSpec"))
    kind = trial_kind(trial_spec)
    if kind is None or kind.reports:
        return []
    detail = (
        f"a {kind.kind} ({kind.api_version}) trial has no status that trainyard.runtime.report() writes: print "
        "name=value lines and use StdOut, or run the trial as a kind that reports (PyTorchJob, TrainJob, ...)"
    )
    return [FieldError(ErrorType.NOT_SUPPORTED, f"{COLLECTOR}.collector.kind", f"{quote(PUSH_COLLECTOR)}: {detail}")]


def collector_problems(spec: Obj) -> list[FieldError]:
    """Katib's ``validateMetricsCollector`` for the collectors trainyard runs."""
    collector_spec = _dict(spec.get("metricsCollectorSpec"))
    kind = _dict(collector_spec.get("collector")).get("kind")
    out: list[FieldError] = []
    if kind not in COLLECTORS:
        choices = ", ".join(quote(c) for c in COLLECTORS)
        detail = f"{quote(kind)}: {NOT_SUPPORTED}: use one of {choices}: {COLLECTOR_ADVICE}"
        out.append(FieldError(ErrorType.NOT_SUPPORTED, f"{COLLECTOR}.collector.kind", detail))
    elif kind == FILE_COLLECTOR:
        out += _file_source(collector_spec)
    elif kind == PUSH_COLLECTOR:
        out += _push_source(spec)
    formats = _dict(_dict(collector_spec.get("source")).get("filter")).get("metricsFormat") or []
    for i, pattern in enumerate(formats):
        path = f"{SOURCE}.filter.metricsFormat[{i}]"
        try:
            re.compile(str(pattern))
        except re.error as exc:
            out.append(_invalid(path, pattern, f"invalid filter: {exc}"))
            continue
        if not _TWO_GROUPS.match(str(pattern)):
            out.append(_invalid(path, pattern, "two top subexpressions are required"))
    return out
