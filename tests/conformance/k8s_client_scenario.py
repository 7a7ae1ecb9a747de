"""One scenario of the official ``kubernetes`` Python client against a trainyard plane.

Run as a script, so that the same code drives every pinned client version (35.x, which the
Kubeflow SDKs pin, lives outside the project's venv and is put on ``PYTHONPATH`` by the test):

    python k8s_client_scenario.py KUBECONFIG crud NAMESPACE
    python k8s_client_scenario.py KUBECONFIG expired NAMESPACE STALE_RV

It prints the client version first and ``SCENARIO OK`` last; any deviation raises.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import kubernetes
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

TIMEOUT = 60.0
CRD_GROUP = "conformance.trainyard.dev"
CRD_VERSION = "v1"
PLURAL = "gizmos"
KF_GROUP, KF_VERSION, KF_PLURAL = "kubeflow.org", "v1", "pytorchjobs"


def eventually(probe: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")


def expect_status(code: int, call: Callable[[], Any], what: str) -> ApiException:
    try:
        call()
    except ApiException as exc:
        assert exc.status == code, f"{what}: expected {code}, got {exc.status}: {exc.body}"
        return exc
    raise AssertionError(f"{what}: expected ApiException {code}, the call succeeded")


class Recorder:
    """A ``watch.Watch().stream()`` in a thread, collecting events until ``until`` says stop."""

    def __init__(self, func: Callable[..., Any], *args: Any, until: Callable[[dict[str, Any]], bool], **kw: Any):
        self.events: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self._watch = watch.Watch()
        self._until = until
        self._thread = threading.Thread(target=self._run, args=(func, args, kw), daemon=True)
        self._thread.start()

    def _run(self, func: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        try:
            for event in self._watch.stream(func, *args, timeout_seconds=60, _request_timeout=90, **kw):
                self.events.append(event)
                if self._until(event):
                    self._watch.stop()
                    return
        except BaseException as exc:
            self.error = exc

    def result(self) -> list[dict[str, Any]]:
        self._thread.join(TIMEOUT)
        assert not self._thread.is_alive(), f"watch still running; events so far: {self._types()}"
        if self.error is not None:
            raise self.error
        return self.events

    def _types(self) -> list[tuple[str, str]]:
        return [(e["type"], e["raw_object"].get("metadata", {}).get("name", "")) for e in self.events]


def is_deleted(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["type"] == "DELETED" and e["raw_object"]["metadata"]["name"] == name


# -- discovery -----------------------------------------------------------------------------------


def discovery() -> None:
    code = client.VersionApi().get_code()
    assert code.major == "1" and code.minor.isdigit() and code.git_version.startswith("v1."), code
    core = client.CoreApi().get_api_versions()
    assert "v1" in core.versions, core
    groups = {g.name: g for g in client.ApisApi().get_api_versions().groups}
    assert groups["kubeflow.org"].preferred_version.version == "v1", groups.get("kubeflow.org")
    assert "apiextensions.k8s.io" in groups
    resources = {r.name: r for r in client.CoreV1Api().get_api_resources().resources}
    assert resources["pods"].namespaced and resources["pods"].kind == "Pod"
    assert "pods/log" in resources and "pods/status" in resources
    assert not resources["namespaces"].namespaced
    kf = client.CustomObjectsApi().get_api_resources(KF_GROUP, KF_VERSION)
    kf = kf if isinstance(kf, dict) else kf.to_dict()
    assert any(r["name"] == "pytorchjobs/status" for r in kf["resources"]), kf


# -- core/v1 -------------------------------------------------------------------------------------


def namespaces(ns: str) -> None:
    v1 = client.CoreV1Api()
    created = v1.create_namespace({"metadata": {"name": ns, "labels": {"conformance": "k8s-client"}}})
    assert created.metadata.name == ns and created.status.phase == "Active"
    listed = v1.list_namespace(label_selector="conformance=k8s-client")
    assert ns in [n.metadata.name for n in listed.items]
    patched = v1.patch_namespace(ns, {"metadata": {"labels": {"patched": "yes"}}})
    assert patched.metadata.labels == {"conformance": "k8s-client", "patched": "yes"}
    assert int(patched.metadata.resource_version) > int(created.metadata.resource_version)


def configmaps(ns: str) -> None:
    v1 = client.CoreV1Api()
    start = v1.list_namespaced_config_map(ns).metadata.resource_version
    rec = Recorder(v1.list_namespaced_config_map, ns, resource_version=start, until=is_deleted("cm1"))

    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="cm1", labels={"app": "demo"}), data={"a": "1", "b": "2"}
    )
    created = v1.create_namespaced_config_map(ns, body)
    assert created.metadata.uid and created.metadata.creation_timestamp.tzinfo is not None
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "cm2", "labels": {"app": "other"}}, "data": {}})
    expect_status(409, lambda: v1.create_namespaced_config_map(ns, body), "create of an existing name")

    got = v1.read_namespaced_config_map("cm1", ns)
    assert got.data == {"a": "1", "b": "2"} and got.metadata.resource_version == created.metadata.resource_version
    names = [c.metadata.name for c in v1.list_namespaced_config_map(ns, label_selector="app=demo").items]
    assert names == ["cm1"], names
    names = [c.metadata.name for c in v1.list_namespaced_config_map(ns, label_selector="app in (demo,other)").items]
    assert sorted(names) == ["cm1", "cm2"], names

    got.data["c"] = "3"
    replaced = v1.replace_namespaced_config_map("cm1", ns, got)
    assert replaced.data == {"a": "1", "b": "2", "c": "3"}
    # `got` still carries the resourceVersion the replace above superseded.
    exc = expect_status(409, lambda: v1.replace_namespaced_config_map("cm1", ns, got), "replace with a stale RV")
    assert '"reason":"Conflict"' in exc.body.replace(" ", ""), exc.body

    patched = v1.patch_namespaced_config_map("cm1", ns, {"data": {"a": None, "d": "4"}})
    assert patched.data == {"b": "2", "c": "3", "d": "4"}, patched.data
    noop = v1.patch_namespaced_config_map("cm1", ns, {"data": {"d": "4"}})
    assert noop.metadata.resource_version == patched.metadata.resource_version, "a no-op patch bumped the RV"

    # A dry run deletes nothing (and emits no watch event), whether dryRun travels in the
    # DeleteOptions body (as kubectl sends it) or as a query parameter.
    v1.delete_namespaced_config_map("cm1", ns, body=client.V1DeleteOptions(dry_run=["All"]))
    v1.delete_namespaced_config_map("cm1", ns, dry_run="All")
    v1.delete_collection_namespaced_config_map(ns, dry_run="All")
    v1.delete_collection_namespaced_config_map(ns, body=client.V1DeleteOptions(dry_run=["All"]))
    names = [c.metadata.name for c in v1.list_namespaced_config_map(ns, label_selector="app").items]
    assert names == ["cm1", "cm2"], names

    def delete_if(**preconditions: str) -> Any:
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(**preconditions))
        return v1.delete_namespaced_config_map("cm1", ns, body=options)

    # Preconditions protect against deleting a recreated (uid) or changed (RV) object.
    exc = expect_status(409, lambda: delete_if(uid="00000000-0000-0000-0000-000000000000"), "delete, wrong uid")
    assert "Precondition failed: UID in precondition" in exc.body, exc.body
    expect_status(409, lambda: delete_if(resource_version=created.metadata.resource_version), "delete, stale RV")
    delete_if(uid=created.metadata.uid, resource_version=patched.metadata.resource_version)
    expect_status(404, lambda: v1.read_namespaced_config_map("cm1", ns), "read after delete")

    events = rec.result()
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "cm1"),
        ("ADDED", "cm2"),
        ("MODIFIED", "cm1"),
        ("MODIFIED", "cm1"),
        ("DELETED", "cm1"),
    ], [(e["type"], e["raw_object"]["metadata"]["name"]) for e in events]
    assert isinstance(events[0]["object"], client.V1ConfigMap)
    rvs = [e["object"].metadata.resource_version for e in events]
    # Every write's response RV shows up verbatim in its watch event (kopf relies on the same).
    assert rvs[0] == created.metadata.resource_version
    assert rvs[2:4] == [replaced.metadata.resource_version, patched.metadata.resource_version]
    assert events[3]["object"].data == {"b": "2", "c": "3", "d": "4"}
    assert int(rvs[4]) > int(rvs[3]), "DELETED carries the deletion's own RV"
    v1.delete_collection_namespaced_config_map(ns, label_selector="app=other")
    assert not v1.list_namespaced_config_map(ns, label_selector="app").items


def services(ns: str) -> None:
    v1 = client.CoreV1Api()
    svc = {
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    }
    created = v1.create_namespaced_service(ns, svc)
    assert created.spec.ports[0].port == 80 and created.spec.type == "ClusterIP"
    # A dict body is a strategic merge patch: Service ports merge by port, they are not replaced.
    patched = v1.patch_namespaced_service("web", ns, {"spec": {"ports": [{"name": "metrics", "port": 9090}]}})
    assert sorted(p.port for p in patched.spec.ports) == [80, 9090], patched.spec.ports
    assert [s.metadata.name for s in v1.list_namespaced_service(ns, label_selector="app=web").items] == ["web"]
    got = v1.read_namespaced_service("web", ns)
    got.metadata.labels["tier"] = "front"
    assert v1.replace_namespaced_service("web", ns, got).metadata.labels == {"app": "web", "tier": "front"}
    v1.delete_namespaced_service("web", ns)
    expect_status(404, lambda: v1.read_namespaced_service("web", ns), "read after delete")


def pods(ns: str) -> None:
    v1 = client.CoreV1Api()
    pod = {
        "metadata": {"name": "hello", "labels": {"app": "hello"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "echo hello; echo world"]}],
        },
    }
    created = v1.create_namespaced_pod(ns, pod)
    assert created.status.phase == "Pending" and created.spec.containers[0].command[0] == "sh"
    expect_status(
        422,
        lambda: v1.create_namespaced_pod(ns, {"metadata": {"name": "bad"}, "spec": {"containers": []}}),
        "pod without containers",
    )
    done = eventually(
        lambda: (p := v1.read_namespaced_pod("hello", ns)).status.phase in ("Succeeded", "Failed") and p,
        "the pod to finish",
    )
    assert done.status.phase == "Succeeded", done.status
    assert done.status.container_statuses[0].state.terminated.exit_code == 0
    assert v1.read_namespaced_pod_log("hello", ns) == "hello\nworld\n"
    assert v1.read_namespaced_pod_log("hello", ns, container="main", tail_lines=1) == "world\n"
    assert v1.read_namespaced_pod_status("hello", ns).status.phase == "Succeeded"
    patched = v1.patch_namespaced_pod("hello", ns, {"metadata": {"labels": {"seen": "yes"}}})
    assert patched.metadata.labels == {"app": "hello", "seen": "yes"}
    assert [p.metadata.name for p in v1.list_namespaced_pod(ns, label_selector="seen=yes").items] == ["hello"]
    v1.delete_namespaced_pod("hello", ns)
    eventually(lambda: not v1.list_namespaced_pod(ns).items, "the pod to be deleted")


# -- custom resources ----------------------------------------------------------------------------


def gizmo_crd() -> None:
    ext = client.ApiextensionsV1Api()
    crd = {
        "metadata": {"name": f"{PLURAL}.{CRD_GROUP}"},
        "spec": {
            "group": CRD_GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
            "versions": [
                {
                    "name": CRD_VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }
    try:
        ext.create_custom_resource_definition(crd)
    except ApiException as exc:
        assert exc.status == 409, exc.body  # another client version's run made it already
    established = eventually(
        lambda: any(
            c.type == "Established" and c.status == "True"
            for c in ext.read_custom_resource_definition(f"{PLURAL}.{CRD_GROUP}").status.conditions or []
        ),
        "the CRD to be established",
    )
    assert established


def gizmos(ns: str) -> None:
    co = client.CustomObjectsApi()
    args = (CRD_GROUP, CRD_VERSION, ns, PLURAL)
    start = co.list_namespaced_custom_object(*args)["metadata"]["resourceVersion"]
    rec = Recorder(co.list_namespaced_custom_object, *args, resource_version=start, until=is_deleted("w1"))

    body = {
        "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
        "kind": "Gizmo",
        "metadata": {"name": "w1", "labels": {"color": "red"}},
        "spec": {"size": 1, "parts": ["a", "b"]},
        "status": {"ignored": True},
    }
    created = co.create_namespaced_custom_object(*args, body)
    assert created["metadata"]["generation"] == 1 and "status" not in created, created
    co.create_namespaced_custom_object(*args, {**body, "metadata": {"name": "w2", "labels": {"color": "blue"}}})
    got = co.get_namespaced_custom_object(*args, "w1")
    assert got["spec"] == {"size": 1, "parts": ["a", "b"]}
    listed = co.list_namespaced_custom_object(*args, label_selector="color=red")
    assert [w["metadata"]["name"] for w in listed["items"]] == ["w1"]

    got["spec"]["size"] = 2
    replaced = co.replace_namespaced_custom_object(*args, "w1", got)
    assert replaced["spec"]["size"] == 2 and replaced["metadata"]["generation"] == 2
    expect_status(409, lambda: co.replace_namespaced_custom_object(*args, "w1", got), "replace with a stale RV")

    # A dict body is a JSON merge patch for custom objects: lists are replaced whole.
    patched = co.patch_namespaced_custom_object(*args, "w1", {"spec": {"parts": ["c"], "size": None}})
    assert patched["spec"] == {"parts": ["c"]}, patched["spec"]
    status = co.patch_namespaced_custom_object_status(*args, "w1", {"status": {"phase": "Ready", "count": 3}})
    assert status["status"] == {"phase": "Ready", "count": 3} and status["metadata"]["generation"] == 3
    assert co.get_namespaced_custom_object_status(*args, "w1")["status"]["phase"] == "Ready"
    # The main endpoint ignores status when the status subresource is on.
    spec_only = co.patch_namespaced_custom_object(*args, "w1", {"status": {"phase": "Hacked"}})
    assert spec_only["status"]["phase"] == "Ready"

    co.delete_namespaced_custom_object(*args, "w1")
    expect_status(404, lambda: co.get_namespaced_custom_object(*args, "w1"), "get after delete")

    events = rec.result()
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    assert seen == [
        ("ADDED", "w1"),
        ("ADDED", "w2"),
        ("MODIFIED", "w1"),
        ("MODIFIED", "w1"),
        ("MODIFIED", "w1"),
        ("DELETED", "w1"),
    ], seen
    assert events[4]["object"]["status"] == {"phase": "Ready", "count": 3}
    assert [e["object"]["metadata"]["resourceVersion"] for e in events[2:5]] == [
        replaced["metadata"]["resourceVersion"],
        patched["metadata"]["resourceVersion"],
        status["metadata"]["resourceVersion"],
    ]


def pytorchjob(ns: str) -> None:
    co = client.CustomObjectsApi()
    args = (KF_GROUP, KF_VERSION, ns, KF_PLURAL)
    container = {"name": "pytorch", "image": "pytorch", "command": ["python", "-c", "pass"]}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pj", "labels": {"team": "ml"}},
        # Suspended: the operator records the job but starts no processes.
        "spec": {
            "runPolicy": {"suspend": True},
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": {"spec": {"containers": [container]}},
                }
            },
        },
    }
    created = co.create_namespaced_custom_object(*args, job)
    assert created["metadata"]["generation"] == 1
    bad = {**job, "metadata": {"name": "pj-bad"}, "spec": {"pytorchReplicaSpecs": {}}}
    expect_status(422, lambda: co.create_namespaced_custom_object(*args, bad), "invalid PyTorchJob")
    assert [
        j["metadata"]["name"] for j in co.list_namespaced_custom_object(*args, label_selector="team=ml")["items"]
    ] == ["pj"]
    eventually(
        lambda: any(
            c["type"] == "Suspended" and c["status"] == "True"
            for c in (co.get_namespaced_custom_object_status(*args, "pj").get("status") or {}).get("conditions", [])
        ),
        "the operator to mark the job Suspended",
    )

    def relabel() -> Any:
        got = co.get_namespaced_custom_object(*args, "pj")
        got["metadata"]["labels"]["stage"] = "replaced"
        return co.replace_namespaced_custom_object(*args, "pj", got)

    # The operator writes status concurrently; a conflict here is the client's job to retry.
    replaced = retry_conflicts(relabel)
    assert replaced["metadata"]["labels"] == {"team": "ml", "stage": "replaced"}
    patched = co.patch_namespaced_custom_object(*args, "pj", {"metadata": {"annotations": {"note": "merge"}}})
    assert patched["metadata"]["annotations"] == {"note": "merge"} and patched["spec"]["runPolicy"]["suspend"]
    co.delete_namespaced_custom_object(*args, "pj")
    eventually(lambda: not co.list_namespaced_custom_object(*args)["items"], "the job to be deleted")


def retry_conflicts(call: Callable[[], Any]) -> Any:
    for _ in range(5):
        try:
            return call()
        except ApiException as exc:
            if exc.status != 409:
                raise
    raise AssertionError("five conflicts in a row")


def crud(ns: str) -> None:
    discovery()
    namespaces(ns)
    configmaps(ns)
    services(ns)
    pods(ns)
    gizmo_crd()
    gizmos(ns)
    pytorchjob(ns)
    client.CoreV1Api().delete_namespace(ns)


# -- 410 Gone ------------------------------------------------------------------------------------


def expired(ns: str, stale_rv: str) -> None:
    """A watch from a compacted revision ends in ApiException 410; relisting and re-watching recovers."""
    v1 = client.CoreV1Api()
    w = watch.Watch()
    try:
        for event in w.stream(v1.list_namespaced_config_map, ns, resource_version=stale_rv, _request_timeout=60):
            raise AssertionError(f"a watch from a compacted revision delivered {event['type']}")
    except ApiException as exc:
        assert exc.status == 410, exc
        assert "Expired" in str(exc.reason), exc.reason
    else:
        raise AssertionError("the watch from a compacted revision ended without an error")

    listing = v1.list_namespaced_config_map(ns)
    fresh = listing.metadata.resource_version
    assert int(fresh) > int(stale_rv)
    name = f"after-410-{kubernetes.__version__.split('.')[0]}"
    rec = Recorder(
        v1.list_namespaced_config_map, ns, resource_version=fresh, until=lambda e: e["object"].metadata.name == name
    )
    made = v1.create_namespaced_config_map(ns, {"metadata": {"name": name}, "data": {"k": "v"}})
    events = rec.result()
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", name)]
    assert events[0]["object"].metadata.resource_version == made.metadata.resource_version


def main(argv: list[str]) -> None:
    kubeconfig, mode, ns, *rest = argv
    print(f"kubernetes {kubernetes.__version__} from {kubernetes.__file__}", flush=True)
    config.load_kube_config(config_file=kubeconfig)
    if mode == "crud":
        crud(ns)
    elif mode == "expired":
        expired(ns, rest[0])
    else:
        raise SystemExit(f"unknown mode {mode}")
    print("SCENARIO OK", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
