"""An Experiment's trial template: its ``${trialParameters.x}`` placeholders and the job a Trial runs.

Katib's manifest generator (``experiment/manifest/generator.go``) turns the template and one
suggestion's assignments into a Trial's ``runSpec``: each ``trialParameters`` row names a
placeholder and what fills it, a search parameter (``reference: lr``) or the Trial's own metadata
(``reference: ${trialSpec.Name}``, also ``Namespace``, ``Kind``, ``APIVersion``, ``Labels[key]``,
``Annotations[key]``, the last two read from the template's metadata). Katib replaces the
placeholders in the template's JSON text; here every string of the tree is replaced instead (keys
too), so a value with a quote in it stays a value. ``run_spec`` is what the Trial controller
calls; the validator uses ``placeholders`` and ``is_meta_reference``. Pure.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from trainyard.api.katib import TRIAL_PARAMETER_FORMAT
from trainyard.api.meta import Obj

PLACEHOLDER = re.compile(r"\$\{trialParameters\..+?\}")
META_REFERENCE = re.compile(r"\$\{trialSpec\.(.+?)\}")
_INDEXED = re.compile(r"^(.+)\[(.+)]$")
META_KEYS = ("Name", "Namespace", "Kind", "APIVersion", "Annotations", "Labels")


class TemplateError(ValueError):
    """The template and the assignments do not make a job; the message says which reference failed."""


def text(trial_spec: Any) -> str:
    """The template as Katib searches it for placeholders: its JSON text."""
    return json.dumps(trial_spec, sort_keys=True)


def placeholders(trial_spec: Any) -> list[str]:
    """Every ``${trialParameters.x}`` the template holds, in order of first appearance."""
    return list(dict.fromkeys(PLACEHOLDER.findall(text(trial_spec))))


def meta_key(reference: str) -> tuple[str, str | None] | None:
    """``${trialSpec.Labels[team]}`` → ("Labels", "team"); ``${trialSpec.Name}`` → ("Name", None); else None."""
    found = META_REFERENCE.search(reference)
    if found is None:
        return None
    key = found[1]
    if key in META_KEYS:
        return key, None
    indexed = _INDEXED.match(key)
    if indexed is not None and indexed[1] in META_KEYS:
        return indexed[1], indexed[2]
    return None


def is_meta_reference(reference: str) -> bool:
    return meta_key(reference) is not None


def _meta_value(reference: str, trial_spec: Obj, name: str, namespace: str) -> str:
    found = meta_key(reference)
    if found is None:
        raise TemplateError(f"illegal reference of trial metadata: {reference}")
    key, index = found
    metadata = trial_spec.get("metadata") if isinstance(trial_spec.get("metadata"), dict) else {}
    simple = {
        "Name": name,
        "Namespace": namespace,
        "Kind": str(trial_spec.get("kind", "")),
        "APIVersion": str(trial_spec.get("apiVersion", "")),
    }
    if key in simple and index is None:
        return simple[key]
    values = (metadata or {}).get("labels" if key == "Labels" else "annotations") or {}
    if index is None or index not in values:
        raise TemplateError(f"illegal reference of trial metadata: {reference}; the template has no {key[:-1]} {index}")
    return str(values[index])


def _replace(value: Any, fills: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for placeholder, fill in fills.items():
            value = value.replace(placeholder, fill)
        return value
    if isinstance(value, list):
        return [_replace(v, fills) for v in value]
    if isinstance(value, dict):
        return {_replace(k, fills): _replace(v, fills) for k, v in value.items()}
    return value


def run_spec(experiment: Obj, *, name: str, namespace: str, assignments: Mapping[str, str]) -> Obj:
    """The job one Trial runs: the template with its placeholders filled, named ``name`` in ``namespace``.

    ``assignments``: the suggestion's values by search-parameter name. Raises ``TemplateError`` when a
    reference has no value, or an assignment fills no trial parameter (Katib's generator errors).
    """
    template = (experiment.get("spec") or {}).get("trialTemplate") or {}
    trial_spec = template.get("trialSpec")
    if not isinstance(trial_spec, dict):
        raise TemplateError("spec.trialTemplate.trialSpec: the Experiment has no inline trial template")
    fills: dict[str, str] = {}
    used = 0
    for row in template.get("trialParameters") or []:
        placeholder = TRIAL_PARAMETER_FORMAT % row.get("name")
        reference = str(row.get("reference") or "")
        if META_REFERENCE.search(reference):
            fills[placeholder] = _meta_value(reference, trial_spec, name, namespace)
        elif reference in assignments:
            fills[placeholder] = str(assignments[reference])
            used += 1
        else:
            raise TemplateError(f"parameter {reference} has no value among the assignments {dict(assignments)}")
    if used != len(assignments):
        raise TemplateError(f"the assignments {dict(assignments)} are not all trial parameters of the template")
    out: Obj = _replace(copy.deepcopy(trial_spec), fills)
    metadata = out.setdefault("metadata", {})
    metadata["name"], metadata["namespace"] = name, namespace
    return out
