"""Admission validation of job manifests: every problem at once, each with a field path.

The rules are upstream's validating webhooks (kubeflow-v1 reference §2), with upstream's error
types and messages, and these fixes: a missing ``Master.replicas`` is accepted because
defaulting makes it 1; replica names that would not fit a Service name (63 characters) are
rejected up front instead of failing later; ``runPolicy.managedBy`` really is immutable on update
(upstream compares the new object with itself for PyTorchJob). Warnings (deprecated fields) are
returned beside the errors, as a webhook's ``admission.Warnings``, for a ``Warning`` header.
The rules every kind shares are here; a kind's own are its ``KindInfo.validate`` and ``warnings``.

Callers: the embedded API server (``cluster/objects.py``) and the operator's webhook endpoint
(``operator/webhook.py``), through ``review_job``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from trainyard.api.common import QUEUE_IMMUTABLE, EarlyStopping, SchedulingPolicy, TrainingJob
from trainyard.api.field_errors import ErrorType, FieldError, quote
from trainyard.api.kindinfo import KindInfo

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

_DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def dns1035_problems(name: str) -> list[str]:
    """``IsDNS1035Label``'s messages for ``name`` (none when it is valid), in its order."""
    out = []
    if len(name) > 63:
        out.append("must be no more than 63 characters")
    if not DNS1035.match(name):
        out.append(_DNS1035_MESSAGE)
    return out


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_job(body: Mapping[str, Any], info: KindInfo) -> tuple[TrainingJob | None, list[FieldError]]:
    """Parse ``body`` as ``info``'s model; type errors become field errors, never exceptions."""
    try:
        # Strict JSON-mode parsing: "2" is not an integer here, as it is not for a real API server
        # checking the CRD schema; the operator itself parses leniently.
        return info.model.model_validate_json(json.dumps(body), strict=True), []
    except ValidationError as exc:
        return None, type_errors(exc)


def type_errors(exc: ValidationError) -> list[FieldError]:
    """A model's parse errors as field errors, with their paths as Kubernetes writes them."""
    return [FieldError(ErrorType.TYPE_INVALID, _path(tuple(err["loc"])), err["msg"]) for err in exc.errors()]


@dataclass(frozen=True)
class Review:
    """What admission answers for one write: the errors (any means denied) and the warnings."""

    errors: list[FieldError]
    warnings: list[str]

    @property
    def allowed(self) -> bool:
        return not self.errors


def review_job(body: Mapping[str, Any], info: KindInfo, old: Mapping[str, Any] | None = None) -> Review:
    """Admission of a create (``old`` is None) or an update of a job manifest, as upstream's webhook.

    An update is validated whole, like a create, plus the immutable fields against ``old``. The
    manifest is parsed once for both (an update's review was three parses of a whole job: the
    operator's port annotation on every new job paid for them).
    """
    job, errors = parse_job(body, info)
    if job is not None:
        errors += _validate_parsed(job, info)
    if old is not None:
        errors += validate_update(old, body)
        if job is not None:
            errors += _queue_transition(old, job, info)
    return Review(errors, job_warnings(body, info))


def job_warnings(body: Mapping[str, Any], info: KindInfo) -> list[str]:
    """Deprecation warnings; computed from the raw body so they come even with type errors."""
    spec = body.get("spec")
    return info.warnings(spec) if isinstance(spec, Mapping) else []


def _managed_by(body: Mapping[str, Any]) -> object:
    spec = body.get("spec")
    policy = spec.get("runPolicy") if isinstance(spec, Mapping) else None
    return policy.get("managedBy") if isinstance(policy, Mapping) else None


def validate_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """Fields that may not change once the job exists."""
    before, after = _managed_by(old), _managed_by(new)
    if before != after:
        return [FieldError(ErrorType.INVALID, "spec.runPolicy.managedBy", f"{quote(after)}: field is immutable")]
    return []


def invalid_status(info: KindInfo, name: str, errors: list[FieldError]) -> dict[str, Any]:
    """The 422 ``Status`` of a denied write, as ``apierrors.NewInvalid`` builds it."""
    summary = ", ".join(str(e) for e in errors)
    if len(errors) > 1:
        summary = f"[{summary}]"
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "message": f'{info.kind}.{info.group} "{name}" is invalid: {summary}',
        "reason": "Invalid",
        "details": {
            "name": name,
            "group": info.group,
            "kind": info.kind,
            "causes": [{"reason": e.type.value, "message": e.message, "field": e.field} for e in errors],
        },
        "code": 422,
    }


def validate_job(body: Mapping[str, Any], info: KindInfo) -> list[FieldError]:
    """All admission errors for a job manifest; an empty list means it is valid."""
    job, errors = parse_job(body, info)
    return errors if job is None else _validate_parsed(job, info)


def _validate_parsed(job: TrainingJob, info: KindInfo) -> list[FieldError]:
    errors: list[FieldError] = []
    if info.common_replica_rules:
        errors += _validate_name(job, info)
        errors += _validate_replicas(job, info)
    errors += _validate_run_policy(job, info)
    errors += _validate_early_stopping(job, info)
    errors += info.validate(job)
    return errors


def validate_job_update(old: Mapping[str, Any], new: Mapping[str, Any], info: KindInfo) -> list[FieldError]:
    """Admission errors that only an update can have: the CRD's transition rules."""
    after, _ = parse_job(new, info)
    if after is None:
        return []  # validate_job reports what does not parse
    return _queue_transition(old, after, info)


def _queue_transition(old: Mapping[str, Any], new: TrainingJob, info: KindInfo) -> list[FieldError]:
    """``_queue_unchanged`` of ``new`` (parsed) against ``old``, which is parsed only when the rule can apply."""
    if (new.run_policy.scheduling_policy or SchedulingPolicy()).queue is None:
        return []
    before, _ = parse_job(old, info)
    if before is None:
        return []
    return _queue_unchanged(before, new)


def _queue_unchanged(old: TrainingJob, new: TrainingJob) -> list[FieldError]:
    """Upstream's CEL rule ``self == oldSelf`` on the queue: as CEL transition rules, it applies
    only when the queue is set both before and after (setting or removing it is allowed)."""
    was = (old.run_policy.scheduling_policy or SchedulingPolicy()).queue
    now = (new.run_policy.scheduling_policy or SchedulingPolicy()).queue
    if was is None or now is None or was == now:
        return []
    # The API server words CEL failures as Invalid with the value's type in place of the value.
    return [FieldError(ErrorType.INVALID, "spec.runPolicy.schedulingPolicy.queue", f'"string": {QUEUE_IMMUTABLE}')]


def _validate_name(job: TrainingJob, info: KindInfo) -> list[FieldError]:
    name = job.metadata.name or ""
    if not name and job.metadata.generate_name:
        return []
    problems = dns1035_problems(name)
    if problems:
        return [FieldError(ErrorType.INVALID, "metadata.name", f"{quote(name)}: should match: {','.join(problems)}")]
    longest = max(
        (f"{name}-{t.lower()}-{max((s.replicas or 1) - 1, 0)}" for t, s in job.replica_specs.items()),
        key=len,
        default=name,
    )
    if len(longest) > 63:
        return [
            FieldError(
                ErrorType.INVALID,
                "metadata.name",
                f'"{name}": replica pod and Service names such as "{longest}" would exceed 63 '
                "characters; use a shorter job name",
            )
        ]
    return []


def _validate_replicas(job: TrainingJob, info: KindInfo) -> list[FieldError]:
    base = f"spec.{info.replica_specs_field}"
    if not job.replica_specs:
        return [FieldError(ErrorType.REQUIRED, base, "must be required")]
    errors: list[FieldError] = []
    seen: dict[str, str] = {}
    for name, spec in job.replica_specs.items():
        path = f"{base}.{name}"
        canonical = next((t for t in info.replica_types if t.lower() == name.lower()), None)
        if canonical is None:
            supported = ", ".join(f'"{t}"' for t in info.replica_types)
            errors.append(FieldError(ErrorType.NOT_SUPPORTED, path, f'"{name}": supported values: {supported}'))
            continue
        if canonical in seen:
            errors.append(
                FieldError(ErrorType.DUPLICATE, path, f'"{name}" is the same replica type as "{seen[canonical]}"')
            )
        seen[canonical] = name
        containers = spec.template.spec.containers
        if not containers:
            errors.append(FieldError(ErrorType.REQUIRED, f"{path}.template.spec.containers", "must be specified"))
            continue
        for i, container in enumerate(containers):
            if not container.image:
                errors.append(
                    FieldError(ErrorType.REQUIRED, f"{path}.template.spec.containers[{i}].image", "must be required")
                )
        if not any(c.name == info.default_container for c in containers):
            errors.append(
                FieldError(
                    ErrorType.REQUIRED,
                    f"{path}.template.spec.containers",
                    "must have at least one container with name "
                    + (f'"{info.default_container}"' if info.quote_container_name else info.default_container),
                )
            )
        if spec.replicas is not None and spec.replicas < 1:
            errors.append(FieldError(ErrorType.FORBIDDEN, f"{path}.replicas", "must be at least 1"))
        if spec.restart_policy not in (None, "Always", "OnFailure", "Never", "ExitCode"):
            errors.append(
                FieldError(
                    ErrorType.NOT_SUPPORTED,
                    f"{path}.restartPolicy",
                    f'"{spec.restart_policy}": supported values: "Always", "ExitCode", "Never", "OnFailure"',
                )
            )
    return errors


def _validate_run_policy(job: TrainingJob, info: KindInfo) -> list[FieldError]:
    policy = job.run_policy
    errors: list[FieldError] = []
    for field in ("ttl_seconds_after_finished", "active_deadline_seconds", "backoff_limit"):
        value = getattr(policy, field)
        if value is not None and value < 0:
            camel = type(policy).model_fields[field].alias or field
            errors.append(FieldError(ErrorType.INVALID, f"spec.runPolicy.{camel}", f"{value}: must be >= 0"))
    if policy.managed_by is not None and policy.managed_by not in info.managed_by:
        supported = ", ".join(f'"{m}"' for m in info.managed_by)
        errors.append(
            FieldError(
                ErrorType.NOT_SUPPORTED,
                "spec.runPolicy.managedBy",
                f'"{policy.managed_by}": supported values: {supported}',
            )
        )
    return errors


EARLY_STOPPING_MODES = ("max", "min")


def _validate_early_stopping(job: TrainingJob, info: KindInfo) -> list[FieldError]:
    """trainyard's ``runPolicy.earlyStopping``: only where the kind reports progress, and well formed."""
    policy = job.run_policy.early_stopping
    path = "spec.runPolicy.earlyStopping"
    if policy is None:
        return []
    if not info.training_progress:
        return [FieldError(ErrorType.FORBIDDEN, path, f"{info.kind} does not report status.trainingProgress")]
    errors = _early_stopping_values(policy, path)
    if policy.target is None and policy.patience is None:
        errors.append(FieldError(ErrorType.REQUIRED, path, "must set target, patience or both"))
    return errors


def _early_stopping_values(policy: EarlyStopping, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if policy.metric is not None and not policy.metric.strip():
        errors.append(FieldError(ErrorType.INVALID, f"{path}.metric", f"{quote(policy.metric)}: must not be empty"))
    if policy.mode is not None and policy.mode not in EARLY_STOPPING_MODES:
        supported = ", ".join(f'"{m}"' for m in EARLY_STOPPING_MODES)
        errors.append(
            FieldError(ErrorType.NOT_SUPPORTED, f"{path}.mode", f"{quote(policy.mode)}: supported values: {supported}")
        )
    if policy.patience is not None and policy.patience < 1:
        errors.append(FieldError(ErrorType.INVALID, f"{path}.patience", f"{policy.patience}: must be >= 1"))
    if policy.min_delta is not None and not policy.min_delta >= 0:  # NaN too
        errors.append(FieldError(ErrorType.INVALID, f"{path}.minDelta", f"{policy.min_delta}: must be >= 0"))
    return errors
