"""Chunked lists and field selectors against a running plane: raw HTTP and the real kubectl.

kubectl get sends ``limit=500`` and follows ``metadata.continue``; later pages must come from the
first page's revision, so objects written meanwhile never duplicate or drop items. Field
selectors cover every key of reference §3.2 with ``=``, ``==``, ``!=``, several terms and kr8s's
repeated terms; an unsupported key is 400 in the API server's words.

(Named ``test_list_paging`` because ``tests/unit/cluster/apiserver/requests/test_paging.py`` owns the bare name.)
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually

pytestmark = pytest.mark.e2e

COUNT = 1203  # more than two of kubectl's 500-item pages
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def call(plane: Plane, method: str, path: str, body: Any = None, accept: str = "application/json") -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", "Accept": accept}
    request = urllib.request.Request(plane.url + path, data=data, method=method, headers=headers)
    try:
        with plane.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def get(plane: Plane, path: str, **query: str) -> Any:
    status, body = call(plane, "GET", f"{path}?{urllib.parse.urlencode(query)}")
    assert status == 200, body
    return body


def namespace(kubectl: Kubectl, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
    return name


@pytest.fixture(scope="module")
def crowded(plane: Plane, kubectl: Kubectl) -> Iterator[str]:
    ns = namespace(kubectl, "paging")
    for i in range(COUNT):
        body = {
            "metadata": {"name": f"cm-{i:04d}", "labels": {"parity": "odd" if i % 2 else "even"}},
            "data": {"i": str(i)},
        }
        status, answer = call(plane, "POST", f"/api/v1/namespaces/{ns}/configmaps", body)
        assert status == 201, answer
    yield ns
    kubectl.run("delete", "namespace", ns, "--wait=false")


def test_kubectl_get_lists_every_object_through_pages(kubectl: Kubectl, crowded: str) -> None:
    listing = kubectl.run("get", "configmaps", "-n", crowded, "--no-headers", "-v=6")
    assert listing.returncode == 0, listing.stderr
    rows = [line.split()[0] for line in listing.stdout.splitlines()]
    assert rows == [f"cm-{i:04d}" for i in range(COUNT)]
    requests = re.findall(r"GET \S+/configmaps\?(\S+) 200", listing.stderr)
    assert len(requests) == 3 and all("limit=500" in q for q in requests)
    assert [("continue=" in q) for q in requests] == [False, True, True]
    names = kubectl("get", "configmaps", "-n", crowded, "-o", "name").split()
    assert len(names) == COUNT == len(set(names))


def test_raw_pages_carry_continue_and_remaining_count(plane: Plane, crowded: str) -> None:
    path = f"/api/v1/namespaces/{crowded}/configmaps"
    first = get(plane, path, limit="500")
    assert len(first["items"]) == 500
    assert first["metadata"]["remainingItemCount"] == COUNT - 500
    seen = [o["metadata"]["name"] for o in first["items"]]
    token = first["metadata"]["continue"]
    while token:
        page = get(plane, path, limit="500", **{"continue": token})
        assert page["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        seen += [o["metadata"]["name"] for o in page["items"]]
        token = page["metadata"].get("continue")
    assert seen == sorted(seen) and len(seen) == len(set(seen)) == COUNT
    assert "continue" not in get(plane, path)["metadata"]  # no limit, no paging


def test_tables_carry_the_continue_token(plane: Plane, crowded: str) -> None:
    path = f"/api/v1/namespaces/{crowded}/configmaps?limit=10"
    status, table = call(plane, "GET", path, accept=TABLE)
    assert status == 200 and table["kind"] == "Table" and len(table["rows"]) == 10
    assert table["metadata"]["remainingItemCount"] == COUNT - 10
    status, rest = call(plane, "GET", f"{path}&continue={table['metadata']['continue']}", accept=TABLE)
    assert [r["object"]["metadata"]["name"] for r in rest["rows"]] == [f"cm-{i:04d}" for i in range(10, 20)]


def test_label_selected_pages_count_matches_only(plane: Plane, crowded: str) -> None:
    path = f"/api/v1/namespaces/{crowded}/configmaps"
    page = get(plane, path, limit="300", labelSelector="parity=odd")
    assert len(page["items"]) == 300 and all(int(o["data"]["i"]) % 2 for o in page["items"])
    assert "remainingItemCount" not in page["metadata"] and page["metadata"]["continue"]


def test_continued_pages_show_the_first_pages_revision(plane: Plane, kubectl: Kubectl) -> None:
    ns = namespace(kubectl, "snap")
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for i in range(6):
        assert call(plane, "POST", path, {"metadata": {"name": f"cm-{i}"}, "data": {"v": "old"}})[0] == 201
    first = get(plane, path, limit="2")
    assert call(plane, "DELETE", f"{path}/cm-3")[0] == 200
    assert call(plane, "PUT", f"{path}/cm-4", {"metadata": {"name": "cm-4"}, "data": {"v": "new"}})[0] == 200
    assert call(plane, "POST", path, {"metadata": {"name": "cm-2b"}, "data": {"v": "new"}})[0] == 201
    rest = get(plane, path, limit="10", **{"continue": first["metadata"]["continue"]})
    assert [(o["metadata"]["name"], o["data"]["v"]) for o in rest["items"]] == [
        ("cm-2", "old"),
        ("cm-3", "old"),
        ("cm-4", "old"),
        ("cm-5", "old"),
    ]
    now = get(plane, path)
    assert [o["metadata"]["name"] for o in now["items"]] == ["cm-0", "cm-1", "cm-2", "cm-2b", "cm-4", "cm-5"]
    kubectl.run("delete", "namespace", ns, "--wait=false")


@pytest.mark.parametrize(
    ("query", "code", "message"),
    [
        ({"limit": "5", "continue": "garbage!"}, 400, "invalid continue token: continue key is not valid"),
        ({"limit": "5", "continue": "e30", "resourceVersion": "3"}, 400, "specifying resource version is not allowed"),
        ({"resourceVersion": "999999999"}, 504, "Too large resource version: 999999999"),
    ],
)
def test_bad_list_requests_get_status_objects(plane: Plane, query: dict[str, str], code: int, message: str) -> None:
    status, body = call(plane, "GET", f"/api/v1/namespaces/default/configmaps?{urllib.parse.urlencode(query)}")
    assert status == code
    assert body["kind"] == "Status" and body["message"].startswith(message)


# -- field selectors ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def selectable(plane: Plane, kubectl: Kubectl) -> Iterator[str]:
    ns = namespace(kubectl, "fields")
    pod = {
        "metadata": {"name": "quick"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "command": ["python", "-c", "pass"]}],
        },
    }
    assert call(plane, "POST", f"/api/v1/namespaces/{ns}/pods", pod)[0] == 201
    for name, kind, reason, component in (("e1", "Pod", "Started", "kubelet"), ("e2", "Node", "Ready", "node")):
        event = {
            "metadata": {"name": name},
            "involvedObject": {
                "kind": kind,
                "name": "quick",
                "namespace": ns,
                "uid": f"uid-{name}",
                "apiVersion": "v1",
            },
            "reason": reason,
            "type": "Normal",
            "source": {"component": component},
            "reportingComponent": component,
        }
        assert call(plane, "POST", f"/api/v1/namespaces/{ns}/events", event)[0] == 201
    for name, kind in (("tls", "kubernetes.io/tls"), ("plain", "")):
        secret = {"metadata": {"name": name}, "type": kind, "data": {"tls.crt": "eA==", "tls.key": "eA=="}}
        assert call(plane, "POST", f"/api/v1/namespaces/{ns}/secrets", secret)[0] == 201
    service = {"metadata": {"name": "headless"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}
    assert call(plane, "POST", f"/api/v1/namespaces/{ns}/services", service)[0] == 201
    eventually(
        lambda: get(plane, f"/api/v1/namespaces/{ns}/pods/quick").get("status", {}).get("phase") == "Succeeded",
        timeout=120,
        what="the pod to finish",
    )
    yield ns
    kubectl.run("delete", "namespace", ns, "--wait=false")


def selected(plane: Plane, path: str, selector: str) -> list[str]:
    return [o["metadata"]["name"] for o in get(plane, path, fieldSelector=selector)["items"]]


def node_name(plane: Plane) -> str:
    return str(get(plane, "/api/v1/nodes")["items"][0]["metadata"]["name"])


@pytest.mark.parametrize(
    ("resource", "selector", "expected"),
    [
        ("pods", "metadata.name=quick", ["quick"]),
        ("pods", "metadata.name==quick", ["quick"]),
        ("pods", "metadata.name!=quick", []),
        ("pods", "metadata.name=quick,metadata.name=quick", ["quick"]),  # kr8s repeats terms
        ("pods", "metadata.name=quick,metadata.name=other", []),
        ("pods", "metadata.namespace={ns}", ["quick"]),
        ("pods", "spec.nodeName={node}", ["quick"]),
        ("pods", "spec.host={node}", ["quick"]),
        ("pods", "spec.nodeName=", []),
        ("pods", "spec.restartPolicy=Never", ["quick"]),
        ("pods", "spec.restartPolicy!=Never", []),
        ("pods", "spec.schedulerName=default-scheduler", ["quick"]),
        ("pods", "spec.serviceAccountName=", ["quick"]),
        ("pods", "spec.hostNetwork=false", ["quick"]),
        ("pods", "status.phase=Succeeded,spec.restartPolicy=Never", ["quick"]),
        ("pods", "status.phase=Running", []),
        ("pods", "status.podIP!=", ["quick"]),
        ("pods", "status.nominatedNodeName=", ["quick"]),
        ("events", "involvedObject.kind=Pod", ["e1"]),
        ("events", "involvedObject.namespace={ns},involvedObject.uid=uid-e2,involvedObject.name=quick", ["e2"]),
        ("events", "involvedObject.apiVersion=v1,involvedObject.kind!=Pod", ["e2"]),
        ("events", "involvedObject.resourceVersion=,involvedObject.fieldPath=", ["e1", "e2"]),
        ("events", "reason=Started", ["e1"]),
        ("events", "source=node", ["e2"]),
        ("events", "reportingComponent=kubelet", ["e1"]),
        ("events", "type=Normal", ["e1", "e2"]),
        ("secrets", "type=kubernetes.io/tls", ["tls"]),
        ("secrets", "type=Opaque", ["plain"]),
        ("services", "spec.clusterIP=None,spec.type=ClusterIP", ["headless"]),
    ],
)
def test_field_selectors_of_reference_section_3_2(
    plane: Plane, selectable: str, resource: str, selector: str, expected: list[str]
) -> None:
    query = selector.format(ns=selectable, node=node_name(plane))
    found = selected(plane, f"/api/v1/namespaces/{selectable}/{resource}", query)
    if resource == "events":  # the node agent records its own events about the pod as well
        found = [name for name in found if name in ("e1", "e2")]
    assert found == expected


def test_cluster_scoped_field_selectors(plane: Plane, selectable: str) -> None:
    assert selectable in selected(plane, "/api/v1/namespaces", "status.phase=Active")
    assert selected(plane, "/api/v1/namespaces", f"metadata.name={selectable}") == [selectable]
    assert selected(plane, "/api/v1/nodes", "spec.unschedulable=false") == [node_name(plane)]
    assert selected(plane, "/api/v1/nodes", "spec.unschedulable=true") == []


@pytest.mark.parametrize(
    ("path", "selector", "message"),
    [
        ("/api/v1/namespaces/default/pods", "spec.containers=x", "field label not supported: spec.containers"),
        ("/api/v1/nodes", "metadata.namespace=x", "field label not supported: metadata.namespace"),
        ("/api/v1/namespaces", "metadata.namespace=x", "field label not supported: metadata.namespace"),
        (
            "/api/v1/namespaces/default/configmaps",
            "data.key=x",
            '"data.key" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
    ],
)
def test_unsupported_field_selectors_are_400(plane: Plane, path: str, selector: str, message: str) -> None:
    status, body = call(plane, "GET", f"{path}?fieldSelector={urllib.parse.quote(selector)}")
    assert (status, body["reason"], body["message"]) == (400, "BadRequest", message)


def test_kubectl_field_selector(kubectl: Kubectl, selectable: str) -> None:
    terms = "reason=Started,type!=Warning,involvedObject.uid=uid-e1"
    out = kubectl("get", "events", "-n", selectable, "--field-selector", terms, "-o", "name")
    assert out.split() == ["event/e1"]
    bad = kubectl.run("get", "pods", "-n", selectable, "--field-selector", "spec.bogus=1")
    assert "field label not supported: spec.bogus" in bad.stderr
