"""``kubectl delete`` against the embedded plane: cascading through ownerReferences (background,
foreground, orphan), finalizers, ``--wait`` and ``--wait=false``, ``wait --for=delete``,
selections (``-l``, ``--all``), graceful pod deletion and namespace teardown.

Only the real ``kubectl`` is driven; every assertion reads what it printed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubectl_helpers import (
    SLEEPER,
    Streamer,
    configmap,
    create,
    ensure_widget_crd,
    namespace,
    new_namespace,
    pod,
    table,
    wait_running,
    widget,
)

from conftest import Kubectl, eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    yield from namespace(kubectl, "delete")


def owned_family(kubectl: Kubectl, ns: str, owner: str, *, finalizer: str | None = None) -> None:
    """A Widget ``owner`` with two ConfigMap dependents that name it in their ownerReferences."""
    create(kubectl, widget(owner, ns, size=1))
    uid = kubectl("get", "widget", owner, "-n", ns, "-o", "jsonpath={.metadata.uid}")
    ref = {"apiVersion": "example.com/v1", "kind": "Widget", "name": owner, "uid": uid, "blockOwnerDeletion": True}
    for i in (1, 2):
        extra: dict[str, Any] = {"ownerReferences": [ref], "labels": {"owner": owner}}
        if finalizer:
            extra["finalizers"] = [finalizer]
        create(kubectl, configmap(f"{owner}-dep{i}", ns, {"i": str(i)}, **extra))


def dependents(kubectl: Kubectl, ns: str, owner: str) -> dict[str, dict[str, Any]]:
    items = kubectl.json("get", "configmaps", "-n", ns, "-l", f"owner={owner}")["items"]
    return {i["metadata"]["name"]: i["metadata"] for i in items}


def test_background_cascade_is_the_default(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)
    owned_family(kubectl, ns, "bg")
    assert kubectl("delete", "widget", "bg", "-n", ns).strip() == 'widget.example.com "bg" deleted'
    assert kubectl.run("get", "widget", "bg", "-n", ns).returncode == 1
    eventually(lambda: not dependents(kubectl, ns, "bg"), timeout=30, what="the dependents to be collected")


def test_foreground_cascade_deletes_dependents_before_the_owner(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)
    owned_family(kubectl, ns, "fg")
    out = kubectl("delete", "widget", "fg", "-n", ns, "--cascade=foreground")
    assert out.strip() == 'widget.example.com "fg" deleted'
    # kubectl waited for the owner, which goes only after its dependents.
    assert dependents(kubectl, ns, "fg") == {}

    # A dependent held by a finalizer keeps its owner in foreground deletion.
    owned_family(kubectl, ns, "held", finalizer="example.com/hold")
    kubectl("delete", "widget", "held", "-n", ns, "--cascade=foreground", "--wait=false")
    owner = kubectl.json("get", "widget", "held", "-n", ns)["metadata"]
    assert owner["deletionTimestamp"] and owner["finalizers"] == ["foregroundDeletion"]
    deps = eventually(
        lambda: (d := dependents(kubectl, ns, "held")) and all(m.get("deletionTimestamp") for m in d.values()) and d,
        timeout=30,
        what="the dependents to be marked for deletion",
    )
    assert sorted(deps) == ["held-dep1", "held-dep2"]
    for name in deps:
        kubectl("patch", "configmap", name, "-n", ns, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    eventually(
        lambda: kubectl.run("get", "widget", "held", "-n", ns).returncode == 1,
        timeout=30,
        what="the owner to go once its dependents are gone",
    )
    assert dependents(kubectl, ns, "held") == {}


def test_orphan_cascade_keeps_dependents_and_strips_their_owner_references(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)
    owned_family(kubectl, ns, "orph")
    out = kubectl("delete", "widget", "orph", "-n", ns, "--cascade=orphan")
    assert out.strip() == 'widget.example.com "orph" deleted'
    assert kubectl.run("get", "widget", "orph", "-n", ns).returncode == 1
    deps = dependents(kubectl, ns, "orph")
    assert sorted(deps) == ["orph-dep1", "orph-dep2"]
    assert all("ownerReferences" not in m and not m.get("deletionTimestamp") for m in deps.values()), deps


def test_finalizer_holds_an_object_until_removed(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)
    held = widget("held", ns, size=1)
    held["metadata"]["finalizers"] = ["example.com/keep", "example.com/other"]
    create(kubectl, held)

    out = kubectl("delete", "widget", "held", "-n", ns, "--wait=false")
    assert out.strip() == 'widget.example.com "held" deleted'
    meta = kubectl.json("get", "widget", "held", "-n", ns)["metadata"]
    assert meta["deletionTimestamp"] and meta["finalizers"] == ["example.com/keep", "example.com/other"]

    deleter = Streamer(kubectl, "delete", "widget", "held", "-n", ns, "--timeout=60s")
    waiter = Streamer(kubectl, "wait", "--for=delete", "widget/held", "-n", ns, "--timeout=60s")
    try:
        deleter.wait_for(lambda lines: 'widget.example.com "held" deleted' in lines, what="the delete to be issued")
        # Neither returns while a finalizer remains: remove one with a JSON patch...
        remove_first = '[{"op":"remove","path":"/metadata/finalizers/0"}]'
        kubectl("patch", "widget", "held", "-n", ns, "--type=json", "-p", remove_first)
        meta = kubectl.json("get", "widget", "held", "-n", ns)["metadata"]
        assert meta["finalizers"] == ["example.com/other"]
        add_one = '{"metadata":{"finalizers":["a/b","example.com/other"]}}'
        adding = kubectl.run("patch", "widget", "held", "-n", ns, "--type=merge", "-p", add_one)
        assert adding.returncode == 1
        assert (
            'The Widget "held" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the '
            'object is being deleted, found new finalizers []string{"a/b"}' in adding.stderr
        )
        assert deleter.running() and waiter.running()
        # ...and the last one with a merge patch: the object goes, and both commands return.
        kubectl("patch", "widget", "held", "-n", ns, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
        assert deleter.wait_exit(60) == 0
        assert waiter.wait_exit(60) == 0
        assert waiter.lines == ["widget.example.com/held condition met"]
    finally:
        deleter.stop()
        waiter.stop()
    missing = kubectl.run("get", "widget", "held", "-n", ns)
    assert 'widgets.example.com "held" not found' in missing.stderr


def test_delete_by_label_and_all(kubectl: Kubectl, ns: str) -> None:
    for name, tier in (("a", "fe"), ("b", "fe"), ("c", "be"), ("d", "be")):
        create(kubectl, configmap(name, ns, labels={"tier": tier}))
    dry = kubectl("delete", "configmaps", "-n", ns, "-l", "tier=fe", "--dry-run=server")
    assert sorted(dry.splitlines()) == [
        'configmap "a" deleted (server dry run)',
        'configmap "b" deleted (server dry run)',
    ]
    assert len(kubectl("get", "configmaps", "-n", ns, "-o", "name").split()) == 4
    out = kubectl("delete", "configmaps", "-n", ns, "-l", "tier=fe")
    assert sorted(out.splitlines()) == ['configmap "a" deleted', 'configmap "b" deleted']
    assert kubectl("get", "configmaps", "-n", ns, "-o", "name").split() == ["configmap/c", "configmap/d"]
    out = kubectl("delete", "configmaps", "-n", ns, "--all")
    assert sorted(out.splitlines()) == ['configmap "c" deleted', 'configmap "d" deleted']
    empty = kubectl.run("get", "configmaps", "-n", ns)
    assert empty.stdout == "" and f"No resources found in {ns} namespace." in empty.stderr
    nothing = kubectl.run("delete", "configmaps", "-n", ns, "-l", "tier=fe")
    assert (nothing.returncode, nothing.stdout) == (0, "No resources found\n")


def test_deleting_a_running_pod_is_graceful(kubectl: Kubectl, ns: str) -> None:
    # SIGTERM is ignored, so the node must wait out the grace period and then kill.
    stubborn = (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\ntime.sleep(600)"
    )
    create(kubectl, pod("stubborn", ns, stubborn, terminationGracePeriodSeconds=2))
    create(kubectl, pod("quick", ns, SLEEPER))
    wait_running(kubectl, ns, "stubborn")
    wait_running(kubectl, ns, "quick")

    out = kubectl("delete", "pod", "stubborn", "-n", ns, "--wait=false")
    assert out.strip() == 'pod "stubborn" deleted'
    rows = {r["NAME"]: r for r in table(kubectl("get", "pods", "-n", ns))}
    assert rows["stubborn"]["STATUS"] == "Terminating"
    meta = kubectl.json("get", "pod", "stubborn", "-n", ns)["metadata"]
    assert meta["deletionTimestamp"] and meta["deletionGracePeriodSeconds"] == 2
    eventually(
        lambda: kubectl.run("get", "pod", "stubborn", "-n", ns).returncode == 1,
        timeout=30,
        what="the node to kill the pod after its grace period",
    )

    # The default --wait returns only once the node has stopped the pod and it is gone.
    assert kubectl("delete", "pod", "quick", "-n", ns).strip() == 'pod "quick" deleted'
    assert kubectl.run("get", "pod", "quick", "-n", ns).returncode == 1


def test_deleting_a_namespace_removes_its_contents(kubectl: Kubectl) -> None:
    doomed = new_namespace(kubectl, "doomed")
    create(kubectl, configmap("cfg", doomed))
    create(kubectl, pod("runner", doomed, SLEEPER))
    wait_running(kubectl, doomed, "runner")
    assert kubectl("delete", "namespace", doomed).strip() == f'namespace "{doomed}" deleted'
    assert kubectl.run("get", "namespace", doomed).returncode == 1
    leftovers = json.loads(
        kubectl("get", "pods,configmaps", "-A", "-o", "json", "--field-selector", f"metadata.namespace={doomed}")
    )
    assert leftovers["items"] == []
