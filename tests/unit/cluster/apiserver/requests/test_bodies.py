"""Decoding request bodies: what reaches the API semantics is plain JSON, or a 400/415 Status."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from trainyard.cluster.server.apiserver import connect
from trainyard.cluster.server.apiserver.errors import ApiError
from trainyard.cluster.server.apiserver.requests import bodies

CAPTURED = json.loads((Path(__file__).parent / "data" / "kubectl_protobuf.json").read_text())["cases"]


def test_yaml_is_read_the_way_kubernetes_reads_it() -> None:
    doc = b"a: 2024-01-02\nb: 2024-01-02T03:04:05Z\n1: one\n3.5: f\nnull: x\nc: !!binary aGk=\nd: !!set {q, p}\n"
    assert bodies.decode(doc, "application/yaml") == {
        "a": "2024-01-02",
        "b": "2024-01-02T03:04:05Z",
        "1": "one",
        "3.5": "f",
        "null": "x",
        "c": base64.b64encode(b"hi").decode(),
        "d": ["p", "q"],
    }
    assert bodies.decode(b"t: !!timestamp 2024-01-02\n", "application/apply-patch+yaml") == {"t": "2024-01-02"}


def test_json_under_a_yaml_type_reads_as_the_document_it_is() -> None:
    # kubectl apply --server-side sends JSON as application/apply-patch+yaml. JSON is YAML's flow
    # style; its numbers are numbers as kube-apiserver's YAML reader takes them (1e3 too), and
    # a flow mapping that is not JSON is still read as YAML.
    doc = {
        "metadata": {"name": "x", "labels": {"a": "b"}},
        "spec": {"n": 3, "f": 1.5, "t": True, "z": None, "s": ["é"]},
    }
    assert bodies.decode(b"\n  " + json.dumps(doc).encode(), "application/apply-patch+yaml") == doc
    assert bodies.decode(b'{"n": 1e3, "m": -2E-1}', "application/apply-patch+yaml") == {"n": 1000.0, "m": -0.2}
    assert bodies.decode(b"{a: 1, 'b': [x, 2024-01-02]}", "application/apply-patch+yaml") == {
        "a": 1,
        "b": ["x", "2024-01-02"],
    }


@pytest.mark.parametrize(
    ("raw", "ctype", "message"),
    [
        (b'{"a": NaN}', "application/json", "invalid JSON value NaN"),
        (b'{"a": -Infinity}', "application/json", "invalid JSON value -Infinity"),
        (b"[1e999]", "application/json", "inf is not a JSON number"),
        (b"a: .nan\n", "application/yaml", "nan is not a JSON number"),
        (b"[" * 5000 + b"]" * 5000, "application/json", "nested too deeply"),
        (b"[" * 101 + b"]" * 101, "application/json", "nested at most 100 levels"),
        (b"\xff\xfe\xfd", "application/json", "could not be decoded"),
        (b"a: [\n", "application/yaml", "could not be decoded"),
        (b"--- a\n--- b\n", "application/yaml", "could not be decoded"),
        (b"a: !!python/object:os.system {}\n", "application/yaml", "could not be decoded"),
    ],
)
def test_undecodable_bodies_are_400(raw: bytes, ctype: str, message: str) -> None:
    with pytest.raises(ApiError) as info:
        bodies.decode(raw, ctype)
    assert info.value.code == 400 and message in info.value.message


def test_yaml_alias_bombs_stop_early() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 12)]
    with pytest.raises(ApiError, match="too many nodes"):
        bodies.decode("\n".join(lines).encode(), "application/yaml")


def test_a_depth_of_exactly_the_limit_is_accepted() -> None:
    depth = bodies.MAX_DEPTH
    value = bodies.decode(b"[" * depth + b"]" * depth, "application/json")
    for _ in range(depth - 1):
        value = value[0]
    assert value == []


@pytest.mark.parametrize(("raw", "what"), [(b"[]", "an array"), (b"7", "a number"), (b"null", "null")])
def test_decode_object_wants_an_object(raw: bytes, what: str) -> None:
    with pytest.raises(ApiError, match=f"must be a JSON object, not {what}"):
        bodies.decode_object(raw, "application/json", ("v1", "ConfigMap"))


def test_decode_object_reads_protobuf_only_for_kinds_with_a_field_map() -> None:
    body = bytes.fromhex(CAPTURED["configmap_literal"]["body_hex"])
    assert bodies.decode_object(body, "application/vnd.kubernetes.protobuf", ("v1", "ConfigMap"))["data"] == {"a": "b"}
    for endpoint in (("v1", "Pod"), ("kubeflow.org/v1", "PyTorchJob"), None):
        with pytest.raises(ApiError) as info:
            bodies.decode_object(body, "application/vnd.kubernetes.protobuf", endpoint)
        assert info.value.code == 415 and info.value.reason == "UnsupportedMediaType"
    with pytest.raises(ApiError) as info:
        bodies.decode_object(body[:20], "application/vnd.kubernetes.protobuf", ("v1", "ConfigMap"))
    assert info.value.code == 400 and "truncated" in info.value.message


def test_an_empty_body_is_an_empty_object() -> None:
    assert bodies.decode_object(b"", "application/json", None) == {}


@pytest.mark.parametrize(
    ("segment", "name"),
    [("web", "web"), ("web:8080", "web"), ("https:web", "web"), ("https:web:443", "web"), ("a:b:c", "b")],
)
def test_proxy_names_may_carry_scheme_and_port(segment: str, name: str) -> None:
    assert connect.object_name("proxy", segment) == name
    assert connect.object_name("exec", segment) == segment
