"""The one diff for owned children of any kind (``controller.childdiff``): create what is missing, replace
what the job decides differently (as read), delete what it no longer wants, leave others' alone.

A ConfigMap stands for any kind without server defaults to mind (as an MPIJob's hostfile would be);
the HPA and the PodGroup, whose shapes are special, are covered through the reconciler in
test_elastic.py and test_gang.py. Observed objects are written out as the API server returns them.
"""

from __future__ import annotations

from typing import Any

import pytest
from job_builders import NAME, NAMESPACE, OTHER_UID, job, owner_references

from trainyard.api.meta import TypedObject
from trainyard.controller import ChildRef, Plan
from trainyard.controller.childdiff import Diff, diff
from trainyard.kit.plans import DeletionEvents, Event, EventType

OWNER = job()
CONFIG = f"{NAME}-config"
WANTED: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": CONFIG},
    "data": {"hostfile": "mnist-worker-0 slots=1\n"},
}


def stored(data: dict[str, str], *, uid: str | None = None, deleting: bool = False, **extra: Any) -> TypedObject:
    metadata: dict[str, Any] = {
        "name": CONFIG,
        "namespace": NAMESPACE,
        "uid": "cm-uid",
        "resourceVersion": "7",
        "ownerReferences": owner_references(OWNER, uid),
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data, **extra}
    return TypedObject.model_validate(body)


def test_a_missing_child_is_created_in_the_jobs_namespace_with_the_job_as_controller() -> None:
    found = diff(OWNER, [WANTED], [])

    assert [o.to_dict() for o in found.create] == [
        {
            **WANTED,
            "metadata": {"name": CONFIG, "namespace": NAMESPACE, "ownerReferences": owner_references(OWNER)},
        }
    ]
    assert found.replace == () and found.delete == ()


def test_a_child_equal_in_what_the_job_decides_is_not_written() -> None:
    # Nulls are absent; fields the job does not set (binaryData) are not compared.
    have = stored({**WANTED["data"]}, binaryData={"blob": "AAEC"}, immutable=None)

    assert diff(OWNER, [WANTED], [have]) == Diff()


def test_a_child_that_differs_is_replaced_as_read_keeping_what_others_set() -> None:
    have = stored({"hostfile": "stale\n"}, binaryData={"blob": "AAEC"})

    found = diff(OWNER, [WANTED], [have])

    (written,) = found.replace
    body = written.to_dict()
    assert body["data"] == WANTED["data"]
    assert body["metadata"]["resourceVersion"] == "7" and body["metadata"]["uid"] == "cm-uid"
    assert body["binaryData"] == {"blob": "AAEC"}
    assert found.create == () and found.delete == ()


def test_quantities_compare_by_value_only_where_the_kind_says_so() -> None:
    # A ConfigMap's "1000m" is text, not a quantity: "1" is a different value.
    wanted = {**WANTED, "data": {"cpu": "1000m"}}

    assert len(diff(OWNER, [wanted], [stored({"cpu": "1"})]).replace) == 1


def test_a_child_no_longer_wanted_is_deleted_and_told_as_asked() -> None:
    have = stored({"hostfile": "x\n"})
    told = DeletionEvents(done=(Event(EventType.NORMAL, "Gone", "config"),))

    silent = diff(OWNER, [], [have])
    announced = diff(OWNER, [], [have], told=lambda name: told)

    assert silent.delete == (ChildRef("ConfigMap", CONFIG, "v1"),)
    assert silent.delete[0].deletion() == DeletionEvents()
    assert announced.delete[0].deletion() == told
    assert silent.create == () and silent.replace == ()


@pytest.mark.parametrize(
    "have",
    [stored({"hostfile": "x\n"}, uid=OTHER_UID), stored({"hostfile": "x\n"}, deleting=True)],
    ids=["an-older-jobs", "being-deleted"],
)
@pytest.mark.parametrize("wanted", [[WANTED], []], ids=["wanted", "not-wanted"])
def test_a_child_the_job_does_not_own_or_that_is_going_is_left_alone(
    have: TypedObject, wanted: list[dict[str, Any]]
) -> None:
    assert diff(OWNER, wanted, [have]) == Diff()


def test_a_diff_amends_a_plan_after_what_it_holds() -> None:
    before = Plan(delete=(ChildRef("Pod", "mnist-worker-1"),))
    found = diff(OWNER, [WANTED], [stored({"hostfile": "x\n"}, uid=OTHER_UID)])

    assert Diff().amend(before) is before and found.amend(before) == before
    after = diff(OWNER, [WANTED], []).amend(before)
    assert [o.kind for o in after.apply] == ["ConfigMap"] and after.delete == before.delete
