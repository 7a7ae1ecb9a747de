"""Fuzzing the API server over a real socket: whatever arrives, the answer is a Kubernetes answer.

Hypothesis builds requests from the server's real vocabulary (resources from discovery, seeded
object names and namespaces, subresources, query parameters with selector grammar, every patch
content type, protobuf) mixed with garbage (random segments, truncated JSON, random bytes), and
sends at least ``EXAMPLES`` of them to an in-process ``ApiPlane`` listening on a free port. The
plane is the API server alone, so fuzzed pods are never run. The properties:

* never a 5xx;
* every non-2xx answer is a JSON ``Status`` whose ``code`` is the HTTP status;
* every 2xx JSON answer parses (watch streams line by line);
* the server still answers ``/healthz`` at the end.

The run is derandomized so that CI sees the same requests every time.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from trainyard.cluster.paths import Layout
from trainyard.cluster.server.plane import ApiPlane

pytestmark = pytest.mark.e2e

# At least 2000 per run; raise it locally for a longer hunt.
EXAMPLES = int(os.environ.get("TRAINYARD_FUZZ_EXAMPLES", "2000"))
# Unset: the same requests on every run (derandomized). Set: a random hunt from that seed.
SEED = int(os.environ["TRAINYARD_FUZZ_SEED"]) if os.environ.get("TRAINYARD_FUZZ_SEED") else None
NAMESPACES = ["default", "fuzz", "kube-system", "missing-ns"]
NAMES = ["fz-cm", "fz-secret", "fz-pod", "fz-svc", "fz-sa", "fz-job", "fuzz", "default", "vm"]
# The seeded object of each resource, so that most requests name something that exists.
SEEDED = {
    "configmaps": "fz-cm",
    "secrets": "fz-secret",
    "pods": "fz-pod",
    "services": "fz-svc",
    "serviceaccounts": "fz-sa",
    "pytorchjobs": "fz-job",
    "namespaces": "fuzz",
    "customresourcedefinitions": "pytorchjobs.kubeflow.org",
}
SUBRESOURCES = ["status", "log", "binding", "eviction", "scale", "exec", "attach", "portforward", "proxy", "token"]
PROTOBUF_SAMPLES = [
    bytes.fromhex(case["body_hex"])
    for case in json.loads(
        (
            Path(__file__).parents[1] / "unit" / "cluster" / "apiserver" / "requests" / "data" / "kubectl_protobuf.json"
        ).read_text()
    )["cases"].values()
]
PYTORCHJOB = yaml.safe_load((Path(__file__).parents[2] / "examples" / "pytorch-ddp" / "pytorchjob.yaml").read_text())


@dataclass
class Api:
    port: int
    resources: list[tuple[str, str, bool, str]] = field(default_factory=list)  # (apiVersion, plural, namespaced, kind)


class Client:
    """One keep-alive connection, reopened whenever the server closes it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def send(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, str, bytes]:
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                return response.status, response.getheader("Content-Type", ""), response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                if attempt:
                    raise
        raise AssertionError("unreachable")


def seed_objects(client: Client) -> None:
    """Create the objects requests name (again: the fuzz deletes them); those that exist stay."""

    def post(path: str, obj: dict[str, Any]) -> None:
        status, _, body = client.send("POST", path, json.dumps(obj).encode(), {"Content-Type": "application/json"})
        # 409: still there; 403: its namespace is being deleted; 404: the fuzz deleted the CRD.
        assert status in (201, 409, 403, 404), body

    post("/api/v1/namespaces", {"metadata": {"name": "fuzz"}})
    for ns in ("default", "fuzz"):
        base = f"/api/v1/namespaces/{ns}"
        post(f"{base}/configmaps", {"metadata": {"name": "fz-cm", "labels": {"app": "a"}}, "data": {"k": "v"}})
        post(f"{base}/secrets", {"metadata": {"name": "fz-secret"}, "data": {"k": "dg=="}})
        post(f"{base}/serviceaccounts", {"metadata": {"name": "fz-sa"}})
        post(f"{base}/services", {"metadata": {"name": "fz-svc"}, "spec": {"ports": [{"port": 80}]}})
        post(f"{base}/pods", {"metadata": {"name": "fz-pod"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
        post(
            f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs",
            {**PYTORCHJOB, "metadata": {"name": "fz-job", "labels": {"app": "a"}}},
        )


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    plane = ApiPlane(Layout(tmp_path_factory.mktemp("fuzz-home")), port=0)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fuzz-plane", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(plane.start(), loop).result(120)
    try:
        client = Client(plane.port)
        seed_objects(client)
        api = Api(plane.port)
        _, _, raw = client.send("GET", "/apis", None, {})
        gvs = ["v1"] + [v["groupVersion"] for g in json.loads(raw)["groups"] for v in g["versions"]]
        for gv in gvs:
            _, _, raw = client.send("GET", f"/api/{gv}" if gv == "v1" else f"/apis/{gv}", None, {})
            for r in json.loads(raw)["resources"]:
                if "/" not in r["name"]:
                    api.resources.append((gv, r["name"], r["namespaced"], r["kind"]))
        yield api
    finally:
        asyncio.run_coroutine_threadsafe(plane.stop(), loop).result(120)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


# -- strategies -----------------------------------------------------------------------------------
# Built once per plane (``request_strategy``): hypothesis spends most of a run drawing, not sending.

short_text = st.text(max_size=8)
printable = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=8)


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` four times in five: enough garbage to probe, enough sense to get past the first check."""
    # (one_of(good, good, good, good, bad) would not do: hypothesis explores its branches evenly.)
    return st.sampled_from(range(5)).flatmap(lambda i: bad if i == 4 else good)


def chance(p: float) -> st.SearchStrategy[bool]:
    """True with probability ``p`` (in steps of 5%), drawn so that hypothesis keeps the odds."""
    return st.sampled_from(range(20)).map(lambda i: i < round(p * 20))


segment = mostly(st.sampled_from(NAMES + NAMESPACES + SUBRESOURCES), short_text.filter(bool))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    short_text,
)
KEYS = ["metadata", "spec", "status", "name", "namespace", "labels", "containers", "replicas", "items", "data"]
json_values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.sampled_from(KEYS) | short_text, kids, max_size=4),
    max_leaves=6,
)
string_maps = st.dictionaries(short_text, short_text, max_size=3)
METADATA_FIELDS = {
    "generateName": mostly(st.just("fz-"), short_text),
    "namespace": mostly(st.sampled_from(NAMESPACES), short_text),
    "labels": mostly(st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["a", "b"])), json_values),
    "annotations": mostly(string_maps, json_values),
    "finalizers": mostly(st.lists(st.just("example.com/f"), max_size=2), json_values),
    "ownerReferences": st.lists(
        mostly(
            st.fixed_dictionaries(
                {"apiVersion": st.just("v1"), "kind": st.just("ConfigMap"), "name": st.sampled_from(NAMES)},
                optional={"uid": short_text, "controller": mostly(st.booleans(), json_values)},
            ),
            json_values,
        ),
        max_size=2,
    ),
    "resourceVersion": mostly(st.integers(0, 300).map(str), json_values),
    "uid": short_text,
    "creationTimestamp": mostly(st.just("2024-01-01T00:00:00Z"), short_text),
    "deletionTimestamp": short_text,
}


@st.composite
def metadata(draw: st.DrawFn) -> Any:
    meta = {"name": draw(mostly(st.sampled_from(NAMES), short_text))}
    for key in draw(st.lists(st.sampled_from(sorted(METADATA_FIELDS)), max_size=2, unique=True)):
        meta[key] = draw(METADATA_FIELDS[key])
    return meta


METADATA = mostly(metadata(), json_values)
FIELDS = ["spec", "status", "data", "binaryData", "stringData", "type", "immutable", "involvedObject",
          "lastTimestamp", "eventTime", "secrets", "target", "deleteOptions"]  # fmt: skip
POD_SPEC = st.fixed_dictionaries(
    {
        "containers": mostly(
            st.lists(
                st.fixed_dictionaries(
                    {"name": mostly(st.sampled_from(["c", "main"]), short_text)},
                    optional={"image": short_text, "command": mostly(st.just(["true"]), json_values)},
                ),
                max_size=2,
            ),
            json_values,
        )
    }
)
CRD_VERSION = st.fixed_dictionaries(
    {"name": mostly(st.sampled_from(["v1", "v1beta1"]), short_text)},
    optional={
        "served": mostly(st.booleans(), json_values),
        "storage": mostly(st.booleans(), json_values),
        "subresources": mostly(st.just({"status": {}}), json_values),
        "additionalPrinterColumns": mostly(
            st.lists(st.fixed_dictionaries({"name": short_text, "type": short_text, "jsonPath": short_text})),
            json_values,
        ),
    },
)
CRD_SPEC = st.fixed_dictionaries(
    {
        "group": mostly(st.sampled_from(["fz.example.com", "kubeflow.org"]), short_text),
        "scope": mostly(st.sampled_from(["Namespaced", "Cluster"]), short_text),
        "names": mostly(
            st.fixed_dictionaries(
                {"plural": mostly(st.sampled_from(["widgets", "pytorchjobs"]), short_text)},
                optional={
                    "kind": mostly(st.sampled_from(["Widget", "PyTorchJob"]), short_text),
                    "singular": short_text,
                    "shortNames": json_values,
                },
            ),
            json_values,
        ),
        "versions": mostly(st.lists(CRD_VERSION, max_size=2), json_values),
    },
)


def job_spec(draw: st.DrawFn) -> Any:
    spec = json.loads(json.dumps(PYTORCHJOB["spec"]))
    replica = draw(st.sampled_from([None, "Master", "Worker"]))
    if replica is not None:
        spec["pytorchReplicaSpecs"][replica][draw(st.sampled_from(["replicas", "restartPolicy", "template"]))] = draw(
            json_values
        )
    return spec


def draw_object(draw: st.DrawFn, api_version: str, kind: str, name: str | None) -> dict[str, Any]:
    """An object shaped like the real ones for the endpoint, with random holes and random values."""
    meta = draw(METADATA)
    if name is not None and isinstance(meta, dict) and draw(chance(0.75)):
        meta["name"] = name
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    obj |= draw(st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=1))
    if kind == "Pod":
        obj["spec"] = draw(POD_SPEC)
    elif kind == "CustomResourceDefinition":
        obj["spec"] = spec = draw(CRD_SPEC)
        names = spec["names"] if isinstance(spec["names"], dict) else {}
        if isinstance(meta, dict) and draw(chance(0.75)):
            meta["name"] = f"{names.get('plural')}.{spec['group']}"
    elif kind == "PyTorchJob":
        obj["spec"] = job_spec(draw)
    if draw(chance(0.2)):
        obj[draw(st.sampled_from(["apiVersion", "kind", "metadata", "spec"]))] = draw(json_values)
    return obj


JSON_PATCHES = st.lists(
    st.fixed_dictionaries(
        {"op": mostly(st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]), short_text)},
        optional={
            "path": st.sampled_from(["/metadata/labels/x", "/spec", "/data/k", "/metadata/resourceVersion", "/-"])
            | short_text,
            "from": mostly(st.sampled_from(["/data/k", "/metadata"]), short_text),
            "value": json_values,
        },
    )
    | json_values,
    max_size=3,
)
_sample = st.sampled_from(PROTOBUF_SAMPLES)
PROTOBUF = st.one_of(
    _sample,
    st.tuples(_sample, st.integers(0, 300)).map(lambda t: t[0][: t[1]]),
    st.tuples(_sample, st.integers(4, 300), st.integers(0, 255)).map(
        lambda t: t[0][: t[1]] + bytes([t[2]]) + t[0][t[1] + 1 :]
    ),
    st.binary(max_size=64).map(lambda b: b"k8s\x00" + b),
)


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


GARBAGE_BODIES = st.one_of(
    st.none(),
    st.just(b""),
    json_values.map(_dumps),
    JSON_PATCHES.map(_dumps),
    PROTOBUF,
    st.binary(max_size=100),
)
DELETE_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "propagationPolicy": mostly(st.sampled_from(["Background", "Foreground", "Orphan"]), json_values),
        "gracePeriodSeconds": mostly(st.integers(-5, 100), json_values),
        "preconditions": st.fixed_dictionaries({}, optional={"uid": short_text, "resourceVersion": short_text}),
        "dryRun": mostly(st.just(["All"]), json_values),
        "orphanDependents": json_values,
    },
)
SMP_DIRECTIVES = {
    "$patch": mostly(st.sampled_from(["replace", "merge", "delete"]), json_values),
    "$retainKeys": mostly(st.lists(st.sampled_from(["containers", "labels", "name"])), json_values),
    "$setElementOrder/containers": mostly(st.lists(st.fixed_dictionaries({"name": st.just("c")})), json_values),
    "$deleteFromPrimitiveList/finalizers": mostly(st.lists(st.just("example.com/f")), json_values),
    "containers": st.lists(st.fixed_dictionaries({"name": st.just("c"), "$patch": st.sampled_from(["delete", "x"])})),
}
PATCH_TYPES = [
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
]


def draw_body(draw: st.DrawFn, method: str, api_version: str, kind: str, name: str | None) -> tuple[bytes | None, str]:
    """A body and its Content-Type: mostly what the endpoint takes, sometimes anything at all."""
    if draw(chance(0.2)):
        return draw(GARBAGE_BODIES), draw(mostly(st.sampled_from(CONTENT_TYPES), printable))
    if method == "DELETE":
        return _dumps(draw(DELETE_OPTIONS)), "application/json"
    if method == "PATCH":
        ctype = draw(st.sampled_from(PATCH_TYPES))
        if ctype == "application/json-patch+json":
            return _dumps(draw(JSON_PATCHES)), ctype
        patch = draw_object(draw, api_version, kind, name)
        for key in draw(st.lists(st.sampled_from(sorted(patch)), max_size=3)):
            patch.pop(key, None)  # a patch names only what it changes
        if ctype == "application/strategic-merge-patch+json" and draw(chance(0.5)):
            target = patch.get(draw(st.sampled_from(["metadata", "spec"])))
            directive = draw(st.sampled_from(sorted(SMP_DIRECTIVES)))
            (target if isinstance(target, dict) else patch)[directive] = draw(SMP_DIRECTIVES[directive])
        return _dumps(patch), ctype
    obj = draw_object(draw, api_version, kind, name)
    form = draw(st.sampled_from(["json", "json", "yaml", "truncated"]))
    if form == "yaml":
        return yaml.safe_dump(obj).encode(), "application/yaml"
    raw = _dumps(obj)
    if form == "truncated":
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw, "application/json"


_label_key = mostly(st.sampled_from(["app", "tier", "example.com/role", "x"]), printable)
_label_value = mostly(st.sampled_from(["a", "b", ""]), printable)
LABEL_SELECTORS = st.lists(
    st.one_of(
        st.tuples(_label_key, st.sampled_from(["=", "==", "!="]), _label_value).map("".join),
        st.tuples(_label_key, st.sampled_from([" in ", " notin "]), st.lists(_label_value, max_size=3)).map(
            lambda t: f"{t[0]}{t[1]}({', '.join(t[2])})"
        ),
        _label_key,
        _label_key.map(lambda k: f"!{k}"),
        short_text,
    ),
    max_size=3,
).map(",".join)
FIELD_SELECTORS = st.lists(
    st.tuples(
        mostly(st.sampled_from(["metadata.name", "metadata.namespace", "status.phase", "spec.nodeName"]), printable),
        st.sampled_from(["=", "==", "!=", "", "=~"]),
        mostly(st.sampled_from(NAMES), short_text),
    ).map("".join),
    max_size=3,
).map(",".join)
ints = mostly(st.integers(-5, 10**6).map(str), printable)
bools = mostly(st.sampled_from(["true", "True", "1", "false", "0", "yes"]), printable)
QUERY = {
    "watch": bools,
    "labelSelector": LABEL_SELECTORS,
    "fieldSelector": FIELD_SELECTORS,
    "limit": ints,
    "continue": short_text,
    "resourceVersion": st.sampled_from(["", "0", "1", "5", "999999999"]) | ints,
    "resourceVersionMatch": mostly(st.sampled_from(["Exact", "NotOlderThan"]), short_text),
    "sendInitialEvents": bools,
    "allowWatchBookmarks": bools,
    "dryRun": mostly(st.sampled_from(["All", "None"]), short_text),
    "propagationPolicy": mostly(st.sampled_from(["Background", "Foreground", "Orphan"]), short_text),
    "gracePeriodSeconds": ints,
    "fieldManager": mostly(st.sampled_from(["kubectl", "fuzz"]), short_text),
    "fieldValidation": st.sampled_from(["Strict", "Warn", "Ignore"]),
    "force": bools,
    "includeObject": mostly(st.sampled_from(["None", "Metadata", "Object"]), short_text),
    "container": mostly(st.sampled_from(["c", "main"]), short_text),
    "follow": bools,
    "previous": bools,
    "timestamps": bools,
    "tailLines": ints,
    "limitBytes": ints,
    "sinceSeconds": ints,
    "sinceTime": mostly(st.just("2024-01-01T00:00:00Z"), short_text),
    "command": short_text,
    "timeoutSeconds": ints,
}
CONTENT_TYPES = [
    "application/json",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "text/plain",
    "application/json; charset=utf-8",
]
ACCEPTS = [
    "application/json",
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
    "application/vnd.kubernetes.protobuf,application/json",
    "*/*",
]
META_PATHS = ["/version", "/healthz", "/api", "/apis", "/openapi/v3", "/openapi/v3/api/v1", "/apis/kubeflow.org"]


@dataclass
class Request:
    method: str
    path: str
    body: bytes | None
    headers: dict[str, str]


def quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def request_strategy(api: Api) -> st.SearchStrategy[Request]:
    names = mostly(st.sampled_from(NAMES), short_text.filter(bool))
    namespaces = mostly(st.sampled_from(["default", "fuzz", *NAMESPACES]), short_text.filter(bool))

    @st.composite
    def requests(draw: st.DrawFn) -> Request:
        form = draw(st.sampled_from(["resource"] * 8 + ["meta", "random"]))
        gv, plural, namespaced, kind = draw(st.sampled_from(api.resources))
        name = None
        if form == "meta":
            path = draw(st.sampled_from(META_PATHS))
        elif form == "random":
            path = "/" + "/".join(quote(s) for s in draw(st.lists(segment, max_size=6)))
        else:
            parts = ["api", "v1"] if gv == "v1" else ["apis", *gv.split("/")]
            if (namespaced and draw(chance(0.8))) or draw(chance(0.1)):
                parts += ["namespaces", draw(namespaces)]
            parts.append(plural)
            if draw(chance(0.7)):
                seeded = SEEDED.get(plural, "fz-new")
                name = draw(mostly(st.sampled_from([seeded, seeded, seeded, "fz-new"]), names))
                parts.append(name)
                if draw(chance(0.25)):
                    sub = draw(mostly(st.sampled_from(SUBRESOURCES), short_text.filter(bool)))
                    parts.append(sub)
                    if sub == "proxy" or draw(chance(0.1)):
                        parts += draw(st.lists(segment, max_size=2))
            path = "/" + "/".join(quote(p) for p in parts)
        # POST mostly to collections, the other writes mostly to objects, as clients do.
        method = draw(st.sampled_from(["GET", "GET", "PUT", "PATCH", "DELETE"] + ["POST"] * (3 if name is None else 1)))
        headers = {"Accept": draw(st.sampled_from(ACCEPTS))}
        body = None
        if method != "GET" or draw(chance(0.1)):
            body, headers["Content-Type"] = draw_body(draw, method, gv, kind, name)
        keys = draw(st.lists(st.sampled_from(sorted(QUERY)), max_size=3, unique=True))
        params = {key: draw(QUERY[key]) for key in keys}
        if "watch" in params:
            # Streams must end on their own: the server holds a watch open for timeoutSeconds.
            params["timeoutSeconds"] = draw(st.sampled_from(["0", "0", "0", "1"]))
        if headers.get("Content-Type") == "application/apply-patch+yaml" and draw(chance(0.8)):
            params["fieldManager"] = "fuzz"
        if params:
            path += "?" + urllib.parse.urlencode(params)
        return Request(method, path, body, headers)

    return requests()


# -- the property -----------------------------------------------------------------------------------


def _too_large(status: int, raw: bytes) -> bool:
    """kube-apiserver's answer to a list at a revision it has not reached: 504, not a crash."""
    try:
        causes = json.loads(raw)["details"]["causes"]
    except (ValueError, KeyError, TypeError):
        return False
    return status == 504 and any(c.get("reason") == "ResourceVersionTooLarge" for c in causes)


def check(client: Client, request: Request) -> int:
    status, ctype, raw = client.send(request.method, request.path, request.body, request.headers)
    where = f"{request.method} {request.path} {request.headers} body={request.body[:300] if request.body else None!r}"
    assert status < 500 or _too_large(status, raw), f"{status} for {where}: {raw[:2000]!r}"
    if not 200 <= status < 300:
        assert ctype.startswith("application/json"), f"{status} {ctype} for {where}: {raw[:500]!r}"
        body = json.loads(raw)
        assert body.get("kind") == "Status" and body.get("apiVersion") == "v1", f"{where}: {body}"
        assert body.get("code") == status and body.get("status") == "Failure", f"{where}: {body}"
        assert isinstance(body.get("message"), str) and isinstance(body.get("reason"), str), f"{where}: {body}"
    elif ctype.startswith("application/json"):
        # One object per line: a single object or list, or the events of a watch (maybe none).
        assert raw or "watch=" in request.path, f"an empty {status} answer to {where}"
        for line in raw.splitlines():
            json.loads(line)
    return status


def test_fuzzed_requests_get_kubernetes_answers(api: Api) -> None:
    client = Client(api.port)
    statuses: list[int] = []

    @settings(
        max_examples=EXAMPLES,
        derandomize=SEED is None,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(request=request_strategy(api))
    @seed(SEED or 0)
    def one(request: Request) -> None:
        if len(statuses) % 200 == 0:
            seed_objects(client)
        statuses.append(check(client, request))

    one()
    assert len(statuses) >= EXAMPLES
    # The fuzz must reach past the error paths, or it tests only them.
    assert sum(200 <= s < 300 for s in statuses) > EXAMPLES // 20, sorted(set(statuses))
    assert {400, 404, 405} <= set(statuses), sorted(set(statuses))
    assert client.send("GET", "/healthz", None, {}) == (200, "text/plain; charset=utf-8", b"ok")
    _, _, raw = client.send("GET", "/api/v1/namespaces/default/configmaps", None, {})
    assert json.loads(raw)["kind"] == "ConfigMapList"
