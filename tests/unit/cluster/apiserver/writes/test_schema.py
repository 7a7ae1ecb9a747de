"""CRD structural schemas: pruning, null handling, defaulting and validation in kube-apiserver's words.

Expected messages are the ones a v1.32 API server returns for the same schema and object (the
kube-openapi validator's text wrapped in apimachinery's field errors).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainyard.api.crd import crd_for
from trainyard.api.kinds import KINDS
from trainyard.cluster.server.apiserver import causes
from trainyard.cluster.server.apiserver.writes import schema
from trainyard.cluster.server.apiserver.writes.schema import Schema


def spec_schema(**props: Any) -> Schema:
    """A resource schema whose ``spec`` has the given properties."""
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}


def errors_of(spec: Any, **props: Any) -> list[str]:
    obj = {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"}, "spec": spec}
    return [f"{f}: {m}" for _, f, m in schema.validate(obj, spec_schema(**props))]


# -- validation: (property schema, value, expected "field: message" lines) ------------------

VALUE_CASES = [
    ({"type": "integer"}, 3, []),
    ({"type": "integer"}, 3.0, []),
    (
        {"type": "integer"},
        "string",
        ['spec.v: Invalid value: "string": spec.v in body must be of type integer: "string"'],
    ),
    ({"type": "integer"}, 1.5, ['spec.v: Invalid value: "number": spec.v in body must be of type integer: "number"']),
    (
        {"type": "integer"},
        True,
        ['spec.v: Invalid value: "boolean": spec.v in body must be of type integer: "boolean"'],
    ),
    ({"type": "number"}, 2, []),
    ({"type": "string"}, 5, ['spec.v: Invalid value: "integer": spec.v in body must be of type string: "integer"']),
    (
        {"type": "boolean"},
        "true",
        ['spec.v: Invalid value: "string": spec.v in body must be of type boolean: "string"'],
    ),
    ({"type": "array"}, {}, ['spec.v: Invalid value: "object": spec.v in body must be of type array: "object"']),
    ({"type": "object"}, [], ['spec.v: Invalid value: "array": spec.v in body must be of type object: "array"']),
    ({"type": "string"}, None, ['spec.v: Invalid value: "null": spec.v in body must be of type string: "null"']),
    ({"type": "string", "nullable": True}, None, []),
    ({"x-kubernetes-int-or-string": True}, 8080, []),
    ({"x-kubernetes-int-or-string": True}, "http", []),
    (
        {"x-kubernetes-int-or-string": True},
        True,
        ['spec.v: Invalid value: "boolean": spec.v in body must be of type integer,string: "boolean"'],
    ),
    ({"x-kubernetes-preserve-unknown-fields": True}, {"any": ["thing", 1]}, []),
    (
        {"type": "string", "enum": ["a", "b"]},
        "z",
        ['spec.v: Unsupported value: "z": supported values: "a", "b"'],
    ),
    ({"type": "integer", "enum": [1, 2]}, 3, ['spec.v: Unsupported value: 3: supported values: "1", "2"']),
    ({"type": "integer", "enum": [1, 2]}, 2, []),
    ({"type": "boolean", "enum": [True]}, True, []),
    (
        {"type": "integer", "minimum": 1},
        0,
        ["spec.v: Invalid value: 0: spec.v in body should be greater than or equal to 1"],
    ),
    (
        {"type": "integer", "minimum": 1, "exclusiveMinimum": True},
        1,
        ["spec.v: Invalid value: 1: spec.v in body should be greater than 1"],
    ),
    (
        {"type": "integer", "maximum": 10},
        20,
        ["spec.v: Invalid value: 20: spec.v in body should be less than or equal to 10"],
    ),
    (
        {"type": "integer", "maximum": 10, "exclusiveMaximum": True},
        10,
        ["spec.v: Invalid value: 10: spec.v in body should be less than 10"],
    ),
    (
        {"type": "number", "maximum": 1000000},
        1500000.5,
        ["spec.v: Invalid value: 1.5000005e+06: spec.v in body should be less than or equal to 1e+06"],
    ),
    ({"type": "integer", "multipleOf": 3}, 7, ["spec.v: Invalid value: 7: spec.v in body should be a multiple of 3"]),
    ({"type": "integer", "multipleOf": 3}, 9, []),
    ({"type": "number", "multipleOf": 0.5}, 1.5, []),
    (
        {"type": "number", "multipleOf": 0.5},
        1.2,
        ["spec.v: Invalid value: 1.2: spec.v in body should be a multiple of 0.5"],
    ),
    ({"type": "string", "maxLength": 3}, "abcd", ["spec.v: Too long: may not be more than 3 bytes"]),
    ({"type": "string", "maxLength": 3}, "äöü", []),
    (
        {"type": "string", "minLength": 1},
        "",
        ['spec.v: Invalid value: "": spec.v in body should be at least 1 chars long'],
    ),
    (
        {"type": "string", "pattern": "^[a-z]+$"},
        "ABC",
        ["spec.v: Invalid value: \"ABC\": spec.v in body should match '^[a-z]+$'"],
    ),
    ({"type": "string", "pattern": "[0-9]"}, "a1b", []),
    # only the first string failure is reported, as kube-openapi's string validator does
    ({"type": "string", "maxLength": 1, "pattern": "^x$"}, "yy", ["spec.v: Too long: may not be more than 1 bytes"]),
    ({"type": "string", "format": "date-time"}, "2024-05-01T10:00:00Z", []),
    ({"type": "string", "format": "date-time"}, "2024-05-01T10:00:00.123+02:00", []),
    (
        {"type": "string", "format": "date-time"},
        "yesterday",
        ['spec.v: Invalid value: "yesterday": spec.v in body must be of type date-time: "yesterday"'],
    ),
    (
        {"type": "string", "format": "date"},
        "2024-02-30",
        ['spec.v: Invalid value: "2024-02-30": spec.v in body must be of type date: "2024-02-30"'],
    ),
    ({"type": "string", "format": "byte"}, "aGVsbG8=", []),
    (
        {"type": "string", "format": "byte"},
        "not base64!",
        ['spec.v: Invalid value: "not base64!": spec.v in body must be of type byte: "not base64!"'],
    ),
    ({"type": "string", "format": "ipv4"}, "10.0.0.1", []),
    (
        {"type": "string", "format": "ipv4"},
        "10.0.0.300",
        ['spec.v: Invalid value: "10.0.0.300": spec.v in body must be of type ipv4: "10.0.0.300"'],
    ),
    ({"type": "string", "format": "uuid"}, "3f2504e0-4f89-11d3-9a0c-0305e82c3301", []),
    ({"type": "string", "format": "made-up"}, "anything", []),  # unsupported formats are ignored
    ({"type": "integer", "format": "int32"}, 2**40, []),  # v1.32 does not range-check numeric formats
    (
        {"type": "array", "items": {"type": "integer"}},
        [1, "2"],
        ['spec.v[1]: Invalid value: "string": spec.v[1] in body must be of type integer: "string"'],
    ),
    ({"type": "array", "minItems": 1}, [], ["spec.v: Invalid value: 0: spec.v in body should have at least 1 items"]),
    ({"type": "array", "maxItems": 2}, [1, 2, 3], ["spec.v: Too many: 3: must have at most 2 items"]),
    (
        {"type": "array", "uniqueItems": True},
        [1, 1],
        ['spec.v: Invalid value: "": spec.v in body shouldn\'t contain duplicates'],
    ),
    (
        {"type": "object", "minProperties": 1},
        {},
        ["spec.v: Invalid value: 0: spec.v in body should have at least 1 properties"],
    ),
    ({"type": "object", "maxProperties": 1}, {"a": 1, "b": 2}, ["spec.v: Too many: 2: must have at most 1 items"]),
    (
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"ok": "x", "bad": 1},
        ['spec.v.bad: Invalid value: "integer": spec.v.bad in body must be of type string: "integer"'],
    ),
    (
        {"type": "object", "required": ["name", "size"], "properties": {"name": {"type": "string"}}},
        {"name": "a"},
        ["spec.v.size: Required value"],
    ),
    (
        {
            "type": "array",
            "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
        },
        [{"name": "a"}, {}],
        ["spec.v[1].name: Required value"],
    ),
]


@pytest.mark.parametrize(("prop", "value", "expected"), VALUE_CASES)
def test_value_validation_messages(prop: Schema, value: Any, expected: list[str]) -> None:
    assert errors_of({"v": value}, v=prop) == expected


def test_causes_carry_kubernetes_reasons() -> None:
    found = schema.validate(
        {"spec": {"a": "x", "b": "z", "c": "long"}},
        {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["d"],
                    "properties": {
                        "a": {"type": "integer"},
                        "b": {"type": "string", "enum": ["y"]},
                        "c": {"type": "string", "maxLength": 1},
                    },
                }
            },
        },
    )
    assert [(r, f) for r, f, _ in found] == [
        ("FieldValueTypeInvalid", "spec.a"),
        ("FieldValueNotSupported", "spec.b"),
        ("FieldValueTooLong", "spec.c"),
        ("FieldValueRequired", "spec.d"),
    ]


def test_a_wrong_type_still_gets_the_other_checks_of_its_kind() -> None:
    # kube-openapi runs every applicable validator; a string against `integer` + enum fails both.
    assert errors_of({"v": "x"}, v={"type": "integer", "enum": [1]}) == [
        'spec.v: Invalid value: "string": spec.v in body must be of type integer: "string"',
        'spec.v: Unsupported value: "x": supported values: "1"',
    ]


def test_status_subresource_paths_are_relative_to_status_in_the_message() -> None:
    status_schema = {"type": "object", "properties": {"ready": {"type": "boolean"}}}
    found = schema.validate({"ready": "yes"}, status_schema, "status")
    assert found == [
        (
            "FieldValueTypeInvalid",
            "status.ready",
            'Invalid value: "string": ready in body must be of type boolean: "string"',
        )
    ]


def test_no_schema_validates_nothing() -> None:
    assert schema.validate({"spec": {"anything": 1}}, None) == []


# -- pruning --------------------------------------------------------------------------------

WIDGET: Schema = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "known": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"strict": {"type": "object", "properties": {"a": {"type": "string"}}}},
                },
                "inner": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}},
                },
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


def widget(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "test/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}


def test_prune_drops_unknown_fields_and_reports_sorted_paths() -> None:
    obj = widget(size=1, colour="red", tags=[{"k": "a", "v": "b"}], labels={"any": "x"})
    obj["extra"] = True
    assert schema.prune(obj, WIDGET) == ["extra", "spec.colour", "spec.tags[0].v"]
    assert obj == widget(size=1, tags=[{"k": "a"}], labels={"any": "x"})


def test_prune_keeps_type_meta_and_drops_unknown_metadata() -> None:
    obj = widget(size=1)
    obj["metadata"] = {"name": "w", "labels": {"a": "b"}, "lables": {"typo": "x"}}
    assert schema.prune(obj, WIDGET) == ["metadata.lables"]
    assert obj["apiVersion"] == "test/v1" and obj["kind"] == "Widget"
    assert obj["metadata"] == {"name": "w", "labels": {"a": "b"}}


def test_preserve_unknown_fields_keeps_everything_but_still_prunes_specified_children() -> None:
    obj = widget(
        template={"spec": {"containers": [{"name": "c", "whatever": 1}]}},
        known={"free": 1, "strict": {"a": "x", "b": "y"}},
    )
    assert schema.prune(obj, WIDGET) == ["spec.known.strict.b"]
    assert obj["spec"]["template"] == {"spec": {"containers": [{"name": "c", "whatever": 1}]}}
    assert obj["spec"]["known"] == {"free": 1, "strict": {"a": "x"}}


def test_embedded_resources_keep_type_meta_and_prune_their_metadata() -> None:
    inner = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1}, "spec": {"x": "y", "z": 1}}
    obj = widget(inner=copy.deepcopy(inner))
    assert schema.prune(obj, WIDGET) == ["spec.inner.metadata.bogus", "spec.inner.spec.z"]
    assert obj["spec"]["inner"] == {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": "y"}}


def test_a_schema_free_version_keeps_everything() -> None:
    obj = widget(anything={"goes": [1]})
    assert schema.prune(obj, None) == []
    assert obj == widget(anything={"goes": [1]})


def test_our_generated_crds_prune_nothing_from_the_example_job() -> None:
    # crd_for marks every modelled object x-kubernetes-preserve-unknown-fields (our models keep
    # unknown fields), so the pod-template fields we do not model survive.
    info = KINDS["PyTorchJob"]
    crd = crd_for(info)
    job_schema = schema.version_schema(crd, info.version)
    container = {
        "name": "pytorch",
        "image": "x",
        "resources": {"limits": {"cpu": "1"}},
        "volumeMounts": [{"name": "v"}],
    }
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [container], "volumes": [{"name": "v"}]}}}
            },
            "elasticPolicy": {"metrics": [{"type": "Resource"}]},
        },
    }
    before = copy.deepcopy(job)
    assert schema.prune(job, job_schema) == []
    assert job == before
    assert schema.validate(job, job_schema) == []


# -- nulls and defaults ---------------------------------------------------------------------


def test_non_nullable_nulls_without_default_are_dropped() -> None:
    s = spec_schema(a={"type": "string"}, b={"type": "string", "nullable": True}, c={"type": "string", "default": "d"})
    obj = widget(a=None, b=None, c=None)
    schema.drop_nulls(obj, s)
    assert obj["spec"] == {"b": None, "c": None}
    schema.apply_defaults(obj, s)
    assert obj["spec"] == {"b": None, "c": "d"}


def test_defaults_fill_absent_fields_at_every_level_and_are_copies() -> None:
    default_list = ["x"]
    s = spec_schema(
        mode={"type": "string", "default": "fast"},
        size={"type": "integer", "default": 1},
        given={"type": "string", "default": "unused"},
        opts={"type": "object", "default": {}, "properties": {"retries": {"type": "integer", "default": 3}}},
        items={
            "type": "array",
            "items": {"type": "object", "properties": {"weight": {"type": "integer", "default": 5}}},
        },
        bag={
            "type": "object",
            "additionalProperties": {"type": "object", "properties": {"on": {"type": "boolean", "default": True}}},
        },
        tags={"type": "array", "items": {"type": "string"}, "default": default_list},
    )
    obj = widget(given="mine", items=[{}, {"weight": 1}], bag={"a": {}})
    schema.apply_defaults(obj, s)
    assert obj["spec"] == {
        "given": "mine",
        "items": [{"weight": 5}, {"weight": 1}],
        "bag": {"a": {"on": True}},
        "mode": "fast",
        "size": 1,
        "opts": {"retries": 3},
        "tags": ["x"],
    }
    obj["spec"]["tags"].append("y")
    assert default_list == ["x"]


# -- embedded resources and list types ------------------------------------------------------


def test_embedded_resources_need_api_version_and_kind() -> None:
    obj = widget(inner={"metadata": {"name": "p"}, "kind": ""})
    assert [f"{f}: {m}" for _, f, m in schema.validate_embedded(obj, WIDGET)] == [
        "spec.inner.apiVersion: Required value: must not be empty",
        'spec.inner.kind: Invalid value: "": must not be empty',
    ]


LIST_TYPES = spec_schema(
    tags={"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
    ports={
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}},
    },
    atomic={"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"},
)


def test_list_type_set_reports_each_repeated_value_once() -> None:
    obj = widget(tags=["a", "b", "a", "a", "b"], atomic=["x", "x"])
    assert [f"{f}: {m}" for _, f, m in schema.validate_list_types(obj, LIST_TYPES)] == [
        'spec.tags[2]: Duplicate value: "a"',
        'spec.tags[4]: Duplicate value: "b"',
    ]


def test_list_type_map_reports_repeated_keys_the_way_go_prints_them() -> None:
    obj = widget(ports=[{"name": "http", "port": 80}, {"name": "http", "port": 81}, {"port": 1}])
    assert [f"{f}: {m}" for _, f, m in schema.validate_list_types(obj, LIST_TYPES)] == [
        'spec.ports[1]: Duplicate value: map[string]interface {}{"name":"http"}'
    ]


def test_list_type_map_items_must_be_objects() -> None:
    obj = widget(ports=["http"])
    assert [m for _, _, m in schema.validate_list_types(obj, LIST_TYPES)] == [
        'Invalid value: "http": must be an object for an array of list-type map'
    ]


# -- scale subresource ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "expected"),
    [
        (3, []),
        (-1, [".spec.replicas: Invalid value: -1: should be a non-negative integer"]),
        (2**31, [".spec.replicas: Invalid value: 2147483648: should be less than or equal to 2147483647"]),
        (
            "2",
            [
                ".spec.replicas: Invalid value: 0: "
                ".spec.replicas accessor error: 2 is of the type string, expected int64"
            ],
        ),
    ],
)
def test_scale_replicas_paths(replicas: Any, expected: list[str]) -> None:
    scale = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
    found = schema.validate_scale({"spec": {"replicas": replicas}}, scale)
    assert [f"{f}: {m}" for _, f, m in found] == expected


# -- Go rendering used in messages ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e6, "1e+06"),
        (123456.0, "123456"),
        (1.5, "1.5"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5e-7, "-2.5e-07"),
        (0.0, "0"),
        (1e21, "1e+21"),
    ],
)
def test_go_float_formatting(value: float, text: str) -> None:
    assert causes.go_float(value) == text


def test_version_schema_picks_the_named_version() -> None:
    crd = {
        "spec": {
            "versions": [
                {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "description": "one"}}},
                {"name": "v2", "schema": {"openAPIV3Schema": {"type": "object", "description": "two"}}},
            ]
        }
    }
    assert schema.version_schema(crd, "v2") == {"type": "object", "description": "two"}
    assert schema.version_schema(crd, "v3") is None


# -- CRD schemas must be structural ---------------------------------------------------------


def test_our_generated_crd_schemas_are_structural() -> None:
    for info in KINDS.values():
        assert schema.structural_problems(schema.version_schema(crd_for(info), info.version), "s") == []


def test_structural_rules_with_the_api_servers_paths_and_words() -> None:
    bad = {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "properties": {
            "spec": {"properties": {"a": {}, "free": {"x-kubernetes-preserve-unknown-fields": True}}},
            "list": {"type": "array"},
            "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
            "inner": {"x-kubernetes-embedded-resource": True},
            "closed": {"type": "object", "x-kubernetes-preserve-unknown-fields": False},
        },
    }
    root = "spec.versions[0].schema.openAPIV3Schema"
    assert [f"{f}: {m}" for _, f, m in schema.structural_problems(bad, root)] == [
        f"{root}.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
        f"{root}.additionalProperties: Forbidden: must not be used at the root",
        f"{root}.properties[closed].x-kubernetes-preserve-unknown-fields: Invalid value: false: "
        "must be true or undefined",
        f"{root}.properties[inner].properties: Required value: must not be empty if x-kubernetes-embedded-resource "
        "is true without x-kubernetes-preserve-unknown-fields",
        f"{root}.properties[inner].type: Required value: must be object if x-kubernetes-embedded-resource is true",
        f"{root}.properties[list].items: Required value: must be specified",
        f"{root}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, "
        "but metadata is implicitly specified",
        f"{root}.properties[spec].properties[a].type: Required value: must not be empty for specified object fields",
        f"{root}.properties[spec].type: Required value: must not be empty for specified object fields",
    ]
    assert schema.structural_problems({"type": "string"}, "s") == [
        ("FieldValueInvalid", "s.type", 'Invalid value: "string": must be object at the root')
    ]
