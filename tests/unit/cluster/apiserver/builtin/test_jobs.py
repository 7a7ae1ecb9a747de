"""``batch/v1`` Jobs through ``Objects``: v1.32's defaults, generated selector, validation and update rules.

Real SQLite store, no HTTP; the uid is injected so the generated selector is known.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.builtin import jobs
from trainyard.cluster.server.apiserver.objects import Objects
from trainyard.cluster.server.apiserver.registry import Registry, ResourceType
from trainyard.cluster.server.apiserver.tables import table
from trainyard.cluster.server.storage.store import Store

UID = "4dc6ef71-c2eb-44af-9b73-bb77ab6463db"
MERGE = "application/merge-patch+json"


@pytest.fixture
def objects(tmp_path: Path) -> Objects:
    objs = Objects(Store(tmp_path / "store.db"), Registry(), new_uid=lambda: UID)
    ns = objs.registry.lookup("", "v1", "namespaces")
    assert ns is not None
    objs.create(ns, "", {"metadata": {"name": "ns"}})
    return objs


@pytest.fixture
def rt(objects: Objects) -> ResourceType:
    found = objects.registry.lookup("batch", "v1", "jobs")
    assert found is not None
    return found


def job(name: str = "pi", **spec: Any) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "python:3.11"}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"template": template, **spec}}


def invalid(exc: pytest.ExceptionInfo[errors.ApiError]) -> list[tuple[str, str]]:
    assert exc.value.code == 422
    return [(c["field"], c["message"]) for c in exc.value.details["causes"]]


def test_registered_as_upstream_lists_it(rt: ResourceType) -> None:
    assert (rt.group_version, rt.kind, rt.namespaced, rt.categories) == ("batch/v1", "Job", True, ("all",))
    assert rt.subresources == frozenset({"status"})


def test_create_gets_the_defaults_and_generated_selector_of_v1_32(objects: Objects, rt: ResourceType) -> None:
    created = objects.create(rt, "ns", job())
    spec = created["spec"]
    assert {k: spec[k] for k in ("parallelism", "completions", "backoffLimit", "completionMode", "suspend")} == {
        "parallelism": 1,
        "completions": 1,
        "backoffLimit": 6,
        "completionMode": "NonIndexed",
        "suspend": False,
    }
    assert spec["manualSelector"] is False and spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["selector"] == {"matchLabels": {jobs.CONTROLLER_UID: UID}}
    expected = {jobs.CONTROLLER_UID: UID, jobs.JOB_NAME: "pi", "controller-uid": UID, "job-name": "pi"}
    assert spec["template"]["metadata"]["labels"] == expected
    assert created["metadata"]["labels"] == expected  # a Job without labels takes its template's
    assert "status" not in created


def test_parallelism_alone_leaves_completions_unset_and_a_failure_policy_replaces_only_failed(
    objects: Objects, rt: ResourceType
) -> None:
    created = objects.create(rt, "ns", job(parallelism=3, podFailurePolicy={"rules": []}))
    assert created["spec"]["parallelism"] == 3 and "completions" not in created["spec"]
    assert created["spec"]["podReplacementPolicy"] == "Failed"


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            {"template": {"spec": {"restartPolicy": "Always"}}},
            "spec.template.spec.restartPolicy",
            'Unsupported value: "Always": supported values: "OnFailure", "Never"',
        ),
        ({"backoffLimit": -1}, "spec.backoffLimit", "Invalid value: -1: must be greater than or equal to 0"),
        ({"parallelism": -2}, "spec.parallelism", "Invalid value: -2: must be greater than or equal to 0"),
        ({"completions": -1}, "spec.completions", "Invalid value: -1: must be greater than or equal to 0"),
        (
            {"activeDeadlineSeconds": -5},
            "spec.activeDeadlineSeconds",
            "Invalid value: -5: must be greater than or equal to 0",
        ),
        (
            {"ttlSecondsAfterFinished": -1},
            "spec.ttlSecondsAfterFinished",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            {"manualSelector": True, "selector": {"matchLabels": {"app": "x"}}},
            "spec.template.metadata.labels",
            'Invalid value: "map[string]string{}": `selector` does not match template `labels`',
        ),
        ({"manualSelector": True}, "spec.selector", "Required value"),
    ],
    ids=["restart-always", "backoff", "parallelism", "completions", "deadline", "ttl", "selector", "no-selector"],
)
def test_invalid_specs_are_refused_in_kube_apiserver_words(
    objects: Objects, rt: ResourceType, change: dict[str, Any], field: str, message: str
) -> None:
    body = job()
    template = change.pop("template", None)
    if template:
        body["spec"]["template"]["spec"].update(template["spec"])
    body["spec"].update(change)
    with pytest.raises(errors.ApiError) as exc:
        objects.create(rt, "ns", body)
    assert (field, message) in invalid(exc)


def test_a_template_without_restart_policy_reads_always_and_is_refused(objects: Objects, rt: ResourceType) -> None:
    body = job()
    del body["spec"]["template"]["spec"]["restartPolicy"]
    with pytest.raises(errors.ApiError) as exc:
        objects.create(rt, "ns", body)
    assert invalid(exc) == [
        ("spec.template.spec.restartPolicy", 'Unsupported value: "Always": supported values: "OnFailure", "Never"')
    ]


def test_the_template_pod_spec_is_checked_under_its_path(objects: Objects, rt: ResourceType) -> None:
    body = job()
    body["spec"]["template"]["spec"]["containers"] = [{"name": "c"}]
    with pytest.raises(errors.ApiError) as exc:
        objects.create(rt, "ns", body)
    assert ("spec.template.spec.containers[0].image", "Required value") in invalid(exc)


def test_selector_completions_and_template_are_immutable(objects: Objects, rt: ResourceType) -> None:
    created = objects.create(rt, "ns", job())
    for patch, field in (
        ({"spec": {"completions": 3}}, "spec.completions"),
        ({"spec": {"selector": {"matchLabels": {"a": "b"}}}}, "spec.selector"),
        ({"spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}}, "spec.template"),
    ):
        with pytest.raises(errors.ApiError) as exc:
            objects.patch(rt, "ns", "pi", MERGE, patch)
        assert any(f == field and m.endswith("field is immutable") for f, m in invalid(exc)), invalid(exc)
    # parallelism and suspend may change at any time
    patched = objects.patch(rt, "ns", "pi", MERGE, {"spec": {"parallelism": 2, "suspend": True}})
    assert patched["metadata"]["generation"] == created["metadata"]["generation"] + 1


def test_kep_2926_scheduling_directives_of_a_suspended_never_started_job_may_change(
    objects: Objects, rt: ResourceType
) -> None:
    objects.create(rt, "ns", job(suspend=True))
    # As the MPI operator does: status.startTime cleared, then one update that also resumes.
    current = objects.get(rt, "ns", "pi")
    new = copy.deepcopy(current)
    new["spec"]["suspend"] = False
    template = new["spec"]["template"]
    template["metadata"]["labels"]["kueue"] = "yes"
    template["metadata"]["annotations"] = {"note": "placed"}
    template["spec"]["nodeSelector"] = {"disk": "ssd"}
    template["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    template["spec"]["schedulingGates"] = [{"name": "wait"}]
    updated = objects.update(rt, "ns", "pi", new)
    assert updated["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}
    assert updated["spec"]["suspend"] is False
    # Other template fields stay immutable even then.
    objects.patch(rt, "ns", "pi", MERGE, {"spec": {"suspend": True}})
    with pytest.raises(errors.ApiError) as exc:
        image = {"containers": [{"name": "c", "image": "x"}]}
        objects.patch(rt, "ns", "pi", MERGE, {"spec": {"template": {"spec": image}}})
    assert ("spec.template", 'Invalid value: "core.PodTemplateSpec{...}": field is immutable') in invalid(exc)


def test_a_started_job_keeps_its_scheduling_directives(objects: Objects, rt: ResourceType) -> None:
    objects.create(rt, "ns", job(suspend=True))
    current = objects.get(rt, "ns", "pi")
    objects.update(rt, "ns", "pi", {**current, "status": {"startTime": "2025-01-01T00:00:00Z"}}, subresource="status")
    with pytest.raises(errors.ApiError) as exc:
        objects.patch(rt, "ns", "pi", MERGE, {"spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}})
    assert [f for f, _ in invalid(exc)] == ["spec.template"]


def _cells(objects: Objects, rt: ResourceType, now: datetime) -> dict[str, Any]:
    tbl = table(rt, [objects.get(rt, "ns", "pi")], now=now, resource_version="1")
    names = [c["name"] for c in tbl["columnDefinitions"]]
    return dict(zip(names, tbl["rows"][0]["cells"], strict=True))


def test_kubectl_get_jobs_prints_upstream_columns(objects: Objects, rt: ResourceType) -> None:
    objects.create(rt, "ns", job())
    current = objects.get(rt, "ns", "pi")
    start, end = "2025-01-01T00:00:00Z", "2025-01-01T00:00:42Z"
    done = {"type": "Complete", "status": "True", "reason": "CompletionsReached"}
    status = {"startTime": start, "completionTime": end, "succeeded": 1, "conditions": [done]}
    objects.update(rt, "ns", "pi", {**current, "status": status}, subresource="status")
    cells = _cells(objects, rt, datetime(2025, 1, 1, 0, 5, tzinfo=UTC))
    assert list(cells) == ["Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"]
    assert (cells["Name"], cells["Status"], cells["Completions"], cells["Duration"]) == ("pi", "Complete", "1/1", "42s")
    assert cells["Selector"] == f"{jobs.CONTROLLER_UID}={UID}"


@pytest.mark.parametrize(
    ("conditions", "cell"),
    [
        ([], "Running"),
        ([{"type": "Suspended", "status": "True"}], "Suspended"),
        ([{"type": "Suspended", "status": "False"}], "Running"),
        ([{"type": "FailureTarget", "status": "True"}], "FailureTarget"),
        ([{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}], "Failed"),
        ([{"type": "SuccessCriteriaMet", "status": "True"}], "SuccessCriteriaMet"),
    ],
)
def test_status_column(conditions: list[dict[str, str]], cell: str) -> None:
    assert jobs.status_cell({"status": {"conditions": conditions}}) == cell


def test_completions_column_without_completions() -> None:
    assert jobs.completions_cell({"spec": {"parallelism": 3}, "status": {"succeeded": 1}}) == "1/1 of 3"
    assert jobs.completions_cell({"spec": {"parallelism": 1}}) == "0/1"
