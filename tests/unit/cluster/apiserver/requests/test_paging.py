"""Chunked lists over the real SQLite store: tokens, snapshot reads at the first page's revision, 410s."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.objects import Objects
from trainyard.cluster.server.apiserver.reads import Page
from trainyard.cluster.server.apiserver.registry import Registry, ResourceType
from trainyard.cluster.server.apiserver.requests import paging
from trainyard.cluster.server.apiserver.requests.fields import check_fields
from trainyard.cluster.server.apiserver.requests.selectors import parse_field_selector, parse_label_selector
from trainyard.cluster.server.storage.store import Store


@pytest.fixture
def objects(tmp_path: Path) -> Objects:
    objs = Objects(Store(tmp_path / "state.db"), Registry())
    for ns in ("default", "other"):
        objs.create(objs._rt("", "v1", "namespaces"), "", {"metadata": {"name": ns}})
    return objs


def cm_type(objects: Objects) -> ResourceType:
    return objects._rt("", "v1", "configmaps")


def make(objects: Objects, ns: str, name: str, value: str = "1", **labels: str) -> None:
    body = {"metadata": {"name": name, "labels": labels}, "data": {"v": value}}
    objects.create(cm_type(objects), ns, body)


def page(objects: Objects, ns: str | None, **query: str) -> Page:
    return objects.list_page(cm_type(objects), ns, None, None, paging.list_options(query))


def names(p: Page) -> list[str]:
    return [o["metadata"]["name"] for o in p.items]


def test_pages_cover_the_list_once_in_key_order(objects: Objects) -> None:
    for i in range(7):
        make(objects, "default", f"cm-{i}")
    first = page(objects, "default", limit="3")
    assert names(first) == ["cm-0", "cm-1", "cm-2"]
    assert first.remaining == 4 and first.continue_token
    second = page(objects, "default", limit="3", **{"continue": first.continue_token})
    third = page(objects, "default", limit="3", **{"continue": second.continue_token})
    assert names(second) == ["cm-3", "cm-4", "cm-5"] and second.remaining == 1
    assert names(third) == ["cm-6"] and not third.continue_token and third.remaining is None
    assert first.revision == second.revision == third.revision


def test_later_pages_are_served_at_the_first_pages_revision(objects: Objects) -> None:
    for i in range(6):
        make(objects, "default", f"cm-{i}")
    first = page(objects, "default", limit="2")
    rt = cm_type(objects)
    objects.delete(rt, "default", "cm-3")
    objects.patch(rt, "default", "cm-4", "application/merge-patch+json", {"data": {"v": "changed"}})
    make(objects, "default", "cm-2a")  # sorts into the unread part of the list
    make(objects, "default", "cm-9")
    rest: list[dict] = []
    token = first.continue_token
    while token:
        nxt = page(objects, "default", limit="2", **{"continue": token})
        assert nxt.revision == first.revision
        rest += nxt.items
        token = nxt.continue_token
    assert [o["metadata"]["name"] for o in rest] == ["cm-2", "cm-3", "cm-4", "cm-5"]
    assert next(o for o in rest if o["metadata"]["name"] == "cm-4")["data"] == {"v": "1"}
    assert all(int(o["metadata"]["resourceVersion"]) <= first.revision for o in rest)
    # a fresh list sees the present
    assert names(page(objects, "default")) == ["cm-0", "cm-1", "cm-2", "cm-2a", "cm-4", "cm-5", "cm-9"]


def test_across_namespaces_the_token_carries_namespace_and_name(objects: Objects) -> None:
    for ns in ("default", "other"):
        for i in range(2):
            make(objects, ns, f"cm-{i}")
    first = page(objects, None, limit="3")
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in first.items] == [
        ("default", "cm-0"),
        ("default", "cm-1"),
        ("other", "cm-0"),
    ]
    raw = json.loads(base64.urlsafe_b64decode(first.continue_token + "=="))
    assert raw == {"v": "meta.k8s.io/v1", "rv": first.revision, "start": "other/cm-0\x00"}
    rest = page(objects, None, limit="3", **{"continue": first.continue_token})
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in rest.items] == [("other", "cm-1")]


def test_across_namespaces_pages_and_counts_stay_at_the_first_pages_revision(objects: Objects) -> None:
    objects.create(objects._rt("", "v1", "namespaces"), "", {"metadata": {"name": "third"}})
    for ns in ("default", "other", "third"):
        for i in range(3):
            make(objects, ns, f"cm-{i}")
    rt = cm_type(objects)
    first = page(objects, None, limit="4")
    then = [("default", f"cm-{i}") for i in range(3)] + [(ns, f"cm-{i}") for ns in ("other", "third") for i in range(3)]
    assert first.remaining == len(then) - 4
    # Writes at and around the boundary (other/cm-0 was the last key read), and a namespace's
    # objects coming and going behind it, all after the first page.
    objects.delete(rt, "other", "cm-1")
    make(objects, "other", "cm-0a")
    make(objects, "default", "cm-9")
    for i in range(3):
        objects.delete(rt, "third", f"cm-{i}")
    make(objects, "third", "cm-new")
    objects.patch(rt, "other", "cm-2", "application/merge-patch+json", {"data": {"v": "changed"}})
    seen = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in first.items]
    token, counts = first.continue_token, []
    while token:
        nxt = page(objects, None, limit="2", **{"continue": token})
        assert nxt.revision == first.revision
        seen += [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in nxt.items]
        assert all(o["data"] == {"v": "1"} for o in nxt.items)
        counts.append(nxt.remaining)
        token = nxt.continue_token
    assert seen == then
    assert counts == [3, 1, None]  # what was left at the first page's revision, not now
    now = page(objects, None, limit="4")
    assert now.remaining == 8 - 4
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in now.items] == [
        ("default", "cm-0"),
        ("default", "cm-1"),
        ("default", "cm-2"),
        ("default", "cm-9"),
    ]


def test_selectors_fill_pages_with_matches_and_hide_the_remaining_count(objects: Objects) -> None:
    for i in range(6):
        make(objects, "default", f"cm-{i}", tier="a" if i % 2 else "b")
    rt = cm_type(objects)
    labels = parse_label_selector("tier=a")
    first = objects.list_page(rt, "default", labels, None, paging.ListOptions(limit=2))
    assert names(first) == ["cm-1", "cm-3"] and first.remaining is None and first.continue_token
    last = objects.list_page(
        rt, "default", labels, None, paging.ListOptions(limit=2, continue_token=first.continue_token)
    )
    assert names(last) == ["cm-5"] and not last.continue_token
    fields = parse_field_selector("metadata.name!=cm-0")
    assert names(objects.list_page(rt, "default", None, fields, paging.ListOptions(limit=1))) == ["cm-1"]


def test_a_compacted_revision_is_410_with_a_token_that_continues_at_the_newest(objects: Objects) -> None:
    for i in range(4):
        make(objects, "default", f"cm-{i}")
    first = page(objects, "default", limit="2")
    objects.delete(cm_type(objects), "default", "cm-3")
    make(objects, "default", "cm-4")
    objects.store.compact(keep=1)
    with pytest.raises(errors.ApiError) as caught:
        page(objects, "default", limit="2", **{"continue": first.continue_token})
    status = caught.value.status()
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"] == paging.EXPIRED_CONTINUE
    assert status["message"].startswith("The provided continue parameter is too old to display a consistent list")
    fresh = status["metadata"]["continue"]
    assert json.loads(base64.urlsafe_b64decode(fresh + "==")) == {
        "v": "meta.k8s.io/v1",
        "rv": -1,
        "start": "cm-1\x00",
    }
    rest = page(objects, "default", limit="2", **{"continue": fresh})
    assert names(rest) == ["cm-2", "cm-4"]


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("%%%", "invalid continue token: continue key is not valid: "),
        (paging.encode(5, ""), "invalid continue token: continue key is not valid: encoded start key empty"),
        (paging.encode(0, "a"), "invalid continue token: continue key is not valid: incorrect encoded start"),
        (
            base64.urlsafe_b64encode(b'{"v":"v9","rv":3,"start":"a"}').decode(),
            "invalid continue token: continue key is not valid: server does not recognize this encoded version v9",
        ),
        (paging.encode(5, "../etc"), "invalid continue token: continue key is not valid: ../etc"),
    ],
)
def test_malformed_tokens_are_400(objects: Objects, token: str, message: str) -> None:
    with pytest.raises(errors.ApiError) as caught:
        page(objects, "default", limit="2", **{"continue": token})
    assert caught.value.code == 400
    assert caught.value.message.startswith(message)


def test_resource_version_choices(objects: Objects) -> None:
    make(objects, "default", "cm-a")
    then = objects.store.revision
    make(objects, "default", "cm-b")
    assert names(page(objects, "default", resourceVersion="0", limit="1")) == ["cm-a", "cm-b"]
    assert names(page(objects, "default", resourceVersion=str(then), limit="5")) == ["cm-a"]
    exact = page(objects, "default", resourceVersion=str(then), resourceVersionMatch="Exact")
    assert names(exact) == ["cm-a"] and exact.revision == then
    assert names(page(objects, "default", resourceVersion=str(then))) == ["cm-a", "cm-b"]
    newest = page(objects, "default", resourceVersion=str(then), resourceVersionMatch="NotOlderThan", limit="5")
    assert names(newest) == ["cm-a", "cm-b"]
    with pytest.raises(errors.ApiError) as caught:
        page(objects, "default", resourceVersion="999999")
    assert caught.value.code == 504 and caught.value.message.startswith("Too large resource version: 999999")
    objects.store.compact(keep=0)
    with pytest.raises(errors.ApiError) as caught:
        page(objects, "default", resourceVersion=str(then), resourceVersionMatch="Exact")
    assert (caught.value.code, caught.value.message) == (410, "The resourceVersion for the provided list is too old.")


@pytest.mark.parametrize(
    ("query", "code", "message"),
    [
        (
            {"resourceVersionMatch": "Exact"},
            422,
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            {"resourceVersion": "5", "resourceVersionMatch": "Sometimes"},
            422,
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: "Sometimes": '
            'supported values: "Exact", "NotOlderThan", ""',
        ),
        (
            {"continue": "abc", "resourceVersion": "5"},
            400,
            "specifying resource version is not allowed when using continue",
        ),
        ({"limit": "ten"}, 400, 'invalid value for "limit": strconv.ParseInt: parsing "ten": invalid syntax'),
    ],
)
def test_list_option_errors(query: dict[str, str], code: int, message: str) -> None:
    with pytest.raises(errors.ApiError) as caught:
        paging.list_options(query)
    assert (caught.value.code, caught.value.message) == (code, message)


def test_custom_resources_select_on_their_crds_selectable_fields(objects: Objects) -> None:
    crd = {
        "metadata": {"name": "widgets.test.dev"},
        "spec": {
            "group": "test.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "selectableFields": [{"jsonPath": ".spec.color"}],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object", "properties": {"color": {"type": "string"}}}},
                        }
                    },
                }
            ],
        },
    }
    objects.create(objects._rt("apiextensions.k8s.io", "v1", "customresourcedefinitions"), "", crd)
    rt = objects._rt("test.dev", "v1", "widgets")
    for name, color in (("a", "red"), ("b", "blue")):
        objects.create(rt, "default", {"metadata": {"name": name}, "spec": {"color": color}})
    blue = objects.list_page(rt, "default", None, parse_field_selector("spec.color=blue"), paging.ListOptions())
    assert names(blue) == ["b"]
    with pytest.raises(errors.ApiError) as caught:
        check_fields(rt, parse_field_selector("spec.size=1"))
    assert (caught.value.code, caught.value.message) == (400, "field label not supported: spec.size")
