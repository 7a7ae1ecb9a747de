"""The informer's cache: indexes follow every change, our own writes' answers are never undone by an
older watch event, and a deleted object is not revived by a late answer; shared informers hand one
cache to several controllers. No server: events are fed as the reflector would deliver them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lightkube.resources.core_v1 import Pod, Service

from trainyard.kit import informer as informer_module
from trainyard.kit.informer import Informer, SharedInformers, controller_of, label_index


def pod(name: str, rv: int, *, uid: str = "u1", job: str = "mnist", owner: str | None = "mnist") -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "team",
        "uid": uid,
        "resourceVersion": str(rv),
        "labels": {"job-name": job},
    }
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "PyTorchJob", "name": owner, "uid": "j", "controller": True}]
    return {"metadata": meta}


def informer(seen: list[tuple[str, str]] | None = None) -> Informer:
    def handle(kind: str, obj: dict[str, Any]) -> None:
        if seen is not None:
            seen.append((kind, obj["metadata"]["resourceVersion"]))

    return Informer(
        None,  # type: ignore[arg-type]  # never listed nor watched here
        object,
        handle,
        indexers={"job": label_index("job-name"), "owner": controller_of},
    )


def names(objs: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def test_indexes_follow_adds_relabels_and_deletes() -> None:
    cache = informer()
    cache._deliver("ADDED", pod("a", 1))
    cache._deliver("ADDED", pod("b", 2, job="other", owner="other"))
    assert names(cache.by_index("job", "team/mnist")) == ["a"]
    assert names(cache.by_index("owner", "PyTorchJob/team/other")) == ["b"]

    cache._deliver("MODIFIED", pod("a", 3, job="other", owner=None))
    assert cache.by_index("job", "team/mnist") == []
    assert names(cache.by_index("job", "team/other")) == ["a", "b"]
    assert cache.by_index("owner", "PyTorchJob/team/mnist") == []

    cache._deliver("DELETED", pod("b", 4, job="other", owner="other"))
    assert names(cache.by_index("job", "team/other")) == ["a"]
    assert cache.get("team", "b") is None and len(cache) == 1


def test_an_answer_to_our_write_is_not_undone_by_an_older_event() -> None:
    seen: list[tuple[str, str]] = []
    cache = informer(seen)
    cache._deliver("ADDED", pod("a", 5))
    cache.mutated(pod("a", 9))  # our status write's answer, before the watch brings it
    cache._deliver("MODIFIED", pod("a", 7))  # someone's earlier write, delivered late
    assert cache.get("team", "a")["metadata"]["resourceVersion"] == "9"
    cache._deliver("MODIFIED", pod("a", 9))
    cache._deliver("MODIFIED", pod("a", 11))
    assert cache.get("team", "a")["metadata"]["resourceVersion"] == "11"
    assert seen == [("ADDED", "5"), ("MODIFIED", "9"), ("MODIFIED", "11")]
    cache.mutated(pod("a", 10))  # an answer older than what the watch brought is dropped
    assert cache.get("team", "a")["metadata"]["resourceVersion"] == "11"


def test_a_new_incarnation_survives_its_predecessors_late_deletion() -> None:
    cache = informer()
    cache._deliver("ADDED", pod("a", 5, uid="old"))
    cache.mutated(pod("a", 12, uid="new"))  # created again under the same name (a gang restart)
    cache._deliver("DELETED", pod("a", 10, uid="old"))
    assert cache.get("team", "a")["metadata"]["uid"] == "new"


def test_a_late_answer_does_not_revive_a_deleted_object() -> None:
    cache = informer()
    cache._deliver("ADDED", pod("a", 5))
    cache._deliver("DELETED", pod("a", 8))
    cache.mutated(pod("a", 6))  # the answer to a write made before the deletion
    assert cache.get("team", "a") is None
    cache.mutated(pod("a", 9, uid="u2"))  # a create after it is cached
    assert cache.get("team", "a")["metadata"]["uid"] == "u2"


def test_objects_are_cached_and_handed_on_without_managed_fields() -> None:
    seen: list[dict[str, Any]] = []
    cache = Informer(None, object, lambda kind, obj: seen.append(obj))  # type: ignore[arg-type]
    fields = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:metadata": {}}}]
    event = pod("a", 1)
    event["metadata"]["managedFields"] = fields
    cache._deliver("ADDED", event)
    answer = pod("b", 2)
    answer["metadata"]["managedFields"] = fields
    cache.mutated(answer)
    for name in ("a", "b"):
        cached = cache.get("team", name)
        assert cached is not None and "managedFields" not in cached["metadata"]
        assert cached["metadata"]["labels"] == {"job-name": "mnist"}
    assert [o["metadata"]["name"] for o in seen] == ["a"] and "managedFields" not in seen[0]["metadata"]
    # The caller's objects are left as they were: they may still use them.
    assert event["metadata"]["managedFields"] == fields and answer["metadata"]["managedFields"] == fields


def test_a_version_is_parsed_once_and_a_change_or_deletion_parses_anew() -> None:
    cache = informer()
    parses: list[str] = []

    def parse(obj: dict[str, Any]) -> tuple[str, str]:
        parses.append(obj["metadata"]["resourceVersion"])
        return (obj["metadata"]["name"], obj["metadata"]["resourceVersion"])

    cache._deliver("ADDED", pod("a", 1))
    first = cache.parsed(parse, cache.get("team", "a"))  # type: ignore[arg-type]
    assert cache.parsed(parse, cache.by_index("job", "team/mnist")[0]) is first
    assert parses == ["1"]

    cache.mutated(pod("a", 2))  # our own write's answer, then the watch's older event: still version 2
    cache._deliver("MODIFIED", pod("a", 1))
    assert cache.parsed(parse, cache.get("team", "a")) == ("a", "2")  # type: ignore[arg-type]
    assert parses == ["1", "2"]

    # A dict the cache does not hold (an older copy a reader kept) is parsed, not shared.
    kept = pod("a", 1)
    assert cache.parsed(parse, kept) == ("a", "1") and parses == ["1", "2", "1"]

    cache._deliver("DELETED", pod("a", 3))
    cache._deliver("ADDED", pod("a", 4, uid="u2"))
    assert cache.parsed(parse, cache.get("team", "a")) == ("a", "4")  # type: ignore[arg-type]
    assert cache._parsed.keys() == {("team", "a")}


def test_models_are_kept_for_the_objects_read_last(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer_module, "PARSED", 2)
    cache = informer()
    for i, name in enumerate("abc"):
        cache._deliver("ADDED", pod(name, i + 1))
    first = cache.parsed(dict, cache.get("team", "a"))  # type: ignore[arg-type]
    cache.parsed(dict, cache.get("team", "b"))  # type: ignore[arg-type]
    assert cache.parsed(dict, cache.get("team", "a")) is first  # type: ignore[arg-type]
    cache.parsed(dict, cache.get("team", "c"))  # type: ignore[arg-type]  # b, read least lately, goes
    assert list(cache._parsed) == [("team", "a"), ("team", "c")]


def test_a_tombstone_keeps_only_the_version() -> None:
    cache = informer()
    cache._deliver("ADDED", pod("a", 1))
    cache._deliver("DELETED", pod("a", 2))
    assert cache._deleted[("team", "a")] == {"metadata": {"resourceVersion": "2"}}
    cache.mutated(pod("a", 1))  # a late answer to an older write
    assert cache.get("team", "a") is None


def test_our_delete_takes_the_object_out_or_marks_it_terminating_at_once() -> None:
    seen: list[tuple[str, str]] = []
    cache = informer(seen)
    cache._deliver("ADDED", pod("a", 1))
    cache._deliver("ADDED", pod("b", 2))
    terminating = pod("a", 3)
    terminating["metadata"]["deletionTimestamp"] = "2026-11-26T00:00:00Z"
    cache.removed(terminating)
    held = cache.get("team", "a")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    cache.removed(pod("b", 2))  # deleted at once: the answer is the object as it went
    assert cache.get("team", "b") is None and names(cache.by_index("job", "team/mnist")) == ["a"]
    cache.mutated(pod("b", 2))  # a late answer to an earlier write does not bring it back
    assert cache.get("team", "b") is None
    cache._deliver("DELETED", pod("b", 4))  # the watch still tells the handlers
    assert seen[-1] == ("DELETED", "4")


def test_our_delete_may_ask_for_its_echo_in_silence_and_only_for_its_own() -> None:
    """``removed(tell=False)``: the watch's DELETED of exactly that deletion reaches no handler, as
    the echo of our own write does not; a deletion the answer did not name (another version, a
    terminating object's later going, a new incarnation's) still does, and the cache follows all."""
    seen: list[tuple[str, str]] = []
    cache = informer(seen)
    for name, rv in (("a", 1), ("b", 2), ("c", 3)):
        cache._deliver("ADDED", pod(name, rv))
    seen.clear()
    cache.removed(pod("a", 4), tell=False)
    cache._deliver("DELETED", pod("a", 4))  # its echo
    assert seen == [] and cache.get("team", "a") is None
    cache._deliver("ADDED", pod("a", 5, uid="u2"))
    cache._deliver("DELETED", pod("a", 6, uid="u2"))  # a new incarnation, deleted by someone else
    assert seen == [("ADDED", "5"), ("DELETED", "6")]
    cache.removed(pod("b", 7), tell=False)
    cache._deliver("DELETED", pod("b", 8))  # not the version the answer named: told
    assert seen[-1] == ("DELETED", "8")
    terminating = pod("c", 9)
    terminating["metadata"]["deletionTimestamp"] = "2026-11-26T00:00:00Z"
    cache.removed(terminating, tell=False)  # not gone yet: its going, later, is news
    cache._deliver("DELETED", pod("c", 10))
    assert seen[-1] == ("DELETED", "10") and names(cache.by_index("job", "team/mnist")) == []


def test_our_delete_of_an_old_incarnation_leaves_its_successor() -> None:
    cache = informer()
    cache._deliver("ADDED", pod("a", 5, uid="new"))
    cache.removed(pod("a", 3, uid="old"))
    held = cache.get("team", "a")
    assert held is not None and held["metadata"]["uid"] == "new"
    cache.removed({"kind": "Status", "apiVersion": "v1", "status": "Success"})  # no object in the answer
    assert cache.get("team", "a") is not None


def test_controllers_share_one_informer_per_resource_and_namespace() -> None:
    shared = SharedInformers(None)  # type: ignore[arg-type]  # never listed nor watched here
    seen: list[tuple[str, str]] = []
    first = shared.informer(Pod, lambda kind, obj: seen.append(("first", kind)), namespace="team")
    second = shared.informer(
        Pod, lambda kind, obj: seen.append(("second", kind)), namespace="team", indexers={"owner": controller_of}
    )
    assert second is first
    assert shared.informer(Pod, lambda *_: None, namespace="other") is not first
    assert shared.informer(Service, lambda *_: None, namespace="team") is not first

    first._deliver("ADDED", pod("a", 1))
    assert seen == [("first", "ADDED"), ("second", "ADDED")]  # decoded and cached once, handed to both
    # A controller joining late gets its index over what is cached already.
    third = shared.informer(Pod, lambda *_: None, namespace="team", indexers={"job": label_index("job-name")})
    assert names(third.by_index("job", "team/mnist")) == ["a"]
    assert names(third.by_index("owner", "PyTorchJob/team/mnist")) == ["a"]
    with pytest.raises(ValueError, match="defined twice"):
        shared.informer(Pod, lambda *_: None, namespace="team", indexers={"job": controller_of})


def test_a_shared_informer_runs_once_however_many_controllers_start_it() -> None:
    class Idle(Informer):
        runs = 0

        async def run(self) -> None:
            Idle.runs += 1
            await asyncio.Event().wait()

    async def main() -> None:
        cache = Idle(None, object)  # type: ignore[arg-type]
        first, second = cache.start("a"), cache.start("b")
        assert first is second
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        restarted = cache.start("c")  # an ended reflector is started again
        assert restarted is not first
        await asyncio.sleep(0)
        restarted.cancel()
        await asyncio.gather(restarted, return_exceptions=True)

    asyncio.run(main())
    assert Idle.runs == 2
