"""kopf 1.45 runs a small operator against a real plane, as a real ``kopf run`` subprocess.

The operator (written into a temp dir by the test) uses every kopf feature that leans on API
semantics: finalizers through json-patch with a resourceVersion test, merge patches of the body
and of ``/status``, the resourceVersion echo kopf waits for (the "consistency" of reference
§0 #6), list-then-watch, timers, adoption (ownerReferences) and the garbage collection it implies.
Everything is asserted by polling the API.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from conftest import REPO, Kubectl, Plane, eventually, plain_and_secure

pytestmark = pytest.mark.e2e

GROUP, VERSION, PLURAL = "kopf.trainyard.dev", "v1", "pets"
NS = "kopf-conformance"

OPERATOR = f"""
import kopf
import kubernetes

GROUP, VERSION, PLURAL = {GROUP!r}, {VERSION!r}, {PLURAL!r}


@kopf.on.startup()
def configure(settings, **_):
    kubernetes.config.load_kube_config()
    # Surface a missed resourceVersion echo as a visible stall instead of kopf's silent wait.
    settings.persistence.consistency_timeout = 5.0
    # A tick in flight when the pet is deleted keeps its finalizer until kopf sees the timer exit;
    # kopf looks again only every cancellation_polling seconds (60 by default, kubectl's whole wait).
    settings.background.cancellation_polling = 1.0


@kopf.on.create(GROUP, VERSION, PLURAL)
def create_fn(name, namespace, spec, body, patch, **_):
    child = {{"metadata": {{"name": f"{{name}}-child"}}, "data": {{"size": str(spec.get("size"))}}}}
    kopf.adopt(child, owner=body)
    kubernetes.client.CoreV1Api().create_namespaced_config_map(namespace, child)
    patch.status["phase"] = "Created"
    kopf.info(body, reason="ChildCreated", message=f"created ConfigMap {{child['metadata']['name']}}")
    return {{"child": child["metadata"]["name"]}}


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec.size")
def update_fn(new, patch, **_):
    patch.status["seenSize"] = new


@kopf.on.delete(GROUP, VERSION, PLURAL)
def delete_fn(name, namespace, **_):
    # Idempotent, as kopf asks of handlers: one that succeeded while a timer was still exiting is
    # invoked again (its success is recorded only with the finalizer's removal).
    try:
        kubernetes.client.CoreV1Api().create_namespaced_config_map(
            namespace, {{"metadata": {{"name": f"{{name}}-farewell"}}}}
        )
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise


@kopf.timer(GROUP, VERSION, PLURAL, interval=1.0)
def tick(status, patch, **_):
    patch.status["ticks"] = (status.get("ticks") or 0) + 1
"""


def crd() -> dict[str, Any]:
    return {
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "pet", "kind": "Pet"},
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


@pytest.fixture(scope="module", params=["http", "https"])
def plane(request: pytest.FixtureRequest, plane: Plane) -> Plane:
    # Every client here must work against the default plane and against `yard up --secure`.
    return plain_and_secure(request, plane)


@pytest.fixture
def api(plane: Plane) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(config_file=str(plane.kubeconfig)) as api_client:
        client.ApiextensionsV1Api(api_client).create_custom_resource_definition(crd())
        client.CoreV1Api(api_client).create_namespace({"metadata": {"name": NS}})
        yield api_client


@pytest.fixture
def kopf_run(plane: Plane, tmp_path: Path) -> Iterator[Path]:
    """``kopf run --standalone -n NS op.py``; yields its log file, stops it with SIGTERM."""
    op = tmp_path / "op.py"
    op.write_text(textwrap.dedent(OPERATOR))
    log = tmp_path / "kopf.log"
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "--standalone", "--verbose", "-n", NS, str(op)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=REPO,
        )
    try:
        yield log
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"kopf did not stop on SIGTERM:\n{log.read_text()[-4000:]}") from None
        assert rc == 0, f"kopf exited with {rc}:\n{log.read_text()[-4000:]}"


def test_kopf_operator_lifecycle(api: client.ApiClient, kopf_run: Path, plane: Plane, tmp_path: Path) -> None:
    kubectl = Kubectl(plane, tmp_path / "kube-cache")
    co = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    args = (GROUP, VERSION, NS, PLURAL)
    log = kopf_run

    def kopf_log() -> str:
        return log.read_text(errors="replace")

    eventually(lambda: "Starting the watch-stream for pets" in kopf_log(), what="kopf to watch pets")
    co.create_namespaced_custom_object(
        *args, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Pet", "metadata": {"name": "rex"}, "spec": {"size": 1}}
    )

    def pet() -> dict[str, Any]:
        return dict(co.get_namespaced_custom_object(*args, "rex"))

    # on.create: the child is adopted, the return value and the explicit patch land in status.
    child = eventually(lambda: _read_or_none(core, "rex-child"), what="the child ConfigMap")
    owner = child.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid) == ("Pet", "rex", pet()["metadata"]["uid"])
    assert owner.controller and owner.block_owner_deletion
    assert child.data == {"size": "1"}
    status = eventually(lambda: (s := pet().get("status") or {}).get("create_fn") and s, what="create_fn's result")
    assert status["create_fn"] == {"child": "rex-child"} and status["phase"] == "Created"
    assert "kopf.zalando.org/KopfFinalizerMarker" in pet()["metadata"]["finalizers"]

    # The timer keeps ticking: status.ticks advances through merge patches of /status.
    first = eventually(lambda: pet()["status"].get("ticks"), what="a first tick")
    eventually(lambda: pet()["status"].get("ticks", 0) >= first + 2, what="the ticks to advance", timeout=30)

    # on.update is handled promptly: a missed RV echo would stall kopf 5 s (consistency_timeout).
    for size in (2, 3):
        started = time.monotonic()
        co.patch_namespaced_custom_object(*args, "rex", {"spec": {"size": size}})
        eventually(lambda s=size: pet()["status"].get("seenSize") == s, what=f"update_fn to see size {size}")
        elapsed = time.monotonic() - started
        assert elapsed < 3.0, f"update handled after {elapsed:.1f}s (kopf waited for consistency):\n{kopf_log()}"

    # `kubectl delete` waits (watching for DELETED) while kopf's finalizer holds the object; the
    # delete handler has run by the time it returns, and the object is gone.
    assert f'pet.{GROUP} "rex" deleted' in kubectl("delete", "pet", "rex", "-n", NS, "--timeout=60s")
    assert _read_or_none(core, "rex-farewell") is not None
    assert not co.list_namespaced_custom_object(*args)["items"]
    eventually(lambda: _read_or_none(core, "rex-child") is None, what="garbage collection of the child")

    # kopf.info() posted a core/v1 Event (generateName, client-side timestamps) about the pet.
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=rex,reason=ChildCreated").items
    assert [e.message for e in events] == ["created ConfigMap rex-child"], events
    assert events[0].involved_object.kind == "Pet" and events[0].metadata.name.startswith("kopf-event-")

    output = kopf_log()
    assert "Handler 'create_fn' succeeded." in output
    assert "Handler 'update_fn/spec.size' succeeded." in output
    assert "Handler 'delete_fn' succeeded." in output
    assert "Removing the finalizer" in output
    for bad in ("inconsistencies", "Multidimensional multitasker has failed", "Traceback", "has failed", "Expired"):
        assert bad not in output, f"kopf logged {bad!r}:\n{output}"
    assert not re.search(r"\[(ERROR|CRITICAL) *\]", output), output


def _read_or_none(core: client.CoreV1Api, name: str) -> client.V1ConfigMap | None:
    try:
        return core.read_namespaced_config_map(name, NS)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
