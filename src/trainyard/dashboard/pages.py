"""A live job's page as one JSON value (the contract's JobDetail), and what may be done to it.

Read from the dashboard's caches (``watching.Watched``: the job, its pods, their events) and what
the history store holds of the job (its metric points, the checkpoints it reported over time),
which the caller reads off the event loop; a search job's, its trials (``searches``) and the points
of its trials' jobs. The actions a
job offers follow from its family's view and its CRD: suspend/resume where the view names a
suspend field, scale where the kind's CRD serves the scale subresource and the job is elastic
(its spec has an ``elasticPolicy``, whose min/max bound it).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from trainyard.api import families
from trainyard.api.meta import Obj
from trainyard.api.searchview import Trials
from trainyard.dashboard import searches, views
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


def trials_of(job: Obj, watched: Watched) -> tuple[Trials, dict[str, Obj]] | None:
    """A search job's trials (its family's ``JobView.search``, over the trial objects it owns) and
    the trials' jobs the caches hold, by trial name; None for a job that is no search."""
    search = views.view_of(job).search
    if search is None:
        return None
    meta = job["metadata"]
    owned = watched.owned_by(meta.get("uid", ""), search.trial_kind.plural) if search.trial_kind else []
    trials = search.read(job, owned)
    namespace = str(meta.get("namespace") or "")
    jobs = {}
    for t in trials.rows:
        found = watched.job_named(namespace, t.job.kind, t.job.name) if t.job else None
        if found is not None:
            jobs[t.name] = found
    return trials, jobs


def curve_jobs(found: tuple[Trials, dict[str, Obj]] | None) -> dict[str, str]:
    """Trial name → the uid of its job, for each trial whose curve is its job's recorded points."""
    if found is None:
        return {}
    trials, jobs = found
    return {t.name: jobs[t.name]["metadata"]["uid"] for t in trials.rows if t.curve is None and t.name in jobs}


def detail(
    job: Obj,
    watched: Watched,
    *,
    points: list[Json],
    checkpoints: list[Json],
    search: tuple[Trials, dict[str, Obj]] | None = None,
    trial_points: dict[str, list[Json]] | None = None,
) -> Json:
    """The page of ``job``, with what the history store holds of it (its points and checkpoints); a
    search's with its trials (``trials_of``) and its trials' jobs' points, by trial name."""
    row = views.row(job)
    uid = row["uid"]
    found = None
    if search is not None:
        trials, jobs = search
        links = {name: {k: views.row(j)[k] for k in ("namespace", "plural", "name")} for name, j in jobs.items()}
        found = searches.section(trials, links, trial_points or {})
    return {
        "row": row,
        "yaml": views.as_yaml(job),
        "conditions": views.condition_timeline(job),
        "replicas": views.replica_groups(watched.pods_of(uid)),
        "events": views.events_table(watched.events_of(uid)),
        "checkpoints": checkpoints,
        "metrics": points,
        "actions": actions(job, row),
        "search": found,
    }
