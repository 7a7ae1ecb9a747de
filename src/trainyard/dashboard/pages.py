"""A live job's page as one JSON value (the contract's JobDetail), and what may be done to it.

Read from the dashboard's caches (``watching.Watched``: the job, its pods, their events) and what
the history store holds of the job (its metric points, the checkpoints it reported over time),
which the caller reads off the event loop. The actions a
job offers follow from its family's view and its CRD: suspend/resume where the view names a
suspend field, scale where the kind's CRD serves the scale subresource and the job is elastic
(its spec has an ``elasticPolicy``, whose min/max bound it).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from trainyard.api import families
from trainyard.api.meta import Obj
from trainyard.dashboard import views
from trainyard.dashboard.views import Json
from trainyard.dashboard.watching import Watched


@cache
def scale_paths() -> dict[tuple[str, str], Json]:
    """(group, plural) of every job kind whose CRD serves ``/scale``, to its scale paths."""
    found: dict[tuple[str, str], Json] = {}
    for crd in families.crds():
        spec = crd.get("spec") or {}
        for version in spec.get("versions") or []:
            scale = (version.get("subresources") or {}).get("scale")
            if scale:
                found[(spec.get("group", ""), spec["names"]["plural"])] = dict(scale)
    return found


def _at(obj: Any, path: str) -> Any:
    for part in path.lstrip(".").split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def scale_of(job: Obj, row: Json) -> Json | None:
    """The replicas the scale subresource reads now, and the elastic bounds; None if not scalable."""
    paths = scale_paths().get((row["group"], row["plural"]))
    elastic = _at(job, "spec.elasticPolicy")
    # A job of a static world restarts as a whole gang at a new size: only an elastic one is offered it.
    if paths is None or row["finished"] is not None or not isinstance(elastic, dict):
        return None
    replicas = _at(job, paths.get("specReplicasPath", ""))
    return {
        "replicas": replicas if isinstance(replicas, int) else None,
        "min": elastic.get("minReplicas"),
        "max": elastic.get("maxReplicas"),
    }


def actions(job: Obj, row: Json) -> Json:
    over = row["finished"] is not None
    # A kind that cannot be suspended (its view names no field) is offered neither.
    can = views.view_of(job).suspend_field is not None
    return {
        "suspend": can and not over and not row["suspended"],
        "resume": can and not over and row["suspended"],
        "delete": True,
        "scale": scale_of(job, row),
    }


def detail(job: Obj, watched: Watched, *, points: list[Json], checkpoints: list[Json]) -> Json:
    """The page of ``job``, with what the history store holds of it (its points and checkpoints)."""
    row = views.row(job)
    uid = row["uid"]
    return {
        "row": row,
        "yaml": views.as_yaml(job),
        "conditions": views.condition_timeline(job),
        "replicas": views.replica_groups(watched.pods_of(uid)),
        "events": views.events_table(watched.events_of(uid)),
        "checkpoints": checkpoints,
        "metrics": points,
        "actions": actions(job, row),
    }
