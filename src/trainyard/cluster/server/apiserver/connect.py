"""The "connect" subresources, which the embedded plane does not serve, and what it answers.

On a real cluster ``pods/exec``, ``pods/attach`` and ``pods/portforward`` upgrade the connection
(WebSocket or SPDY) and stream to the container runtime through the kubelet, and the ``proxy``
subresources of pods, services and nodes forward HTTP to them. Here a pod is a process group on
this machine and there is no kubelet, so there is nothing to stream from: each request gets a
400 ``Status`` that says what to do instead, and kubectl prints it and exits at once
(``Error from server (BadRequest): ...``). A streaming request without upgrade headers gets the
apiserver's own answer, ``Upgrade request required``. Discovery does not list these
subresources, because nothing could be done with them; kubectl does not consult it for them.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainyard.cluster.server.apiserver import errors

STREAMING = frozenset({"exec", "attach", "portforward"})

_LOCAL = "the trainyard embedded control plane runs pods as local processes, not in containers"

WHY: dict[tuple[str, str], str] = {
    ("core/pods", "exec"): (
        "run the command in a shell on this machine instead: the pod's working directory and logs are "
        "under $TRAINYARD_HOME/pods/"
    ),
    ("core/pods", "attach"): "follow its output with `kubectl logs -f` instead",
    ("core/pods", "portforward"): "its ports listen on this machine (pod IP 127.0.0.1): connect to 127.0.0.1:<port>",
    ("core/pods", "proxy"): "its ports listen on this machine (pod IP 127.0.0.1): send the request to 127.0.0.1:<port>",
    ("core/services", "proxy"): (
        "services resolve to this machine (127.0.0.1): send the request to 127.0.0.1:<port> of a pod behind it"
    ),
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


def _is_upgrade(headers: Mapping[str, str]) -> bool:
    return "upgrade" in headers.get("Connection", "").lower() and bool(headers.get("Upgrade"))


def refusal(resource_key: str, plural: str, subresource: str, headers: Mapping[str, str]) -> errors.ApiError:
    """What a connect request on an object that exists gets."""
    if subresource in STREAMING and not _is_upgrade(headers):
        return errors.bad_request("Upgrade request required")
    return errors.bad_request(f"{plural}/{subresource} is not supported: {_LOCAL}; {WHY[(resource_key, subresource)]}")
