"""Field ownership rules of server-side apply, on plain objects (no server)."""

from __future__ import annotations

import pytest

from trainyard.cluster.server.apiserver.writes import fieldmanager as fm
from trainyard.cluster.server.apiserver.writes import listshapes

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"
POD = listshapes.builtin_shape("Pod")
CM = listshapes.builtin_shape("ConfigMap")


def write(manager: str, now: str = T1, **kw: object) -> fm.Write:
    return fm.Write(manager=manager, api_version="v1", now=now, **kw)  # type: ignore[arg-type]


def entries(obj: dict) -> dict[tuple[str, str], set[str]]:
    return {
        (e["manager"], e["operation"]): {fm.describe(p) for p in fm.decode(e["fieldsV1"])}
        for e in obj["metadata"]["managedFields"]
    }


def pod(env: list[dict], image: str = "busybox") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": image, "env": env}]},
    }


def test_field_set_keys_lists_by_their_merge_key_and_skips_server_metadata() -> None:
    obj = pod([{"name": "A", "value": "1"}])
    obj["metadata"].update(uid="u", resourceVersion="3", creationTimestamp=T0)
    paths = {fm.describe(p) for p in fm.field_set(obj, POD)}
    assert paths == {
        ".metadata.labels.app",
        '.spec.containers[name="c"]',
        '.spec.containers[name="c"].name',
        '.spec.containers[name="c"].image',
        '.spec.containers[name="c"].env[name="A"]',
        '.spec.containers[name="c"].env[name="A"].name',
        '.spec.containers[name="c"].env[name="A"].value',
    }


def test_fields_v1_round_trips_and_marks_list_items_with_a_dot() -> None:
    paths = fm.field_set(pod([{"name": "A", "value": "1"}]), POD)
    tree = fm.encode(paths)
    assert tree["f:spec"]["f:containers"]['k:{"name":"c"}']["."] == {}
    assert tree["f:metadata"]["f:labels"]["f:app"] == {}
    assert fm.decode(tree) == paths


def test_apply_creates_then_removes_fields_the_manager_stops_applying() -> None:
    both = pod([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    first = fm.apply(None, both, POD, write("me", T0), force=False)
    assert entries(first)[("me", "Apply")] >= {'.spec.containers[name="c"].env[name="B"].value'}
    second = fm.apply(first, pod([{"name": "A", "value": "1"}]), POD, write("me"), force=False)
    assert second["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]
    assert second["metadata"]["managedFields"][0]["time"] == T1


def test_removing_the_last_label_removes_the_emptied_map() -> None:
    labelled = {"metadata": {"name": "c", "labels": {"a": "b"}}, "data": {"k": "v"}}
    first = fm.apply(None, labelled, CM, write("me"), force=False)
    second = fm.apply(first, {"metadata": {"name": "c"}, "data": {"k": "v"}}, CM, write("me"), force=False)
    assert "labels" not in second["metadata"]


def test_fields_another_manager_also_owns_are_not_removed() -> None:
    first = fm.apply(None, {"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}, CM, write("one"), force=False)
    shared = fm.apply(first, {"metadata": {"name": "c"}, "data": {"b": "2"}}, CM, write("two"), force=False)
    after = fm.apply(shared, {"metadata": {"name": "c"}, "data": {"a": "1"}}, CM, write("one"), force=False)
    assert after["data"] == {"a": "1", "b": "2"}
    assert entries(after) == {("one", "Apply"): {".data.a"}, ("two", "Apply"): {".data.b"}}


def test_changing_a_field_another_manager_owns_conflicts_unless_forced() -> None:
    first = fm.apply(None, {"metadata": {"name": "c"}, "data": {"a": "1"}}, CM, write("one"), force=False)
    with pytest.raises(fm.ApplyConflict) as exc:
        fm.apply(first, {"metadata": {"name": "c"}, "data": {"a": "2"}}, CM, write("two"), force=False)
    assert str(exc.value) == 'Apply failed with 1 conflict: conflict with "one" using v1: .data.a'
    forced = fm.apply(first, {"metadata": {"name": "c"}, "data": {"a": "2"}}, CM, write("two"), force=True)
    assert forced["data"] == {"a": "2"}
    assert entries(forced) == {("two", "Apply"): {".data.a"}}


def test_the_same_value_is_shared_without_conflict() -> None:
    first = fm.apply(None, {"metadata": {"name": "c"}, "data": {"a": "1"}}, CM, write("one"), force=False)
    shared = fm.apply(first, {"metadata": {"name": "c"}, "data": {"a": "1"}}, CM, write("two"), force=False)
    assert entries(shared) == {("one", "Apply"): {".data.a"}, ("two", "Apply"): {".data.a"}}


def test_an_update_takes_ownership_of_what_it_changed() -> None:
    applied = fm.apply(None, {"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}, CM, write("apply"), force=False)
    changed = {**applied, "data": {"a": "9", "b": "2"}}
    changed["metadata"] = {**applied["metadata"], "managedFields": fm.track_update(applied, changed, CM, write("edit"))}
    assert entries(changed) == {("apply", "Apply"): {".data.b"}, ("edit", "Update"): {".data.a"}}
    with pytest.raises(fm.ApplyConflict):
        fm.apply(changed, {"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}, CM, write("apply"), force=False)


def test_a_no_op_update_changes_no_entry() -> None:
    applied = fm.apply(None, {"metadata": {"name": "c"}, "data": {"a": "1"}}, CM, write("apply", T0), force=False)
    assert fm.track_update(applied, applied, CM, write("edit")) == applied["metadata"]["managedFields"]


def test_status_is_owned_separately_through_the_status_subresource() -> None:
    obj = pod([])
    obj["status"] = {"phase": "Running"}
    main = fm.track_update(None, obj, POD, write("creator"))
    assert all("status" not in p for e in main for p in e["fieldsV1"])
    status = fm.track_update(None, obj, POD, write("kubelet", subresource="status"))
    assert status[0]["subresource"] == "status" and status[0]["fieldsV1"] == {"f:status": {"f:phase": {}}}


def test_custom_resources_follow_the_schema_list_types() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object"},
                    },
                    "args": {"type": "array", "items": {"type": "string"}},
                },
            }
        },
    }
    shape = listshapes.SchemaShape(schema, root=True)
    config = {"spec": {"ports": [{"name": "a", "port": 1}], "args": ["x"]}}
    live = fm.apply(None, config, shape, write("one"), force=False)
    both = fm.apply(live, {"spec": {"ports": [{"name": "b", "port": 2}]}}, shape, write("two"), force=False)
    assert both["spec"]["ports"] == [{"name": "a", "port": 1}, {"name": "b", "port": 2}]
    with pytest.raises(fm.ApplyConflict) as exc:
        fm.apply(both, {"spec": {"args": ["y"]}}, shape, write("two"), force=False)
    assert exc.value.conflicts[0].path == ("f:spec", "f:args")


def test_the_same_fields_in_two_objects_are_tracked_apart() -> None:
    # Field sets are remembered between writes; what one write gets must not leak into another.
    first = fm.track_update(None, pod([{"name": "A", "value": "1"}]), POD, write("op"))
    first[0]["fieldsV1"]["f:spec"]["f:extra"] = {}
    second = fm.track_update(None, pod([{"name": "A", "value": "1"}]), POD, write("op"))
    assert "f:extra" not in second[0]["fieldsV1"]["f:spec"]
    changed = pod([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    old = {**pod([{"name": "A", "value": "1"}])}
    old["metadata"] = {**old["metadata"], "managedFields": second}
    assert entries({"metadata": {"managedFields": fm.track_update(old, changed, POD, write("other"))}}) == {
        ("op", "Update"): {".metadata.labels.app", '.spec.containers[name="c"]', '.spec.containers[name="c"].image'}
        | {'.spec.containers[name="c"].name', '.spec.containers[name="c"].env[name="A"]'}
        | {'.spec.containers[name="c"].env[name="A"].name', '.spec.containers[name="c"].env[name="A"].value'},
        ("other", "Update"): {'.spec.containers[name="c"].env[name="B"]'}
        | {'.spec.containers[name="c"].env[name="B"].name', '.spec.containers[name="c"].env[name="B"].value'},
    }


def test_a_custom_resource_is_walked_by_its_current_schema() -> None:
    obj = {"metadata": {"name": "x"}, "spec": {"args": ["a", "b"]}}
    atomic = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"args": {"type": "array"}}}}}
    as_set = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"args": {"type": "array", "x-kubernetes-list-type": "set"}}}
        },
    }
    one = fm.track_update(None, obj, listshapes.SchemaShape(atomic, root=True), write("m"))
    two = fm.track_update(None, obj, listshapes.SchemaShape(as_set, root=True), write("m"))
    assert one[0]["fieldsV1"] == {"f:spec": {"f:args": {}}}
    assert two[0]["fieldsV1"] == {"f:spec": {"f:args": {'v:"a"': {}, 'v:"b"': {}}}}
