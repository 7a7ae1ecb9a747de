"""The API server's edges against ``yard up``: limits, malformed input, unknown paths and verbs,
and the subresources it does not serve, each answered with a Kubernetes ``Status``.

Requests go over a real socket with ``http.client`` (to send exactly the bytes under test), and
through the real kubectl where a client's behaviour is the point.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, free_port

pytestmark = pytest.mark.e2e

LIMIT = 3 * 1024 * 1024
CM = "/api/v1/namespaces/default/configmaps"


def call(
    plane: Plane,
    method: str,
    path: str,
    body: bytes | Iterable[bytes] | None = None,
    *,
    ctype: str = "application/json",
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    conn = plane.connection(timeout=60)
    try:
        hdrs = {"Content-Type": ctype, **(headers or {})}
        chunked = body is not None and not isinstance(body, bytes)
        conn.request(method, path, body=body, headers=hdrs, encode_chunked=chunked)
        response = conn.getresponse()
        raw = response.read()
        is_json = response.getheader("Content-Type", "").startswith("application/json")
        return response.status, json.loads(raw) if is_json else raw.decode()
    finally:
        conn.close()


def assert_status(result: tuple[int, Any], code: int, reason: str, message: str | None = None) -> dict[str, Any]:
    status, body = result
    assert status == code, body
    assert isinstance(body, dict) and body["kind"] == "Status" and body["apiVersion"] == "v1", body
    assert body["status"] == "Failure" and body["code"] == code and body["reason"] == reason, body
    if message is not None:
        assert message in body["message"], body
    return body


def configmap(name: str, size: int = 0) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"blob": "x" * size}}


# -- size limit -----------------------------------------------------------------------------------


def test_a_body_over_3_mib_is_413_with_a_status(plane: Plane) -> None:
    body = json.dumps(configmap("edge-huge", LIMIT)).encode()
    assert_status(call(plane, "POST", CM, body), 413, "RequestEntityTooLarge", f"limit is {LIMIT}")
    # Chunked, so no Content-Length announces it: the limit still holds while reading.
    chunks = (body[i : i + 65536] for i in range(0, len(body), 65536))
    assert_status(call(plane, "POST", CM, chunks), 413, "RequestEntityTooLarge")
    assert_status(call(plane, "PUT", f"{CM}/edge-huge", body), 413, "RequestEntityTooLarge")
    patch = json.dumps({"data": {"blob": "x" * LIMIT}}).encode()
    result = call(plane, "PATCH", f"{CM}/edge-huge", patch, ctype="application/merge-patch+json")
    assert_status(result, 413, "RequestEntityTooLarge")
    assert call(plane, "GET", "/healthz") == (200, "ok")


def test_a_body_of_exactly_the_limit_is_accepted(plane: Plane) -> None:
    body = json.dumps(configmap("edge-at-limit", 1000)).encode()
    body = body[:-1] + b" " * (LIMIT - len(body)) + b"}"
    assert len(body) == LIMIT
    status, created = call(plane, "POST", CM, body)
    assert status == 201 and created["metadata"]["name"] == "edge-at-limit"


def test_kubectl_prints_the_413(kubectl: Kubectl) -> None:
    manifest = json.dumps(configmap("edge-huge-kubectl", LIMIT + 1))
    result = kubectl.run("create", "-f", "-", input=manifest)
    assert result.returncode != 0
    assert "Request entity too large: limit is 3145728" in result.stderr, result.stderr


# -- malformed bodies -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "ctype", "message"),
    [
        (b'{"metadata": {"name": "x"', "application/json", "could not be decoded"),
        (b"\xff\xfe\x00garbage", "application/json", "could not be decoded"),
        (b'{"a": NaN}', "application/json", "could not be decoded"),
        (b'{"a": 1e999}', "application/json", "could not be decoded"),
        (b"[1, 2]", "application/json", "must be a JSON object, not an array"),
        (b'"text"', "application/json", "must be a JSON object, not a string"),
        (b"null", "application/json", "must be a JSON object, not null"),
        (b"metadata: {name: [", "application/yaml", "could not be decoded"),
        (b"- a\n- b\n", "application/yaml", "must be a JSON object, not an array"),
        (b"a: &x [1]\nb: *y\n", "application/yaml", "could not be decoded"),
        (b"[" * 100_000, "application/json", "nested too deeply"),
        (b'{"a":' * 150 + b"1" + b"}" * 150, "application/json", "nested at most 100 levels"),
        (b"k8s\x00\x0a\x05", "application/vnd.kubernetes.protobuf", "truncated"),
        (b'{"kind": "ConfigMap"}', "application/vnd.kubernetes.protobuf", "expected prefix [107 56 115 0]"),
    ],
)
def test_malformed_bodies_are_400(plane: Plane, body: bytes, ctype: str, message: str) -> None:
    assert_status(call(plane, "POST", CM, body, ctype=ctype), 400, "BadRequest", message)


def test_yaml_bodies_keep_timestamps_and_keys_as_strings(plane: Plane) -> None:
    # PyYAML would make these a date and an int key; Kubernetes keeps both as strings.
    body = b"metadata:\n  name: edge-yaml\n  annotations: {when: 2024-01-02}\ndata:\n  1: one\n"
    status, created = call(plane, "POST", CM, body, ctype="application/yaml")
    assert status == 201, created
    assert created["metadata"]["annotations"] == {"when": "2024-01-02"} and created["data"] == {"1": "one"}


def test_malformed_patches_and_delete_options_are_400(plane: Plane) -> None:
    call(plane, "POST", CM, json.dumps(configmap("edge-patch")).encode())
    path = f"{CM}/edge-patch"
    for kind in ("merge-patch", "json-patch", "strategic-merge-patch"):
        ctype = f"application/{kind}+json"
        assert_status(call(plane, "PATCH", path, b"{nope", ctype=ctype), 400, "BadRequest", "the patch")
    assert_status(
        call(plane, "PATCH", f"{path}?fieldManager=t", b"a: [", ctype="application/apply-patch+yaml"), 400, "BadRequest"
    )
    assert_status(call(plane, "DELETE", path, b"{nope"), 400, "BadRequest", "DeleteOptions")
    assert_status(call(plane, "DELETE", path, b'{"gracePeriodSeconds": "soon"}'), 400, "BadRequest")
    assert_status(call(plane, "DELETE", path, b'{"propagationPolicy": "Sideways"}'), 400, "BadRequest")
    assert call(plane, "GET", path)[0] == 200


@pytest.mark.parametrize(
    "query",
    [
        "watch=true&timeoutSeconds=soon",
        "watch=true&timeoutSeconds=1e3",
        "watch=true&timeoutSeconds=99999999999999999999",
    ],
)
def test_malformed_integer_query_parameters_are_400(plane: Plane, query: str) -> None:
    assert_status(call(plane, "GET", f"{CM}?{query}"), 400, "BadRequest", "is not a 64-bit integer")


def test_protobuf_for_kinds_without_a_field_map_is_415(plane: Plane) -> None:
    body = b"k8s\x00\x0a\x1d\x0a\x0fkubeflow.org/v1\x12\x0aPyTorchJob"
    path = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"
    result = call(plane, "POST", path, body, ctype="application/vnd.kubernetes.protobuf")
    assert_status(result, 415, "UnsupportedMediaType", "the body of the request was in an unknown format")
    result = call(plane, "POST", "/api/v1/namespaces/default/pods", body, ctype="application/vnd.kubernetes.protobuf")
    assert_status(result, 415, "UnsupportedMediaType")


# -- unknown paths and verbs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/nope",
        "/api/v2",
        "/apis/nope.example.com",
        "/apis/nope.example.com/v1/things",
        "/api/v1/widgets",
        "/api/v1/namespaces/default/configmaps/x/status",
        "/api/v1/namespaces/default/pods/x/log/extra",
        "/api/v1/namespaces/default/configmaps/x/proxy",
        "/openapi/v3/apis/nope/v1",
    ],
)
def test_unknown_paths_are_404_status(plane: Plane, path: str) -> None:
    body = assert_status(call(plane, "GET", path), 404, "NotFound")
    assert body["message"] == "the server could not find the requested resource"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", CM),
        ("PATCH", CM),
        ("POST", f"{CM}/x"),
        ("POST", "/api/v1/configmaps"),
        ("DELETE", "/api/v1/configmaps"),
        ("POST", "/api/v1/namespaces/default/pods/x/log"),
        ("GET", "/api/v1/namespaces/default/pods/x/binding"),
        ("GET", "/api/v1/namespaces/default/pods/x/eviction"),
        ("DELETE", "/api/v1/namespaces/default/pods/x/exec"),
    ],
)
def test_wrong_verbs_are_405_status(plane: Plane, method: str, path: str) -> None:
    assert_status(call(plane, method, path, b"{}"), 405, "MethodNotAllowed")


# -- connect subresources, served and not -----------------------------------------------------------

RUNNER = """
apiVersion: v1
kind: Pod
metadata: {name: edge-runner}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: python
    command: [python, -c, "import time; print('up', flush=True); time.sleep(600)"]
    ports: [{containerPort: 8080}]
"""

LOCAL = "the trainyard embedded control plane runs pods as local processes"
CLOSED = free_port()  # a pod proxy to a port nothing listens on


@pytest.fixture(scope="module")
def runner(kubectl: Kubectl) -> Iterable[str]:
    kubectl("apply", "-f", "-", input=RUNNER)
    eventually(
        lambda: kubectl("get", "pod", "edge-runner", "-o", "jsonpath={.status.phase}") == "Running",
        timeout=90,
        what="the pod to run",
    )
    yield "edge-runner"
    kubectl("delete", "pod", "edge-runner", "--ignore-not-found", timeout=90)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["get", "--raw", f"/api/v1/namespaces/default/pods/edge-runner:{CLOSED}/proxy/a/b"],
            f"(ServiceUnavailable): error trying to reach service: dial tcp 127.0.0.1:{CLOSED}: connect: connection",
        ),
        (["get", "--raw", "/api/v1/namespaces/default/services/kubernetes/proxy/"], "not found"),
        (["get", "--raw", "/api/v1/nodes/nope/proxy/stats"], 'nodes "nope" not found'),
    ],
    # Named, not by their values: CLOSED differs between xdist workers, whose collections must agree.
    ids=["pod-proxy-to-a-closed-port", "service-proxy-of-no-service", "node-proxy-of-no-node"],
)
def test_kubectl_streaming_and_proxy_fail_fast_and_readably(
    kubectl: Kubectl, runner: str, args: list[str], expected: str
) -> None:
    result = kubectl.run(*args, timeout=30)  # a hang would time out here
    assert result.returncode != 0
    assert expected in result.stderr, result.stderr
    if "not supported" in expected:
        assert LOCAL in result.stderr


def test_connect_subresources_over_http(plane: Plane, runner: str) -> None:
    exec_path = f"/api/v1/namespaces/default/pods/{runner}/exec?command=ls"
    assert_status(call(plane, "GET", exec_path), 400, "BadRequest", "Upgrade request required")
    # Checked before the upgrade, as kube-apiserver checks PodExecOptions (kubectl's exec: test_kubectl_exec).
    upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Protocol": "v5.channel.k8s.io"}
    unstreamed = "you must specify at least 1 of stdin, stdout, stderr"
    assert_status(call(plane, "GET", exec_path, headers=upgrade), 400, "BadRequest", unstreamed)
    h2c = {"Connection": "Upgrade", "Upgrade": "h2c"}
    body = assert_status(call(plane, "GET", exec_path + "&stdout=true", headers=h2c), 400, "BadRequest", "h2c")
    assert "pods/exec over h2c is not supported: it is served over WebSocket and SPDY/3.1 only" in body["message"]
    assert_status(call(plane, "POST", "/api/v1/namespaces/default/pods/nope/exec"), 404, "NotFound", '"nope" not found')
    assert_status(call(plane, "GET", "/api/v1/nodes/vm/proxy/metrics"), 400, "BadRequest", "no kubelet")


def test_discovery_lists_eviction_and_the_connect_subresources_served(plane: Plane) -> None:
    _, doc = call(plane, "GET", "/api/v1")
    names = {r["name"]: r for r in doc["resources"]}
    assert names["pods/eviction"]["verbs"] == ["create"] and names["pods/eviction"]["group"] == "policy"
    assert "serviceaccounts" in names and names["serviceaccounts"]["shortNames"] == ["sa"]
    assert names["pods/exec"] == {
        "name": "pods/exec",
        "singularName": "",
        "namespaced": True,
        "kind": "PodExecOptions",
        "verbs": ["create", "get"],
    }
    assert {"pods/attach", "pods/portforward", "pods/proxy", "services/proxy"} <= names.keys()
    assert "nodes/proxy" not in names  # refused: there is no kubelet


def test_eviction_deletes_the_pod(plane: Plane, kubectl: Kubectl) -> None:
    pods = "/api/v1/namespaces/default/pods"
    pod = {"metadata": {"name": "edge-evicted"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    assert call(plane, "POST", pods, json.dumps(pod).encode())[0] == 201
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}}
    path = f"{pods}/edge-evicted/eviction"
    assert_status(call(plane, "POST", path, json.dumps(eviction).encode()), 400, "BadRequest", "does not match")
    eviction["metadata"]["name"] = "edge-evicted"
    eviction["deleteOptions"] = {"preconditions": {"uid": "not-the-uid"}}
    assert_status(call(plane, "POST", path, json.dumps(eviction).encode()), 409, "Conflict", "Precondition failed")
    eviction["deleteOptions"] = {"dryRun": ["All"]}
    assert call(plane, "POST", path, json.dumps(eviction).encode())[0] == 201
    assert call(plane, "GET", f"{pods}/edge-evicted")[0] == 200
    del eviction["deleteOptions"]
    status, body = call(plane, "POST", path, json.dumps(eviction).encode())
    assert (status, body["status"], body["code"]) == (201, "Success", 201)
    eventually(lambda: kubectl.run("get", "pod", "edge-evicted").returncode != 0, timeout=60, what="the pod to go")
    assert_status(call(plane, "POST", path, json.dumps(eviction).encode()), 404, "NotFound")


# -- regressions: each of these was a 500 (or a plain-text answer) before, found by test_fuzz.py ----


def test_a_path_with_an_encoded_newline_is_still_answered_with_json(plane: Plane) -> None:
    # aiohttp's catch-all route pattern `.*` does not match "\n": its own plain-text 404 answered.
    status, body = call(plane, "GET", "/api/v1/namespaces/%0A/configmaps")
    assert status == 200 and body["kind"] == "ConfigMapList" and body["items"] == []
    assert_status(call(plane, "GET", "/nope%0A"), 404, "NotFound")


@pytest.mark.parametrize(
    ("kind", "path", "body"),
    [
        ("Namespace", "/api/v1/namespaces", {"metadata": {"name": "edge-null-spec"}, "spec": None, "status": None}),
        ("Pod", "/api/v1/namespaces/default/pods", {"metadata": {"name": "edge-null"}, "spec": None}),
        ("Service", "/api/v1/namespaces/default/services", {"metadata": {"name": "edge-null"}, "spec": None}),
    ],
)
def test_null_structs_read_as_empty(plane: Plane, kind: str, path: str, body: dict[str, Any]) -> None:
    # A typed decoder reads `"spec": null` as the zero value; the defaulting code crashed on None.
    status, created = call(plane, "POST", path, json.dumps(body).encode())
    if kind == "Pod":  # an empty spec has no containers, which admission refuses
        assert_status((status, created), 422, "Invalid", "spec.containers: Required value")
    elif kind == "Service":  # nor ports, which a ClusterIP Service needs
        assert_status((status, created), 422, "Invalid", "spec.ports: Required value")
    else:
        assert status == 201, created
        assert isinstance(created["spec"], dict)


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (CM, {"metadata": []}, "cannot unmarshal array into Go struct field ConfigMap.metadata of type v1.ObjectMeta"),
        (
            CM,
            {"metadata": {"name": "x", "labels": ["a"]}},
            "cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type map[string]string",
        ),
        (
            CM,
            {"metadata": {"name": "x", "labels": {"a": 1}}},
            "cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
        ),
        (
            CM,
            {"metadata": {"name": "x", "finalizers": "f"}},
            "cannot unmarshal string into Go struct field ObjectMeta.metadata.finalizers of type []string",
        ),
        (
            CM,
            {"metadata": {"name": "x"}, "data": {"k": {"v": 1}}},
            "cannot unmarshal object into Go struct field ConfigMap.data of type string",
        ),
        (
            "/api/v1/namespaces/default/services",
            {"metadata": {"name": "x"}, "spec": {"ports": [80]}},
            "Go struct field ServiceSpec.spec.ports",
        ),
        (
            "/api/v1/namespaces/default/pods",
            {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "command": "ls -l"}]}},
            "spec.containers[0].command: expected array, got string",
        ),
    ],
)
def test_fields_of_the_wrong_json_type_are_400(plane: Plane, path: str, body: dict[str, Any], message: str) -> None:
    result = call(plane, "POST", path, json.dumps(body).encode())
    status = assert_status(result, 400, "BadRequest", message)
    assert "cannot be handled as a" in status["message"]


def test_owner_references_without_uid_and_bad_names_are_422(plane: Plane) -> None:
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o"}
    body = {"metadata": {"name": "edge-orphan", "ownerReferences": [owner]}}
    result = call(plane, "POST", CM, json.dumps(body).encode())
    assert_status(result, 422, "Invalid", 'metadata.ownerReferences.uid: Invalid value: "": uid must not be empty')
    for name in ("../etc", "UPPER", "a/b", "x" * 254):
        result = call(plane, "POST", CM, json.dumps({"metadata": {"name": name}}).encode())
        assert_status(result, 422, "Invalid", "metadata.name: Invalid value")


def test_malformed_crds_are_422_and_leave_discovery_intact(plane: Plane) -> None:
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for spec in (
        {},
        {"group": "", "names": {"plural": "configmaps", "kind": "ConfigMap"}, "scope": "Namespaced"},
        {"group": "x.example.com", "names": {"plural": "things"}, "scope": "Sideways", "versions": []},
    ):
        body = {"metadata": {"name": "things.x.example.com"}, "spec": spec}
        assert_status(call(plane, "POST", path, json.dumps(body).encode()), 422, "Invalid")
    _, core = call(plane, "GET", "/api/v1")
    assert "configmaps" in {r["name"] for r in core["resources"]}
    assert call(plane, "GET", CM)[0] == 200


def test_server_side_apply_with_null_metadata_creates_from_the_url_name(plane: Plane) -> None:
    path = f"{CM}/edge-ssa-null?fieldManager=edge"
    body = b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": null, "data": {"a": "b"}}'
    status, created = call(plane, "PATCH", path, body, ctype="application/apply-patch+yaml")
    assert status == 201, created
    assert created["metadata"]["name"] == "edge-ssa-null" and created["data"] == {"a": "b"}


def test_event_tables_survive_timestamps_that_are_not_rfc3339(plane: Plane, kubectl: Kubectl) -> None:
    event = {
        "metadata": {"name": "edge-bad-time"},
        "involvedObject": {"kind": "Pod", "name": "x", "namespace": "default"},
        "reason": "Odd",
        "lastTimestamp": "yesterday-ish",
    }
    assert call(plane, "POST", "/api/v1/namespaces/default/events", json.dumps(event).encode())[0] == 201
    try:
        listing = kubectl("get", "events", "--field-selector", "reason=Odd")
        assert "<invalid>" in listing and "Odd" in listing
    finally:
        # The plane is shared: a strict client (lightkube) listing default's events later fails to decode it.
        assert call(plane, "DELETE", "/api/v1/namespaces/default/events/edge-bad-time")[0] == 200


@pytest.mark.parametrize(
    ("method", "path", "code", "reason", "fragment"),
    [
        ("GET", "/api/v1/namespaces/default/pods/edge-runner/log?tailLines=ten", 400, "BadRequest", "tailLines"),
        ("GET", "/api/v1/namespaces/default/pods/edge-runner/log?sinceTime=yesterday", 400, "BadRequest", "sinceTime"),
        ("DELETE", f"{CM}/edge-any?gracePeriodSeconds=soon", 400, "BadRequest", "gracePeriodSeconds"),
        # Decodable but out of range: ValidatePodLogOptions answers 422, as kube-apiserver does.
        ("GET", "/api/v1/namespaces/default/pods/edge-runner/log?sinceSeconds=0", 422, "Invalid", "sinceSeconds"),
        ("GET", "/api/v1/namespaces/default/pods/edge-runner/log?limitBytes=-1", 422, "Invalid", "limitBytes"),
    ],
)
def test_malformed_query_parameters_of_logs_and_delete_are_4xx(
    plane: Plane, runner: str, method: str, path: str, code: int, reason: str, fragment: str
) -> None:
    assert_status(call(plane, method, path), code, reason, fragment)


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/version"), ("PUT", "/healthz"), ("DELETE", "/api"), ("PATCH", "/apis"), ("POST", "/openapi/v3")],
)
def test_read_only_documents_refuse_writes_with_405(plane: Plane, method: str, path: str) -> None:
    assert_status(call(plane, method, path, b"{}"), 405, "MethodNotAllowed")


def test_scale_patches_that_fail_are_4xx(plane: Plane) -> None:
    job = {
        "metadata": {"name": "edge-scale"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}}
            },
            "runPolicy": {"suspend": True},
        },
    }
    jobs = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"
    assert call(plane, "POST", jobs, json.dumps(job).encode())[0] == 201
    scale = f"{jobs}/edge-scale/scale"
    failing = b'[{"op": "test", "path": "/spec/replicas", "value": 99}]'
    assert_status(call(plane, "PATCH", scale, failing, ctype="application/json-patch+json"), 422, "Invalid")
    missing = b'[{"op": "remove", "path": "/nope"}]'
    assert call(plane, "PATCH", scale, missing, ctype="application/json-patch+json")[0] in (400, 422)
    call(plane, "DELETE", f"{jobs}/edge-scale")


def test_delete_options_with_nulls_read_as_absent(plane: Plane) -> None:
    # The python client and lightkube may send null for every unset DeleteOptions field.
    call(plane, "POST", CM, json.dumps(configmap("edge-null-opts")).encode())
    opts = {"gracePeriodSeconds": None, "propagationPolicy": None, "dryRun": None, "preconditions": None}
    status, _ = call(plane, "DELETE", f"{CM}/edge-null-opts", json.dumps(opts).encode())
    assert status == 200
    assert call(plane, "GET", f"{CM}/edge-null-opts")[0] == 404


def test_a_warning_that_cannot_be_a_header_is_dropped_not_the_connection(plane: Plane) -> None:
    # The unknown-field warning would quote a control character; HTTP headers cannot carry one.
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ctl-key", "\u001f": 1}})
    status, created = call(plane, "POST", CM, body.encode())
    assert status == 201, created
    status, replaced = call(plane, "PUT", f"{CM}/ctl-key", body.encode())
    assert status == 200 and replaced["metadata"]["name"] == "ctl-key", replaced
    call(plane, "DELETE", f"{CM}/ctl-key")
