"""``kubectl create <generator>`` against ``yard up``: these POST protobuf bodies (reference §3.6).

Each test runs the real kubectl, checks that it really sent
``application/vnd.kubernetes.protobuf`` (so the protobuf path is what is exercised), and reads
the object back with ``kubectl get -o json``.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from conftest import Kubectl, eventually

pytestmark = pytest.mark.e2e

BINARY = bytes(range(256)) + b"\xff\xfe not UTF-8"
PROTOBUF_HEADER = re.compile(r"Content-Type: application/vnd\.kubernetes\.protobuf")


def create(kubectl: Kubectl, *args: str) -> str:
    """Run ``kubectl create ...`` at -v=8 and insist that the POST carried a protobuf body."""
    result = kubectl.run("create", *args, "-v=8")
    assert result.returncode == 0, result.stderr[-3000:]
    assert PROTOBUF_HEADER.search(result.stderr), "kubectl did not send protobuf; the test exercises nothing"
    return result.stdout.strip()


def test_configmap_from_literals_and_files(kubectl: Kubectl, tmp_path: Path) -> None:
    (tmp_path / "greeting.txt").write_text("hello\nworld\n")
    (tmp_path / "blob.bin").write_bytes(BINARY)
    out = create(
        kubectl,
        "configmap",
        "pb-cm1",
        "--from-literal=a=b",
        "--from-literal=empty=",
        f"--from-file={tmp_path / 'greeting.txt'}",
        f"--from-file={tmp_path / 'blob.bin'}",
    )
    assert out == "configmap/pb-cm1 created"
    cm = kubectl.json("get", "configmap", "pb-cm1")
    assert cm["data"] == {"a": "b", "empty": "", "greeting.txt": "hello\nworld\n"}
    # A file that is not UTF-8 goes to binaryData, base64 on the wire.
    assert base64.b64decode(cm["binaryData"]["blob.bin"]) == BINARY
    assert cm["metadata"]["namespace"] == "default" and cm["metadata"]["uid"]
    assert cm["metadata"]["creationTimestamp"].endswith("Z")
    assert "immutable" not in cm


def test_secret_generic_is_base64_and_opaque(kubectl: Kubectl, tmp_path: Path) -> None:
    (tmp_path / "key.bin").write_bytes(BINARY)
    out = create(
        kubectl,
        "secret",
        "generic",
        "pb-s1",
        "--from-literal=user=admin",
        "--from-literal=password=s3cr3t!",
        f"--from-file={tmp_path / 'key.bin'}",
    )
    assert out == "secret/pb-s1 created"
    secret = kubectl.json("get", "secret", "pb-s1")
    decoded = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert decoded == {"user": b"admin", "password": b"s3cr3t!", "key.bin": BINARY}
    assert secret["type"] == "Opaque"
    assert kubectl("get", "secret", "pb-s1", "-o", "jsonpath={.data.user}") == base64.b64encode(b"admin").decode()


def test_secret_docker_registry_and_another_namespace(kubectl: Kubectl) -> None:
    out = create(
        kubectl,
        "secret",
        "docker-registry",
        "pb-regcred",
        "-n",
        "kube-system",
        "--docker-server=registry.example.com",
        "--docker-username=bob",
        "--docker-password=hunter2",
        "--docker-email=bob@example.com",
    )
    assert out == "secret/pb-regcred created"
    secret = kubectl.json("get", "secret", "pb-regcred", "-n", "kube-system")
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    config = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))
    auth = config["auths"]["registry.example.com"]
    assert auth["username"] == "bob" and auth["password"] == "hunter2"
    assert base64.b64decode(auth["auth"]) == b"bob:hunter2"


def test_namespace_then_objects_inside_it(kubectl: Kubectl) -> None:
    assert create(kubectl, "namespace", "pb-ns1") == "namespace/pb-ns1 created"
    ns = kubectl.json("get", "namespace", "pb-ns1")
    assert ns["status"]["phase"] == "Active" and ns["spec"]["finalizers"] == ["kubernetes"]
    assert create(kubectl, "configmap", "inside", "-n", "pb-ns1", "--from-literal=x=y") == "configmap/inside created"
    assert kubectl("get", "configmap", "inside", "-n", "pb-ns1", "-o", "jsonpath={.data.x}") == "y"
    kubectl("delete", "namespace", "pb-ns1", "--wait=false")
    eventually(
        lambda: kubectl.run("get", "namespace", "pb-ns1").returncode != 0, timeout=60, what="the namespace to go"
    )


def test_serviceaccount(kubectl: Kubectl) -> None:
    assert create(kubectl, "serviceaccount", "pb-sa1") == "serviceaccount/pb-sa1 created"
    sa = kubectl.json("get", "serviceaccount", "pb-sa1")
    assert sa["kind"] == "ServiceAccount" and sa["metadata"]["name"] == "pb-sa1"
    table = kubectl("get", "sa", "pb-sa1")
    assert re.match(r"NAME\s+SECRETS\s+AGE\n+pb-sa1\s+0\s+\S+", table), table


def test_service_clusterip_keeps_named_and_numbered_target_ports(kubectl: Kubectl) -> None:
    out = create(kubectl, "service", "clusterip", "pb-web", "--tcp=80:8080", "--tcp=443:https")
    assert out == "service/pb-web created"
    svc = kubectl.json("get", "service", "pb-web")
    ports = [(p["port"], p["targetPort"], p["protocol"]) for p in svc["spec"]["ports"]]
    assert ports == [(80, 8080, "TCP"), (443, "https", "TCP")]
    assert svc["spec"]["selector"] == {"app": "pb-web"} and svc["metadata"]["labels"] == {"app": "pb-web"}


def test_server_dry_run_creates_nothing(kubectl: Kubectl) -> None:
    out = create(kubectl, "configmap", "pb-dry", "--from-literal=a=b", "--dry-run=server")
    assert out == "configmap/pb-dry created (server dry run)"
    out = create(kubectl, "secret", "generic", "pb-dry", "--from-literal=a=b", "--dry-run=server", "-o", "json")
    assert base64.b64decode(json.loads(out)["data"]["a"]) == b"b"
    for kind in ("configmap", "secret"):
        missing = kubectl.run("get", kind, "pb-dry")
        assert '"pb-dry" not found' in missing.stderr, missing.stderr


def test_creating_twice_is_already_exists(kubectl: Kubectl) -> None:
    create(kubectl, "configmap", "pb-twice", "--from-literal=a=b")
    again = kubectl.run("create", "configmap", "pb-twice", "--from-literal=a=c")
    assert again.returncode != 0
    assert again.stderr.strip() == 'error: failed to create configmap: configmaps "pb-twice" already exists'
    assert kubectl("get", "configmap", "pb-twice", "-o", "jsonpath={.data.a}") == "b"


def claims(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    decoded: dict[str, object] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return decoded


def test_token_for_a_service_account(kubectl: Kubectl) -> None:
    create(kubectl, "serviceaccount", "pb-sa-token")
    token = create(kubectl, "token", "pb-sa-token", "--duration=10m", "--audience=aud1", "--audience=aud2")
    seen = claims(token)
    assert seen["aud"] == ["aud1", "aud2"]
    assert seen["sub"] == "system:serviceaccount:default:pb-sa-token"
    assert isinstance(seen["exp"], int) and isinstance(seen["iat"], int) and seen["exp"] - seen["iat"] == 600
    # A token bound to an object: the object must exist, as kube-apiserver checks.
    bound = kubectl.run("create", "token", "pb-sa-token", "--bound-object-kind=Pod", "--bound-object-name=nope")
    assert bound.returncode != 0
    assert bound.stderr.strip() == 'error: failed to create token: pods "nope" not found'
