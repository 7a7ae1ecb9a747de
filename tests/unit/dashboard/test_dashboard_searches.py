"""A search job's page and row, whatever the search's kind: Katib's Experiment (its Trials, their
observationLog as curves) and Trainer's OptimizationJob (its status.trials, its trial TrainJobs'
recorded points as curves); the trials table's parameters, states, values, links and best mark;
the best so far in the search's direction; the jobs list's progress and best value; and the
caches that find a search's trials (a real ``Watched`` whose client never connects, fed as its
informers' watches feed it), a trial's change reaching its search's open page."""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient, KubeConfig

from trainyard.dashboard import manifests, pages, searches, views
from trainyard.dashboard.live import Live, _Stream
from trainyard.dashboard.watching import Watched, owned_kinds
from trainyard.embedded import kubeconfig

T0 = "2026-03-01T11:00:00Z"


def meta(name: str, uid: str, *, owner: str | None = None, created: str = T0) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid, "creationTimestamp": created}
    if owner is not None:
        out["ownerReferences"] = [{"uid": owner, "controller": True, "kind": "Owner", "name": "o", "apiVersion": "v1"}]
    return out


def experiment(best: str | None = None, value: str = "0.2") -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}],
        "trialsSucceeded": 1,
    }
    if best:
        status["currentOptimalTrial"] = {
            "bestTrialName": best,
            "observation": {"metrics": [{"name": "loss", "min": value, "max": "0.9", "latest": "0.5"}]},
        }
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": meta("search", "exp-uid"),
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "parameters": [{"name": "lr"}, {"name": "momentum"}],
            "maxTrialCount": 4,
        },
        "status": status,
    }


def trial(name: str, created: str, lr: str, *conditions: str, values: tuple[float, ...] = (), low: str = "") -> Any:
    logs = [{"timeStamp": "", "metric": {"name": "loss", "value": repr(v)}} for v in values]
    logs.insert(1, {"timeStamp": "", "metric": {"name": "accuracy", "value": "0.5"}})  # another metric: not drawn
    logs.append({"timeStamp": "", "metric": {"name": "loss", "value": "unavailable"}})
    status: dict[str, Any] = {
        "conditions": [{"type": c, "status": "True", "message": f"{c} it is"} for c in conditions],
        "observationLog": {"metricLogs": logs},
    }
    if low:
        status["observation"] = {"metrics": [{"name": "loss", "min": low, "max": "9", "latest": "5"}]}
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": meta(name, f"{name}-uid", owner="exp-uid", created=created),
        "spec": {
            "parameterAssignments": [{"name": "lr", "value": lr}, {"name": "momentum", "value": "0.9"}],
            "runSpec": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}},
        },
        "status": status,
    }


def test_an_experiments_trials_read_from_its_trials_oldest_first_with_the_best_marked() -> None:
    job = experiment(best="search-b")
    owned = [
        trial("search-b", "2026-03-01T11:02:00Z", "0.1", "Created", "Running", values=(0.9, 0.2), low="0.2"),
        trial("search-a", "2026-03-01T11:01:00Z", "0.01", "Created", "Running", "Succeeded", values=(1.0,), low="0.5"),
        trial("search-c", "2026-03-01T11:03:00Z", "0.3", "Created"),
    ]
    found = views.view_of(job).search
    assert found is not None
    page = searches.section(found.read(job, owned), {}, {})
    assert (page["metric"], page["goal"], page["parameters"], page["best"]) == (
        "loss",
        "minimize",
        ["lr", "momentum"],
        "search-b",
    )
    rows = [(t["number"], t["name"], t["state"], t["parameters"]["lr"], t["value"], t["best"]) for t in page["trials"]]
    assert rows == [
        (1, "search-a", "Succeeded", "0.01", 0.5, False),
        (2, "search-b", "Running", "0.1", 0.2, True),  # the objective's strategy: min
        (3, "search-c", "Created", "0.3", None, False),
    ]
    assert [t["bestSoFar"] for t in page["trials"]] == [0.5, 0.2, 0.2]
    assert page["trials"][0]["message"] == "Succeeded it is"
    # Katib's metric logs are ordered by report alone; the objective's values only, the unavailable left out.
    assert page["curveAxis"] == searches.REPORT
    assert page["curves"] == [
        {"trial": "search-a", "points": [[1, 1.0]]},
        {"trial": "search-b", "points": [[1, 0.9], [2, 0.2]]},
    ]


def optimizationjob(direction: str = "Maximize") -> dict[str, Any]:
    trials = [
        {"name": "opt-trial-0", "parameters": [{"name": "lr", "value": "0.1"}], "state": "Complete", "value": "0.7"},
        {"name": "opt-trial-1", "parameters": [{"name": "lr", "value": "0.2"}], "state": "Complete", "value": "0.9"},
        {"name": "opt-trial-2", "parameters": [{"name": "lr", "value": "0.3"}], "state": "Failed", "message": "OOM"},
        {"name": "opt-trial-3", "parameters": [{"name": "lr", "value": "0.4"}], "state": "Running"},
    ]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "OptimizationJob",
        "metadata": meta("opt", "opt-uid"),
        "spec": {
            "objectives": [{"metric": "accuracy", "direction": direction}],
            "parameters": [{"name": "lr"}],
            "numTrials": 8,
        },
        "status": {
            "state": "Running",
            "trials": trials,
            "trialsSucceeded": 2,
            "trialsFailed": 1,
            "trialsRunning": 1,
            "result": {"trainJobName": "opt-trial-1", "parameters": [{"name": "lr", "value": "0.2"}]},
            "bestValue": "0.9",
        },
    }


def point(step: int | None, accuracy: float, epoch: int | None = None) -> dict[str, Any]:
    return {"time": T0, "step": step, "epoch": epoch, "metrics": {"accuracy": accuracy, "loss": 1 - accuracy}}


def test_an_optimizationjobs_trials_are_its_status_and_their_curves_its_trials_recorded_points() -> None:
    job = optimizationjob()
    found = views.view_of(job).search
    assert found is not None and found.trial_kind is None
    trials = found.read(job, [])
    link = {"namespace": "default", "plural": "trainjobs", "name": "opt-trial-0"}
    points = {"opt-trial-0": [point(1, 0.5), point(2, 0.6), point(2, 0.7)], "opt-trial-1": [point(5, 0.9)]}
    page = searches.section(trials, {"opt-trial-0": link}, points)
    rows = [(t["name"], t["state"], t["value"], t["bestSoFar"], t["best"], t["job"]) for t in page["trials"]]
    assert rows == [
        ("opt-trial-0", "Complete", 0.7, 0.7, False, link),
        ("opt-trial-1", "Complete", 0.9, 0.9, True, None),
        ("opt-trial-2", "Failed", None, 0.9, False, None),
        ("opt-trial-3", "Running", None, 0.9, False, None),
    ]
    assert page["goal"] == "maximize" and page["trials"][2]["message"] == "OOM"
    # Every point carries a step: against the step, a step reported again keeps its latest value.
    assert page["curveAxis"] == searches.STEP
    assert page["curves"] == [
        {"trial": "opt-trial-0", "points": [[1, 0.5], [2, 0.7]]},
        {"trial": "opt-trial-1", "points": [[5, 0.9]]},
    ]
    unstepped = searches.section(trials, {}, {"opt-trial-0": [point(None, 0.5), point(3, 0.6)]})
    assert (unstepped["curveAxis"], unstepped["curves"][0]["points"]) == (searches.REPORT, [[1, 0.5], [2, 0.6]])
    # no step, but every point's epoch (from 0): against the epoch
    by_epoch = searches.section(trials, {}, {"opt-trial-0": [point(None, 0.5, 0), point(None, 0.6, 1)]})
    assert (by_epoch["curveAxis"], by_epoch["curves"][0]["points"]) == (searches.EPOCH, [[0, 0.5], [1, 0.6]])


def test_a_minimizing_searchs_best_so_far_falls() -> None:
    job = optimizationjob(direction="Minimize")
    found = views.view_of(job).search
    assert found is not None
    page = searches.section(found.read(job, []), {}, {})
    assert [t["bestSoFar"] for t in page["trials"]] == [0.7, 0.7, 0.7, 0.7]


def test_the_jobs_list_shows_a_searchs_trials_done_of_its_budget_and_its_best_value() -> None:
    row = views.row(experiment(best="search-b", value="0.125"))
    assert (row["progress"], row["metrics"], row["replicas"]) == (25.0, {"best loss": 0.125}, "1/4 trials")
    assert views.row(experiment())["metrics"] == {}
    row = views.row(optimizationjob())
    assert (row["progress"], row["metrics"], row["replicas"]) == (37.5, {"best accuracy": 0.9}, "3/8")


def test_neither_search_offers_suspend() -> None:
    for job in (experiment(), optimizationjob()):
        offered = pages.actions(job, views.row(job))
        assert not offered["suspend"] and not offered["resume"] and offered["delete"]


def test_the_trials_of_a_search_that_are_objects_of_their_own_are_watched_and_granted() -> None:
    assert ("kubeflow.org", "v1beta1", "Trial", "trials") in owned_kinds()
    granted = {(g, r) for rule in manifests.rules() for g in rule["apiGroups"] for r in rule["resources"]}
    assert ("kubeflow.org", "trials") in granted


def watched() -> Watched:
    return Watched(AsyncClient(KubeConfig.from_dict(kubeconfig("http://127.0.0.1:1"))))


def test_a_searchs_page_finds_its_trials_in_the_caches_and_links_the_trial_jobs_there() -> None:
    source = watched()
    job = experiment(best="search-a")
    source.jobs["experiments"]._deliver("ADDED", job)
    source.owned["trials"]._deliver("ADDED", trial("search-a", T0, "0.1", "Created", "Running", values=(0.3,)))
    source.owned["trials"]._deliver("ADDED", trial("search-b", T0, "0.2", "Created"))
    source.owned["trials"].get("default", "search-b")["spec"]["runSpec"]["kind"] = "TrainJob"
    not_ours = trial("other", T0, "0.1", "Created")
    not_ours["metadata"]["ownerReferences"][0]["uid"] = "another-experiment"
    source.owned["trials"]._deliver("ADDED", not_ours)
    # a trial whose job is a TrainJob: a job of its own, with a page (a batch Job has none)
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": meta("search-b", "tj-uid", owner="search-b-uid"),
        "spec": {},
    }
    source.jobs["trainjobs"]._deliver("ADDED", trainjob)
    found = pages.trials_of(job, source)
    assert found is not None
    assert [t.name for t in found[0].rows] == ["search-a", "search-b"]
    assert set(found[1]) == {"search-b"}
    assert pages.curve_jobs(found) == {}, "a Trial's curve is its own observationLog"
    detail = pages.detail(job, source, points=[], checkpoints=[], search=found)
    links = [t["job"] for t in detail["search"]["trials"]]
    assert links == [None, {"namespace": "default", "plural": "trainjobs", "name": "search-b"}]
    assert detail["search"]["curves"] == [{"trial": "search-a", "points": [[1, 0.3]]}]

    opt = optimizationjob()
    source.jobs["optimizationjobs"]._deliver("ADDED", opt)
    source.jobs["trainjobs"]._deliver("ADDED", {**trainjob, "metadata": meta("opt-trial-0", "t0-uid", owner="opt-uid")})
    found = pages.trials_of(opt, source)
    assert found is not None and set(found[1]) == {"opt-trial-0"}
    assert pages.curve_jobs(found) == {"opt-trial-0": "t0-uid"}
    detail = pages.detail(opt, source, points=[], checkpoints=[], search=found, trial_points={"opt-trial-0": []})
    link = detail["search"]["trials"][0]["job"]
    assert link == {"namespace": "default", "plural": "trainjobs", "name": "opt-trial-0"}
    assert pages.detail(opt, source, points=[], checkpoints=[])["search"] is None, "read only when asked"


def test_a_trials_change_and_its_jobs_points_mark_its_searchs_open_page() -> None:
    source = watched()
    live = Live(source)
    opt = optimizationjob()
    source.jobs["optimizationjobs"]._deliver("ADDED", opt)
    stream = _Stream()
    live._pages["opt-uid"] = {stream}  # the page's stream open
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": meta("opt-trial-0", "t0-uid", owner="opt-uid"),
        "spec": {},
    }
    source.jobs["trainjobs"]._deliver("ADDED", trainjob)
    assert stream.changed and source.owner_job("t0-uid") == "opt-uid"
    stream.changed = False
    live.point("t0-uid", point(1, 0.5))
    assert stream.changed and stream.points == [], "the trial's point rebuilds its search's page, not its chart"
