"""Service-account tokens for projected volumes, asked of the API server as the kubelet does."""

from __future__ import annotations

from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import ServiceAccount

from trainyard.client import is_status
from trainyard.cluster.node.podenv import token_requests

Obj = dict[str, Any]


async def request_token(client: AsyncClient, pod: Obj, audience: str, seconds: int) -> str | None:
    """A TokenRequest bound to the pod (its service account, ``audience``, ``seconds``); None: no such account."""
    m = pod["metadata"]
    spec: Obj = {
        "expirationSeconds": seconds,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": m["name"], "uid": m.get("uid")},
    }
    if audience:  # none: the API server's own audience
        spec["audiences"] = [audience]
    account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
    body = ServiceAccount.Token.from_dict(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {}, "spec": spec}
    )
    try:
        answer: Any = await client.create(body, account, namespace=m["namespace"])
    except ApiError as exc:
        if not is_status(exc, 404):
            raise
        return None
    return str(answer.status.token)


async def for_pod(client: AsyncClient, pod: Obj) -> dict[tuple[str, int], str | None]:
    """Every token the pod's projected volumes need, by ``podenv.token_key``."""
    return {key: await request_token(client, pod, *key) for key in token_requests(pod)}
