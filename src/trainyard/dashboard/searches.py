"""A search job's trials as its page shows them (the contract's JobDetail ``search``), pure.

Whatever the search's family (its ``JobView.search`` reads its ``Trials``): the trials table (each
parameter a column, the state, the objective value, a link to the trial's job page where that job
exists, the best trial marked), the objective per trial with the best so far (trial order on x),
and each trial's curve of the objective metric: from the trial's own object when it holds the
values (``TrialRow.curve``), else from the metric points the history recorded of its job. No
kind is named here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainyard.api import searchview
from trainyard.api.searchview import TrialRow, Trials
from trainyard.dashboard.views import Json

REPORT = "report"
"""The curves' x axis when a value's report number is all that orders it (Katib's metric logs)."""
STEP = "step"
EPOCH = "epoch"
AXES = (STEP, EPOCH)
"""The x axes a recorded point may carry, the first that every value drawn carries is the curves'."""


def _better(goal: str, a: float, b: float | None) -> float:
    if b is None:
        return a
    return min(a, b) if goal == searchview.MINIMIZE else max(a, b)


Drawn = tuple[Mapping[str, float | None], float]
"""A value drawn: its x on each of ``AXES`` it carries, and its y."""


def _from_points(points: Sequence[Json], metric: str) -> list[Drawn]:
    """Each recorded point that holds the metric as a number, in report order."""
    out: list[Drawn] = []
    for p in points:
        value = searchview.number((p.get("metrics") or {}).get(metric))
        if value is not None:
            out.append(({axis: searchview.number(p.get(axis)) for axis in AXES}, value))
    return out


def curves(trials: Trials, points: Mapping[str, Sequence[Json]]) -> tuple[str, list[Json]]:
    """The x axis and each trial's curve ``[[x, y], ...]`` (ascending, one y per x): against the
    training step, else the epoch, when every value drawn carries it, else its report number."""
    read: list[tuple[TrialRow, list[Drawn]]] = []
    for t in trials.rows:
        if t.curve is not None:
            read.append((t, [({}, v) for v in t.curve]))
        elif t.name in points:
            read.append((t, _from_points(points[t.name], trials.metric)))
    drawn = [at for _, values in read for at, _ in values]
    axis = next((a for a in AXES if drawn and all(at.get(a) is not None for at in drawn)), REPORT)
    out = []
    for t, values in read:
        if not values:
            continue
        by_x: dict[float, float] = {}
        for i, (at, value) in enumerate(values, 1):
            x = at.get(axis) if axis != REPORT else None
            by_x[x if x is not None else i] = value  # an x reported again: the latest
        out.append({"trial": t.name, "points": [[x, by_x[x]] for x in sorted(by_x)]})
    return axis, out


def section(trials: Trials, links: Mapping[str, Json], points: Mapping[str, Sequence[Json]]) -> Json:
    """The page's ``search``: ``links`` maps a trial to its job's page (namespace, plural, name),
    ``points`` a trial whose object holds no curve to its job's recorded points."""
    rows, best = [], None
    for i, t in enumerate(trials.rows, 1):
        if t.value is not None:
            best = _better(trials.goal, t.value, best)
        rows.append(
            {
                "number": i,
                "name": t.name,
                "state": t.state,
                "parameters": dict(t.parameters),
                "value": t.value,
                "bestSoFar": best,
                "best": t.name == trials.best,
                "message": t.message,
                "job": links.get(t.name),
            }
        )
    axis, drawn = curves(trials, points)
    return {
        "metric": trials.metric,
        "goal": trials.goal,
        "parameters": list(trials.parameters),
        "best": trials.best,
        "trials": rows,
        "curveAxis": axis,
        "curves": drawn,
    }
