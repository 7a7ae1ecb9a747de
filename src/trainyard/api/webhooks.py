"""The admission webhooks of the custom kinds outside ``api.kinds``: (group, kind) → (default, validate).

The API server's admission looks a custom resource's kind up here and, on create and update (not
on the status subresource), runs ``default`` first and ``validate`` on what the CRD schema
accepted, as a mutating then a validating webhook would (JobSet, Trainer v2's kinds, the
TrainingJob, Katib's Experiment). The v1 job kinds have their own table (``api.kinds``) and
webhook (``api.validation.review_job``).

Adding a kind means one row here; the generic admission code never names a kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainyard.api import jobset, katib, trainer, trainingjob
from trainyard.api.field_errors import FieldError
from trainyard.api.meta import Obj
from trainyard.api.trainer import optimizationjob


def _no_defaults(obj: Obj, old: Obj | None) -> None:
    del obj, old


@dataclass(frozen=True)
class Webhook:
    """``default(obj, old)`` mutates in place; ``validate(obj, old)`` returns every problem."""

    default: Callable[[Obj, Obj | None], None]
    validate: Callable[[Obj, Obj | None], list[FieldError]]


WEBHOOKS: dict[tuple[str, str], Webhook] = {
    (jobset.GROUP, jobset.KIND): Webhook(lambda obj, old: jobset.default(obj), jobset.validate),
    (trainer.GROUP, trainer.TRAINJOB): Webhook(lambda obj, old: trainer.default(obj, old), trainer.validate),
    (trainer.GROUP, trainer.TRAINING_RUNTIME): Webhook(_no_defaults, trainer.validate_runtime),
    (trainer.GROUP, trainer.CLUSTER_TRAINING_RUNTIME): Webhook(_no_defaults, trainer.validate_runtime),
    (trainingjob.GROUP, trainingjob.KIND): Webhook(trainingjob.default, trainingjob.validate),
    (katib.GROUP, katib.EXPERIMENT): Webhook(katib.default_experiment, katib.validate_experiment),
    (trainer.GROUP, trainer.OPTIMIZATIONJOB): Webhook(optimizationjob.default, optimizationjob.validate),
}


def webhook_for(group: str, kind: str) -> Webhook | None:
    return WEBHOOKS.get((group, kind))
