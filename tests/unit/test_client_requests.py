"""``trainyard.client``'s shortcuts around lightkube and httpx: each must send exactly what they would.

``UrlMemo`` keeps the URLs httpx built; ``plain_twin`` decodes a resource's objects as plain
dicts. Both are checked against the unshortened path on real httpx and lightkube objects.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
from lightkube import KubeConfig
from lightkube.core.generic_client import WatchDriver
from lightkube.resources.core_v1 import Node, Pod, PodStatus

from trainyard.client import Client, UrlMemo, plain_twin, to_dict
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
