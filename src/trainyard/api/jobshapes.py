"""What the operator's per-job metrics show of a job: the ``JobSample`` and the readers families share.

Each job family (``api.families``) reads its jobs into a ``JobSample`` with its own pure reader
(``Family.sample``), from whichever shape its spec and status have: a replica-spec map and
``status.trainingProgress`` (``kubeflow.org/v1``), a runtime reference and ``status.trainerStatus``
(Trainer v2's TrainJob), a worker count and a flat status (seed 004's TrainingJob). States use seed
004's words (Pending, Initializing, Running, Completed, Failed, Suspended) plus v1's Restarting;
upstream's "Succeeded" and Trainer's "Complete" read as Completed. Label values that come from a
status (state, failure reason) are kept only when they look like the CamelCase words controllers
write, so a free-text status cannot blow up label cardinality.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from trainyard.api.meta import parse_time
from trainyard.api.quantity import parse_quantity

Obj = Mapping[str, Any]

GPU = "nvidia.com/gpu"
COMPLETED = "Completed"
FAILED = "Failed"
TERMINAL = frozenset({COMPLETED, FAILED})
IDLE = frozenset({*TERMINAL, "Suspended"})
"""States in which a job holds no replicas: its allocated workers and GPUs read 0."""

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{0,62}")
_SYNONYMS = {"Succeeded": COMPLETED, "Complete": COMPLETED}


@dataclass(frozen=True)
class JobSample:
    """One job as the per-job series show it; None where its status or spec does not say."""

    state: str
    progress: float | None = None
    epoch: float | None = None
    loss: float | None = None
    accuracy: float | None = None
    workers: int | None = None
    gpus: float | None = None
    started: datetime | None = None
    finished: datetime | None = None
    failure_reason: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL


# -- small readers shared by the shapes ------------------------------------------------------------


def word(value: object, default: str) -> str:
    """A label value from a status string: kept if it is one CamelCase word, else ``default``."""
    text = str(value) if isinstance(value, str) else ""
    text = _SYNONYMS.get(text, text)
    return text if _WORD.fullmatch(text) else default


def number(value: object) -> float | None:
    """A metric value: a number, or a string holding one (``"0.25"``, ``"45%"``); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip().removesuffix("%"))
        except ValueError:
            return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def time_of(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def true_condition(status: Obj, ctype: str) -> Obj | None:
    return next(
        (
            c
            for c in status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == ctype and c.get("status") == "True"
        ),
        None,
    )


def gpus(resources: object) -> Decimal:
    limits = (resources or {}).get("limits") if isinstance(resources, Mapping) else None
    try:
        return parse_quantity((limits or {}).get(GPU, 0))
    except ValueError:
        return Decimal(0)


def ended(status: Obj, state: str) -> tuple[datetime | None, str | None]:
    """When a terminal job ended (completionTime, else its terminal condition's time) and why it failed."""
    if state not in TERMINAL:
        return None, None
    for ctype in ("Failed", "Succeeded", "Complete", COMPLETED):
        found = true_condition(status, ctype)
        if found is not None:
            reason = word(found.get("reason"), "Unknown") if state == FAILED else None
            return time_of(status.get("completionTime")) or time_of(found.get("lastTransitionTime")), reason
    return time_of(status.get("completionTime")), ("Unknown" if state == FAILED else None)


def loss_and_accuracy(found: object) -> tuple[float | None, float | None]:
    values = found if isinstance(found, Mapping) else {}
    return number(values.get("loss")), number(values.get("accuracy"))
