"""The protobuf body decoder, on bodies captured from kubectl and on hand-built edge cases.

``data/kubectl_protobuf.json`` holds what kubectl v1.32 sent for each ``kubectl create``
command (captured through a logging proxy) next to the JSON that ``kubectl create ...
--dry-run=client -o json`` prints for the very same command: the decoder must turn the first
into exactly the second.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from trainyard.cluster.server.apiserver.requests import protobuf
from trainyard.cluster.server.apiserver.requests.protobuf import MAGIC, ProtobufError

CAPTURED = json.loads((Path(__file__).parent / "data" / "kubectl_protobuf.json").read_text())["cases"]


@pytest.mark.parametrize("case", sorted(CAPTURED))
def test_kubectl_bodies_decode_to_the_json_kubectl_would_send(case: str) -> None:
    captured = CAPTURED[case]
    assert protobuf.decode(bytes.fromhex(captured["body_hex"])) == captured["json"]


def test_the_observed_reference_body_decodes() -> None:
    # The body of `kubectl create configmap cm1 --from-literal=a=b` quoted in the reference, §3.6.
    body = (
        b'k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x1d\n\x13\n\x03cm1\x12\x00\x1a\x00"\x00*\x002\x008\x00B\x00'
        b'\x12\x06\n\x01a\x12\x01b\x1a\x00"\x00'
    )
    assert protobuf.decode(body) == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": "cm1", "creationTimestamp": None},
        "data": {"a": "b"},
    }


# -- a minimal encoder, to build what kubectl's generators never send ------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def ld(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return tag(number, 2) + varint(len(data)) + data


def vi(number: int, value: int) -> bytes:
    return tag(number, 0) + varint(value)


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return ld(number, ld(1, key) + ld(2, value))


def wrap(api_version: str, kind: str, raw: bytes) -> bytes:
    return MAGIC + ld(1, ld(1, api_version) + ld(2, kind)) + ld(2, raw) + ld(3, "") + ld(4, "")


def test_object_meta_fields_beyond_kubectl_generators() -> None:
    owner = ld(5, "kubeflow.org/v1") + ld(1, "PyTorchJob") + ld(3, "job") + ld(4, "u-1") + vi(6, 1) + vi(7, 0)
    meta = b"".join(
        [
            ld(1, ""),
            ld(2, "gen-"),
            ld(3, "team"),
            ld(5, "uid-1"),
            ld(6, "42"),
            vi(7, 3),
            ld(8, vi(1, 1_700_000_000) + vi(2, 5)),
            ld(9, vi(1, 1_700_000_060)),
            vi(10, 30),
            entry(11, "app", "web"),
            entry(11, "tier", ""),
            entry(12, "note", "ünïcode"),
            ld(13, owner),
            ld(14, "kubernetes.io/pvc-protection"),
            ld(14, "example.com/two"),
            ld(99, b"\x00\x01 unknown fields are skipped"),
        ]
    )
    raw = ld(1, meta) + entry(2, "k", "v") + entry(3, "bin", b"\xff\x00") + vi(4, 1)
    assert protobuf.decode(wrap("v1", "ConfigMap", raw)) == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {
            "generateName": "gen-",
            "namespace": "team",
            "uid": "uid-1",
            "resourceVersion": "42",
            "generation": 3,
            "creationTimestamp": "2023-11-14T22:13:20Z",
            "deletionTimestamp": "2023-11-14T22:14:20Z",
            "deletionGracePeriodSeconds": 30,
            "labels": {"app": "web", "tier": ""},
            "annotations": {"note": "ünïcode"},
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "PyTorchJob",
                    "name": "job",
                    "uid": "u-1",
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
            "finalizers": ["kubernetes.io/pvc-protection", "example.com/two"],
        },
        "data": {"k": "v"},
        "binaryData": {"bin": base64.b64encode(b"\xff\x00").decode()},
        "immutable": True,
    }


def test_secret_string_data_type_and_explicit_false_immutable() -> None:
    raw = ld(1, ld(1, "s")) + entry(2, "b", b"\x00") + ld(3, "kubernetes.io/basic-auth") + entry(4, "plain", "text")
    raw += vi(5, 0)
    assert protobuf.decode(wrap("v1", "Secret", raw)) == {
        "kind": "Secret",
        "apiVersion": "v1",
        "metadata": {"name": "s"},
        "data": {"b": "AA=="},
        "type": "kubernetes.io/basic-auth",
        "stringData": {"plain": "text"},
        "immutable": False,  # a pointer field: set to false is not the same as absent
    }


def test_namespace_spec_and_status_and_negative_ints() -> None:
    raw = ld(1, ld(1, "ns") + vi(7, -5)) + ld(2, ld(1, "kubernetes")) + ld(3, ld(1, "Active"))
    assert protobuf.decode(wrap("v1", "Namespace", raw)) == {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": "ns", "generation": -5},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def test_service_account_references() -> None:
    raw = ld(1, ld(1, "sa")) + ld(2, ld(3, "token-1") + ld(1, "Secret")) + ld(3, ld(1, "pull")) + vi(4, 0)
    assert protobuf.decode(wrap("v1", "ServiceAccount", raw)) == {
        "kind": "ServiceAccount",
        "apiVersion": "v1",
        "metadata": {"name": "sa"},
        "secrets": [{"kind": "Secret", "name": "token-1"}],
        "imagePullSecrets": [{"name": "pull"}],
        "automountServiceAccountToken": False,
    }


def test_fixed_width_fields_of_unknown_numbers_are_skipped() -> None:
    raw = ld(1, ld(1, "cm")) + tag(50, 1) + b"\x01" * 8 + tag(51, 5) + b"\x02" * 4
    assert protobuf.decode(wrap("v1", "ConfigMap", raw))["metadata"] == {"name": "cm"}


def test_fields_yields_every_wire_type() -> None:
    buf = vi(1, 300) + tag(2, 1) + (7).to_bytes(8, "little") + ld(3, b"xy") + tag(4, 5) + (9).to_bytes(4, "little")
    assert list(protobuf.fields(buf)) == [(1, 0, 300), (2, 1, 7), (3, 2, b"xy"), (4, 5, 9)]


GOOD = bytes.fromhex(CAPTURED["secret_docker"]["body_hex"])


@pytest.mark.parametrize("cut", range(len(MAGIC), len(GOOD)))
def test_every_truncation_is_a_protobuf_error_or_a_shorter_object(cut: int) -> None:
    # A cut can land on a field boundary and leave a well-formed shorter message; anything else
    # must be reported as ProtobufError, never as an IndexError or a UnicodeDecodeError.
    try:
        decoded = protobuf.decode(GOOD[:cut])
    except ProtobufError:
        return
    assert decoded["kind"] == "Secret"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "expected prefix"),
        (b'{"kind":"ConfigMap"}', "expected prefix"),
        (b"k8s", "expected prefix"),
        (MAGIC, "names no apiVersion and kind"),
        (MAGIC + b"\x0a\x05\x0a\x02v1", "truncated"),
        (MAGIC + b"\x80\x80\x80", "truncated"),
        (MAGIC + b"\xff" * 11, "longer than 10 bytes"),
        (MAGIC + b"\x00\x01", "field number 0"),
        (MAGIC + tag(1, 3), "wire type 3"),
        (MAGIC + tag(1, 1) + b"\x00\x00", "needs 8 bytes"),
        (wrap("v1", "ConfigMap", ld(1, vi(1, 5))), "wire type 0"),
        (wrap("v1", "ConfigMap", ld(1, ld(1, b"\xff\xfe"))), "not valid UTF-8"),
        (wrap("v1", "ConfigMap", vi(2, 1)), "not length-delimited"),
        (wrap("v1", "ConfigMap", vi(1, 1)), "not a message"),
        (wrap("v1", "ConfigMap", ld(1, ld(8, vi(1, 1 << 62)))), "Time out of range"),
        (MAGIC + ld(1, ld(1, "v1") + ld(2, "ConfigMap")) + ld(3, "gzip"), "content encoding"),
        (wrap("apps/v1", "Deployment", b""), "no protobuf decoding for apps/v1, Kind=Deployment"),
    ],
)
def test_malformed_bodies_raise_protobuf_error(body: bytes, message: str) -> None:
    with pytest.raises(ProtobufError, match=message):
        protobuf.decode(body)


def test_supported_kinds() -> None:
    assert protobuf.supports("v1", "ConfigMap") and protobuf.supports("v1", "ServiceAccount")
    assert not protobuf.supports("v1", "Pod") and not protobuf.supports("kubeflow.org/v1", "PyTorchJob")


def test_eviction_with_delete_options() -> None:
    options = vi(1, 0) + ld(2, ld(1, "uid-1")) + ld(4, "Foreground") + ld(5, "All")
    raw = ld(1, ld(1, "pod-1") + ld(3, "ns")) + ld(2, options)
    assert protobuf.decode(wrap("policy/v1", "Eviction", raw)) == {
        "kind": "Eviction",
        "apiVersion": "policy/v1",
        "metadata": {"name": "pod-1", "namespace": "ns"},
        "deleteOptions": {
            "gracePeriodSeconds": 0,  # a pointer: zero is an explicit "now"
            "preconditions": {"uid": "uid-1"},
            "propagationPolicy": "Foreground",
            "dryRun": ["All"],
        },
    }


# What kubectl 1.32 sent for `kubectl create token default --duration 10m --audience aud1 --audience aud2
# --bound-object-kind Pod --bound-object-name p1 --bound-object-uid u1` (captured at the plane).
KUBECTL_TOKEN_REQUEST = (
    b'k8s\x00\n(\n\x18authentication.k8s.io/v1\x12\x0cTokenRequest\x12<\n\x10\n\x00\x12\x00\x1a\x00"\x00*\x002\x00'
    b'8\x00B\x00\x12"\n\x04aud1\n\x04aud2\x1a\x11\n\x03Pod\x12\x02v1\x1a\x02p1"\x02u1 \xd8\x04\x1a\x04\n\x00\x12\x00'
    b'\x1a\x00"\x00'
)


def test_kubectl_token_request() -> None:
    assert protobuf.supports("authentication.k8s.io/v1", "TokenRequest")
    assert protobuf.decode(KUBECTL_TOKEN_REQUEST) == {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": {
            "audiences": ["aud1", "aud2"],
            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p1", "uid": "u1"},
            "expirationSeconds": 600,
        },
        "status": {"token": "", "expirationTimestamp": None},  # as Go's JSON writes the empty status
    }


def test_kubectl_create_quota_hard_quantities_and_scopes() -> None:
    # `kubectl create quota q --hard=pods=2,requests.cpu=500m --scopes=NotBestEffort`
    hard = ld(1, ld(1, "pods") + ld(2, ld(1, "2"))) + ld(1, ld(1, "requests.cpu") + ld(2, ld(1, "500m")))
    raw = ld(1, ld(1, "q")) + ld(2, hard + ld(2, "NotBestEffort")) + ld(3, b"")
    assert protobuf.supports("v1", "ResourceQuota")
    assert protobuf.decode(wrap("v1", "ResourceQuota", raw)) == {
        "kind": "ResourceQuota",
        "apiVersion": "v1",
        "metadata": {"name": "q"},
        "spec": {"hard": {"pods": "2", "requests.cpu": "500m"}, "scopes": ["NotBestEffort"]},
        "status": {},
    }
