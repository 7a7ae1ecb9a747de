"""The "connect" subresources: which the embedded plane serves, and what it answers for the others.

On a real cluster ``pods/exec``, ``pods/attach`` and ``pods/portforward`` upgrade the connection
(WebSocket or SPDY) and stream to the container runtime through the kubelet, and the ``proxy``
subresources of pods, services and nodes forward HTTP to them. Here ``pods/exec`` and
``pods/attach`` over WebSocket (kubectl 1.30 and later, the ``kubernetes`` Python client) and
SPDY/3.1 (kubectl's fallback, older clients) are served by ``remotecommand``; an upgrade to
anything else is refused with a 400 that says so. ``pods/portforward`` is served by ``tunnels``
(SPDY/3.1 tunnelled in a WebSocket, plain SPDY/3.1, and ``v4.channel.k8s.io``): a pod shares this
machine's network, so its port is dialled here, as it is for ``pods/proxy`` and ``services/proxy``
(``tunnels.proxying``). ``nodes/proxy`` (there is no kubelet) gets a 400 ``Status`` that says what
to do instead, and kubectl prints it and exits at once (``Error from server (BadRequest): ...``). A
streaming request without upgrade headers gets the apiserver's own answer, ``Upgrade request
required``. Discovery lists those served (``discovery.CONNECT``), as kube-apiserver does.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainyard.cluster.server.apiserver import errors

STREAMING = frozenset({"exec", "attach", "portforward"})

_LOCAL = "the trainyard embedded control plane runs pods as local processes, not in containers"
_WEBSOCKET_ONLY = "it is served over WebSocket and SPDY/3.1 only"

WHY: dict[tuple[str, str], str] = {
    ("core/pods", "exec"): _WEBSOCKET_ONLY,
    ("core/pods", "attach"): _WEBSOCKET_ONLY,
    ("core/pods", "portforward"): "served by tunnels.portforward once the connection is upgraded",
    ("core/pods", "proxy"): "served by tunnels.proxying",
    ("core/services", "proxy"): "served by tunnels.proxying",
    ("core/nodes", "proxy"): "there is no kubelet to proxy to: the node is this machine",
}


def served(resource_key: str, subresource: str) -> bool:
    """Whether ``subresource`` is one of the connect subresources this module answers for."""
    return (resource_key, subresource) in WHY


def object_name(subresource: str, name: str) -> str:
    """The object's name in a URL segment; proxy URLs may say ``[scheme:]name[:port]``."""
    if subresource != "proxy" or ":" not in name:
        return name
    parts = name.split(":")
    if len(parts) == 3 or parts[0] in ("http", "https"):
        return parts[1]
    return parts[0]


def is_upgrade(headers: Mapping[str, str]) -> bool:
    return "upgrade" in headers.get("Connection", "").lower() and bool(headers.get("Upgrade"))


def refusal(resource_key: str, plural: str, subresource: str, headers: Mapping[str, str]) -> errors.ApiError:
    """What a connect request on an object that exists gets."""
    if subresource in STREAMING and not is_upgrade(headers):
        return errors.bad_request("Upgrade request required")
    why = WHY[(resource_key, subresource)]
    if why is _WEBSOCKET_ONLY:
        return errors.bad_request(f"{plural}/{subresource} over {headers.get('Upgrade')} is not supported: {why}")
    return errors.bad_request(f"{plural}/{subresource} is not supported: {_LOCAL}; {why}")
