"""``trainyard.client``'s shortcuts around lightkube and httpx: each must send exactly what they would.

``UrlMemo`` keeps the URLs httpx built; ``plain_twin`` decodes a resource's objects as plain
dicts; ``Client.direct`` hands requests to a server in this process without httpx. Each is
checked against the unshortened path on real httpx and lightkube objects (httpx's
``MockTransport`` stands in for the network, which these tests do not need).
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import httpx2
import pytest
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.core.generic_client import GenericAsyncClient, WatchDriver
from lightkube.resources.core_v1 import ConfigMap, Node, Pod, PodStatus
from lightkube.types import OnErrorAction, OnErrorResult, PatchType

from trainyard.client.resources import plain_twin, to_dict
from trainyard.client.transport import Answer, Call, Client, UrlMemo, delete, route_directly, wrap_transports
from trainyard.embedded import kubeconfig

CALLS: list[tuple[str, str, dict[str, Any] | None, bytes | None]] = [
    ("POST", "/api/v1/namespaces/ns/events", {"fieldManager": "yard"}, b'{"a":1}'),
    ("PATCH", "/api/v1/namespaces/ns/pods/p-0/status", {"fieldManager": "yard", "force": True}, b"{}"),
    ("GET", "/api/v1/pods", {"labelSelector": "a in (b,c)", "watch": "true", "resourceVersion": ""}, None),
    ("GET", "/apis/kubeflow.org/v1/namespaces/ns/pytorchjobs/a b", None, None),
]


def sent(request: httpx2.Request) -> tuple[str, str, list[tuple[str, str]], bytes]:
    return request.method, str(request.url), sorted(request.headers.multi_items()), request.read()


def test_memoised_urls_build_the_requests_httpx_builds_and_reuse_them() -> None:
    http = httpx2.AsyncClient(base_url="https://127.0.0.1:6443/prefix", headers={"Authorization": "Bearer t"})
    given: list[Any] = []

    def build(method: str, url: Any, **kwargs: Any) -> httpx2.Request:
        given.append(url)
        return http.build_request(method, url, **kwargs)

    memo = UrlMemo(build, lambda: bool(http.params))
    for round_ in range(2):
        for method, url, params, body in CALLS:
            headers = {"Content-Type": "application/json"} if body else None
            mine = memo(method, url, params=dict(params) if params else None, content=body, headers=headers)
            theirs = http.build_request(method, url, params=params, content=body, headers=headers)
            assert sent(mine) == sent(theirs), (round_, url)
    # the first round hands httpx the relative URLs, the second the URLs it built then
    assert all(isinstance(url, str) for url in given[: len(CALLS)])
    assert all(isinstance(url, httpx2.URL) for url in given[len(CALLS) :])


def test_a_client_with_query_parameters_of_its_own_is_left_to_httpx() -> None:
    http = httpx2.AsyncClient(base_url="https://h:1", params={"pretty": "true"})
    memo = UrlMemo(http.build_request, lambda: bool(http.params))
    for _ in range(2):
        request = memo("GET", "/api/v1/pods", params={"limit": 5})
        assert str(request.url) == "https://h:1/api/v1/pods?pretty=true&limit=5"


def test_every_lightkube_client_of_ours_memoises_its_urls() -> None:
    config = KubeConfig.from_dict(kubeconfig("https://127.0.0.1:6443", None))
    client = Client(config, field_manager="test")
    assert isinstance(client._client._client.build_request, UrlMemo)


def test_a_plain_twin_reaches_the_same_urls_and_decodes_plain_dicts() -> None:
    config = KubeConfig.from_dict(kubeconfig("https://127.0.0.1:6443", None))
    adapter: Any = Client(config, field_manager="test")._client
    for res, namespace in ((Pod, "ns"), (Pod, "*"), (Node, None)):
        for verb in ("list", "watch"):
            ours = adapter.prepare_request(verb, res=plain_twin(res), namespace=namespace, watch=verb == "watch")
            theirs = adapter.prepare_request(verb, res=res, namespace=namespace, watch=verb == "watch")
            assert (ours.method, ours.url, ours.params) == (theirs.method, theirs.url, theirs.params)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7"}}
    line = json.dumps({"type": "MODIFIED", "object": pod}).encode()
    driver = WatchDriver(adapter.prepare_request("watch", res=plain_twin(Pod), namespace="ns", watch=True), None)
    kind, obj = driver.process_one_line(line)
    assert (kind, type(to_dict(obj)), to_dict(obj)) == ("MODIFIED", dict, pod)
    assert obj.metadata.resourceVersion == "7" and obj.metadata.generateName is None
    # a subresource, a plain class or anything else is its own twin
    assert plain_twin(PodStatus) is PodStatus and plain_twin(plain_twin(Pod)) is plain_twin(Pod)


def test_a_request_sent_in_process_carries_what_httpx_would_send() -> None:
    """The same lightkube calls, once through httpx and once through ``Client.direct``: the server gets
    the same method, path, query, headers and body, and the caller the same answer and errors."""
    raw: Any = kubeconfig("https://127.0.0.1:6443/prefix", None)
    raw["users"][0]["user"]["token"] = "the-token"
    config = KubeConfig.from_dict(raw)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}, "data": {"k": "v"}}
    missing = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}

    def answer(method: str, path: str) -> tuple[int, bytes]:
        if "/gone" in path:
            return 404, json.dumps(missing).encode()
        return 200, json.dumps(cm).encode()

    over_http: list[tuple[Any, ...]] = []
    in_process: list[tuple[Any, ...]] = []

    def network(request: httpx2.Request) -> httpx2.Response:
        query = [(k, v) for k, v in request.url.params.multi_items()]
        headers = sorted((k.lower(), v) for k, v in request.headers.multi_items() if k.lower() != "content-length")
        over_http.append((request.method, request.url.path, query, headers, request.read()))
        status, body = answer(request.method, request.url.path)
        return httpx2.Response(status, headers={"Content-Type": "application/json"}, content=body)

    async def direct(call: Call) -> Answer:
        headers = sorted((k.lower(), v) for k, v in call.headers)
        in_process.append((call.method, call.path, list(call.query), headers, call.body))
        status, body = answer(call.method, call.path)
        return Answer(status, [("Content-Type", "application/json")], body)

    async def calls(client: Client) -> list[Any]:
        got: list[Any] = [to_dict(await client.create(ConfigMap.from_dict(cm)))]
        got.append(to_dict(await client.patch(ConfigMap, "c", {"data": {"k": "w"}}, namespace="ns")))
        patch = {"status": {"phase": "Running"}}
        got.append(to_dict(await client.patch(PodStatus, "p", patch, namespace="ns", patch_type=PatchType.MERGE)))
        got.append(to_dict(await client.apply(ConfigMap.from_dict(cm), field_manager="other", force=True)))
        got.append(to_dict(await client.get(Node, "n")))
        got.append(await delete(client, ConfigMap, "c", namespace="ns", uid="u-1", grace_period=0))
        for name in ("gone", "gone-ü"):  # an error about a name that is not ASCII is the server's too
            with pytest.raises(ApiError) as gone:
                await client.get(ConfigMap, name, namespace="ns")
            got.append((gone.value.status.code, gone.value.status.reason))
        return got

    async def main() -> tuple[list[Any], list[Any]]:
        mock = httpx2.MockTransport(network)
        http_client = wrap_transports(Client(config, field_manager="yard"), lambda _: mock, watches=True)
        local = route_directly(Client(config, field_manager="yard"), direct)
        try:
            assert isinstance(http_client, Client) and isinstance(local, Client)
            return await calls(http_client), await calls(local)
        finally:
            await http_client.close()
            await local.close()

    via_http, via_call = asyncio.run(main())
    assert via_call == via_http
    assert in_process == over_http
    assert len(in_process) == 8
    assert in_process[3][2] == [("force", "true"), ("fieldManager", "other")]  # a boolean as httpx writes it
    assert ("authorization", "Bearer the-token") in in_process[0][3]
    assert in_process[0][1] == "/prefix/api/v1/namespaces/ns/configmaps"


def test_only_our_client_sends_in_process() -> None:
    plain = AsyncClient(KubeConfig.from_dict(kubeconfig("https://127.0.0.1:6443", None)))

    async def nothing(call: Call) -> Answer:
        raise AssertionError("not reached")

    with pytest.raises(TypeError, match=r"trainyard\.client\.transport\.Client"):
        route_directly(plain, nothing)
    asyncio.run(plain.close())


def test_our_watch_reads_what_lightkubes_reads_and_resumes_the_same_way() -> None:
    """A watch stream split mid-line and mid-``\\r\\n``, ended, resumed from its last version, then
    expired (410): our byte-line reader and lightkube's own loop send the same requests and yield
    the same events."""
    config = KubeConfig.from_dict(kubeconfig("https://127.0.0.1:6443", None))

    def event(kind: str, rv: str) -> dict[str, Any]:
        return {
            "type": kind,
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "é", "resourceVersion": rv}},
        }

    lines = (json.dumps(event(k, rv), ensure_ascii=False).encode() for k, rv in (("ADDED", "5"), ("MODIFIED", "6")))
    first = b"".join(line + b"\r\n" for line in lines)
    gone = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410}}

    async def chunks(data: bytes) -> Any:
        for i in range(0, len(data), 7):  # lines, multibyte characters and \r\n split across chunks
            yield data[i : i + 7]

    def run(ours: bool) -> tuple[list[Any], list[list[tuple[str, str]]]]:
        asked: list[list[tuple[str, str]]] = []

        def network(request: httpx2.Request) -> httpx2.Response:
            asked.append(sorted(request.url.params.multi_items()))
            body = first if len(asked) == 1 else json.dumps(gone).encode() + b"\n"
            return httpx2.Response(200, headers={"Content-Type": "application/json"}, content=chunks(body))

        def stop_on_expiry(exc: Exception, count: int) -> OnErrorResult:
            return OnErrorResult(OnErrorAction.STOP)

        async def main() -> list[Any]:
            client = wrap_transports(Client(config), lambda _: httpx2.MockTransport(network), watches=True)
            assert isinstance(client, Client)
            if not ours:
                adapter = client.watches._client
                adapter.watch = functools.partial(GenericAsyncClient.watch, adapter)  # type: ignore[method-assign]
            try:
                watch = client.watch(plain_twin(Pod), namespace="ns", resource_version="4", on_error=stop_on_expiry)
                return [(kind, to_dict(obj)) async for kind, obj in watch]
            finally:
                await client.close()

        return asyncio.run(main()), asked

    ours, lightkubes = run(True), run(False)
    assert ours == lightkubes
    events, asked = ours
    assert events == [(e["type"], e["object"]) for e in (event("ADDED", "5"), event("MODIFIED", "6"))]
    assert [dict(q)["resourceVersion"] for q in asked] == ["4", "6"]
