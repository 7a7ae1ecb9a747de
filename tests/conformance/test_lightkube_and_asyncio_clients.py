"""lightkube (sync and async) and kubernetes_asyncio against a real plane, in their default modes.

The defaults are where clients differ from each other: lightkube watches without listing first
(synthetic ADDEDs) and sends strategic merge patches everywhere (415 on custom resources, as on
a real server); kubernetes_asyncio sends ``watch=True`` and json-patches custom objects when
given a dict (a 400, never a 500).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import config as aconfig
from kubernetes_asyncio import watch as awatch
from lightkube import ApiError, AsyncClient, Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import ConfigMap, Namespace, Service
from lightkube.types import PatchType

from conftest import Plane, eventually, plain_and_secure

pytestmark = pytest.mark.e2e

GROUP, VERSION, PLURAL = "lightkube.trainyard.dev", "v1", "gadgets"
Gadget = create_namespaced_resource(GROUP, VERSION, "Gadget", PLURAL)
TIMEOUT = 60.0
OURS = {"pre", "live", "ssa"}


@pytest.fixture(scope="module", params=["http", "https"])
def plane(request: pytest.FixtureRequest, plane: Plane) -> Plane:
    # Every client here must work against the default (secure) plane and against `yard up --insecure`.
    return plain_and_secure(request, plane)


@pytest.fixture(scope="module")
def lk(plane: Plane) -> Iterator[Client]:
    client = Client(KubeConfig.from_file(plane.kubeconfig), field_manager="conformance")
    client.create(
        CustomResourceDefinition.from_dict(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{PLURAL}.{GROUP}"},
                "spec": {
                    "group": GROUP,
                    "scope": "Namespaced",
                    "names": {"plural": PLURAL, "singular": "gadget", "kind": "Gadget"},
                    "versions": [
                        {
                            "name": VERSION,
                            "served": True,
                            "storage": True,
                            "subresources": {"status": {}},
                            "schema": {
                                "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                            },
                        }
                    ],
                },
            }
        )
    )
    yield client
    client.close()


def namespace(lk: Client, name: str) -> str:
    lk.create(Namespace(metadata=ObjectMeta(name=name)))
    return name


def test_lightkube_sync_watch_patch_apply(lk: Client) -> None:
    ns = namespace(lk, "lightkube-sync")
    lk.create(ConfigMap(metadata=ObjectMeta(name="pre", namespace=ns), data={"k": "0"}))

    events: list[tuple[str, str, dict[str, str] | None, str]] = []
    failure: list[BaseException] = []

    def watch() -> None:
        try:
            # Default mode: no resourceVersion, so the server starts with an ADDED per existing object.
            for op, cm in lk.watch(ConfigMap, namespace=ns, server_timeout=60):
                if cm.metadata.name in OURS:  # a server may add its own (kube-root-ca.crt)
                    events.append((op, cm.metadata.name, cm.data, cm.metadata.resourceVersion))
                if op == "DELETED":
                    return
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    eventually(lambda: events, what="the synthetic ADDED of the existing ConfigMap")
    made = lk.create(ConfigMap(metadata=ObjectMeta(name="live", namespace=ns), data={"k": "1"}))
    patched = lk.patch(ConfigMap, "live", {"data": {"k": "2"}}, namespace=ns)  # strategic by default
    lk.delete(ConfigMap, "live", namespace=ns)
    thread.join(TIMEOUT)
    assert not thread.is_alive() and not failure, failure
    assert [(op, name, data) for op, name, data, _ in events] == [
        ("ADDED", "pre", {"k": "0"}),
        ("ADDED", "live", {"k": "1"}),
        ("MODIFIED", "live", {"k": "2"}),
        ("DELETED", "live", {"k": "2"}),
    ], events
    assert [rv for *_, rv in events[1:3]] == [made.metadata.resourceVersion, patched.metadata.resourceVersion]

    # Strategic merge on a built-in: Service ports merge by port.
    lk.create(
        Service.from_dict(
            {"metadata": {"name": "svc", "namespace": ns}, "spec": {"ports": [{"name": "http", "port": 80}]}}
        )
    )
    svc = lk.patch(Service, "svc", {"spec": {"ports": [{"name": "metrics", "port": 9090}]}}, namespace=ns)
    assert sorted(p.port for p in svc.spec.ports) == [80, 9090]

    # Custom resources: the default strategic patch is 415, exactly like a real API server.
    lk.create(Gadget(metadata=ObjectMeta(name="g1", namespace=ns), spec={"size": 1, "tags": ["a"]}))
    with pytest.raises(ApiError) as refused:
        lk.patch(Gadget, "g1", {"spec": {"size": 2}}, namespace=ns)
    assert refused.value.status.code == 415 and refused.value.status.reason == "UnsupportedMediaType"
    merged = lk.patch(Gadget, "g1", {"spec": {"size": 2}}, namespace=ns, patch_type=PatchType.MERGE)
    assert merged.spec == {"size": 2, "tags": ["a"]}
    status = lk.patch(Gadget.Status, "g1", {"status": {"ready": True}}, namespace=ns, patch_type=PatchType.MERGE)
    assert status.status == {"ready": True}

    # Server-side apply: create when absent, then update a label.
    applied = lk.apply(ConfigMap(metadata=ObjectMeta(name="ssa", namespace=ns, labels={"v": "1"}), data={"a": "b"}))
    assert applied.metadata.labels == {"v": "1"}
    again = lk.apply(ConfigMap(metadata=ObjectMeta(name="ssa", namespace=ns, labels={"v": "2"}), data={"a": "b"}))
    assert again.metadata.labels == {"v": "2"} and again.data == {"a": "b"}
    assert lk.get(ConfigMap, "ssa", namespace=ns).metadata.labels == {"v": "2"}

    # deletecollection honours dryRun (a query parameter here) and then really deletes.
    lk.deletecollection(ConfigMap, namespace=ns, dry_run=True)
    assert OURS & {c.metadata.name for c in lk.list(ConfigMap, namespace=ns)} == {"pre", "ssa"}
    lk.deletecollection(ConfigMap, namespace=ns)
    assert not list(lk.list(ConfigMap, namespace=ns))
    lk.delete(Namespace, ns)


def test_lightkube_async_watch_and_patch(plane: Plane, lk: Client) -> None:
    ns = namespace(lk, "lightkube-async")

    async def scenario() -> None:
        client = AsyncClient(KubeConfig.from_file(plane.kubeconfig), field_manager="conformance")
        try:
            await client.create(Gadget(metadata=ObjectMeta(name="pre", namespace=ns), spec={"n": 0}))
            seen: list[tuple[str, str, Any]] = []
            first = asyncio.Event()

            async def watch() -> None:
                async for op, gadget in client.watch(Gadget, namespace=ns):
                    seen.append((op, gadget.metadata.name, gadget.spec))
                    first.set()
                    if op == "DELETED":
                        return

            task = asyncio.create_task(watch())
            await asyncio.wait_for(first.wait(), TIMEOUT)
            await client.create(Gadget(metadata=ObjectMeta(name="g", namespace=ns), spec={"n": 1}))
            with pytest.raises(ApiError) as refused:
                await client.patch(Gadget, "g", {"spec": {"n": 2}}, namespace=ns)
            assert refused.value.status.code == 415
            await client.patch(Gadget, "g", {"spec": {"n": 2}}, namespace=ns, patch_type=PatchType.MERGE)
            await client.delete(Gadget, "g", namespace=ns)
            await asyncio.wait_for(task, TIMEOUT)
            assert seen == [
                ("ADDED", "pre", {"n": 0}),
                ("ADDED", "g", {"n": 1}),
                ("MODIFIED", "g", {"n": 2}),
                ("DELETED", "g", {"n": 2}),
            ], seen
        finally:
            await client.close()

    asyncio.run(scenario())
    lk.delete(Namespace, ns)


def test_kubernetes_asyncio_watch_and_patch(plane: Plane, lk: Client) -> None:
    ns = namespace(lk, "k8s-asyncio")
    lk.create(Gadget(metadata=ObjectMeta(name="g1", namespace=ns), spec={"size": 1}))

    async def scenario() -> None:
        async with await aconfig.new_client_from_config(config_file=str(plane.kubeconfig)) as api:
            v1 = aclient.CoreV1Api(api)
            co = aclient.CustomObjectsApi(api)
            await v1.create_namespaced_config_map(ns, {"metadata": {"name": "pre"}, "data": {"k": "0"}})
            seen: list[tuple[str, str, Any]] = []
            first = asyncio.Event()

            async def watch() -> None:
                # Sends watch=True (capital T), and no resourceVersion: synthetic ADDEDs first.
                async with awatch.Watch().stream(v1.list_namespaced_config_map, ns, timeout_seconds=60) as stream:
                    async for event in stream:
                        if event["object"].metadata.name in OURS:
                            seen.append((event["type"], event["object"].metadata.name, event["object"].data))
                        first.set()
                        if event["type"] == "DELETED":
                            return

            task = asyncio.create_task(watch())
            await asyncio.wait_for(first.wait(), TIMEOUT)
            await v1.create_namespaced_config_map(ns, {"metadata": {"name": "live"}, "data": {"k": "1"}})
            # A dict body on a built-in is a strategic merge patch.
            await v1.patch_namespaced_config_map("live", ns, {"data": {"k": "2"}})
            await v1.delete_namespaced_config_map("live", ns)
            await asyncio.wait_for(task, TIMEOUT)
            assert seen == [
                ("ADDED", "pre", {"k": "0"}),
                ("ADDED", "live", {"k": "1"}),
                ("MODIFIED", "live", {"k": "2"}),
                ("DELETED", "live", {"k": "2"}),
            ], seen

            # A dict body here goes out as application/json-patch+json (a client bug): 400, not 500.
            with pytest.raises(aclient.ApiException) as refused:
                await co.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "g1", {"spec": {"size": 2}})
            assert refused.value.status == 400, refused.value.body
            assert '"reason":"BadRequest"' in refused.value.body.replace(" ", "")
            patched = await co.patch_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, "g1", {"spec": {"size": 2}}, _content_type="application/merge-patch+json"
            )
            assert patched["spec"] == {"size": 2}

    asyncio.run(scenario())
    lk.delete(Namespace, ns)
