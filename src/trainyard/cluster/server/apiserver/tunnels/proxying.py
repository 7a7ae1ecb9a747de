"""``pods/proxy`` and ``services/proxy``: HTTP to a pod's port through the API server.

``kubectl get --raw /api/v1/namespaces/NS/services/[SCHEME:]NAME[:PORT]/proxy/PATH`` (and the same
for ``pods``) is forwarded to the pod as kube-apiserver forwards it: the method, query, headers
and body go on (without the caller's ``Authorization``, which was for the API server), with
``X-Forwarded-Uri``, ``X-Forwarded-Host`` and ``X-Forwarded-Proto`` added and a same-host
``Location`` rewritten under the proxy path; the answer comes back as it is, streamed.

Where it goes (``backend``, pure), as kube-apiserver's ``ResourceLocation``s decide:

- a pod: ``PORT`` as given, else its first container port, at its pod IP (the node's address
  here: kube-apiserver refuses loopback addresses, but here every pod is on this machine);
- a service: ``PORT`` names a service port (a number is mapped to its port's name), then the
  first ready pod the selector picks, at the port that service port targets (a number, or a
  container port's name). With no such pod: 503 ``no endpoints available for service "NAME"``,
  as with empty Endpoints.

Failures to connect are 503s worded as upstream's proxy transport words them (``error trying to
reach service: dial tcp ...``). HTML links in answers are not rewritten (upstream rewrites them).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from aiohttp import web

from trainyard.cluster.server.apiserver import errors

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding"}
    | {"upgrade", "host", "authorization", "content-length"}
)
"""Headers that stay on their own hop (and the caller's credentials for the API server)."""
CHUNK = 64 * 1024


@dataclass(frozen=True)
class Backend:
    scheme: str
    host: str
    port: int | None


def split_name(segment: str) -> tuple[str, str, str]:
    """``[scheme:]name[:port]`` as kube-apiserver's ``SplitSchemeNamePort``: (scheme, name, port)."""
    parts = segment.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3 and parts[0] in ("http", "https", ""):
        scheme, name, port = parts
    else:
        raise errors.bad_request(f"invalid request {segment!r}")
    if not name or scheme not in ("", "http", "https"):
        raise errors.bad_request(f"invalid request {segment!r}")
    return scheme or "http", name, port


def _address(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    if not status.get("podIP"):
        raise errors.bad_request(f"pod {pod['metadata']['name']} does not have an IP address")
    return str(status["podIP"])


def _number(port: str) -> int:
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise errors.ApiError(503, "ServiceUnavailable", f"error trying to reach service: unknown port {port!r}")
    return int(port)


def pod_backend(pod: Mapping[str, Any], segment: str) -> Backend:
    scheme, _, port = split_name(segment)
    if not port:
        port = next(
            (str(p["containerPort"]) for c in pod["spec"].get("containers") or [] for p in c.get("ports") or []), ""
        )
    return Backend(scheme, _address(pod), _number(port) if port else None)


def _ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return ready and bool(status.get("podIP")) and not pod["metadata"].get("deletionTimestamp")


def _target_port(pod: Mapping[str, Any], target: int | str) -> int | None:
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    for container in pod["spec"].get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target:
                return int(port["containerPort"])
    return None


def service_backend(service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], segment: str) -> Backend:
    """The first ready pod behind ``service`` (by name) at the port its named service port targets."""
    scheme, name, port = split_name(segment)
    ports = (service.get("spec") or {}).get("ports") or []
    if port.isdigit():
        chosen = next((p for p in ports if int(p.get("port", 0)) == int(port)), None)
        if chosen is None:
            raise errors.ApiError(503, "ServiceUnavailable", f'no service port {port} found for service "{name}"')
    else:
        chosen = next((p for p in ports if p.get("name", "") == port), None)
    selector = (service.get("spec") or {}).get("selector") or {}
    if chosen is not None and selector:
        target = chosen.get("targetPort", chosen.get("port"))
        for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
            labels = pod["metadata"].get("labels") or {}
            if all(labels.get(k) == v for k, v in selector.items()) and _ready(pod):
                number = _target_port(pod, target)
                if number is not None:
                    return Backend(scheme, _address(pod), number)
    raise errors.ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{segment}"')


def split_path(raw_path: str) -> tuple[str, str]:
    """(the proxy prefix up to ``/proxy``, the path after it, at least "/"), both still escaped."""
    segments = raw_path.split("/")
    at = segments.index("proxy", 4)
    rest = "/".join(segments[at + 1 :])
    return "/".join(segments[: at + 1]), "/" + rest


def _location(value: str, backend_host: str, request_host: str, prefix: str, outer: str) -> str:
    """A redirect to the pod itself, rewritten to go through the proxy again (upstream's ``rewriteURL``)."""
    url = urlsplit(value)
    if (url.netloc and url.netloc not in (backend_host, request_host)) or not url.path.startswith("/"):
        return value
    if url.path.startswith(prefix):
        return value
    path = prefix + url.path
    scheme, netloc = (url.scheme, url.netloc) if not url.netloc else (outer, request_host)
    return urlunsplit((scheme, netloc, path, url.query, url.fragment))


async def serve(request: web.Request, backend: Backend) -> web.StreamResponse:
    """Forward ``request`` to ``backend`` and stream its answer back."""
    prefix, path = split_path(request.rel_url.raw_path)
    host = f"{backend.host}:{backend.port}" if backend.port else backend.host
    target = f"{backend.scheme}://{host}{path}"
    if request.rel_url.raw_query_string:
        target += "?" + request.rel_url.raw_query_string
    headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
    headers["X-Forwarded-Uri"] = prefix + (path if path != "/" else "/")
    headers["X-Forwarded-Host"] = request.host
    headers["X-Forwarded-Proto"] = request.scheme
    body = request.content if request.body_exists else None
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
    async with aiohttp.ClientSession(auto_decompress=False, timeout=timeout) as client:
        try:
            upstream = await client.request(
                request.method, target, headers=headers, data=body, allow_redirects=False, ssl=False
            )
        except aiohttp.ClientConnectorError as exc:
            errno = exc.os_error.errno
            reason = os.strerror(errno).lower() if errno else str(exc.os_error)
            message = f"error trying to reach service: dial tcp {host}: connect: {reason}"
            raise errors.ApiError(503, "ServiceUnavailable", message) from exc
        except aiohttp.ClientError as exc:
            raise errors.ApiError(503, "ServiceUnavailable", f"error trying to reach service: {exc}") from exc
        async with upstream:
            answer = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in upstream.headers.items():
                if name.lower() in HOP_BY_HOP - {"content-length"}:
                    continue
                if name.lower() == "location":
                    value = _location(value, host, request.host, prefix, request.scheme)
                answer.headers.add(name, value)
            await answer.prepare(request)
            with contextlib.suppress(ConnectionResetError):
                async for chunk in upstream.content.iter_chunked(CHUNK):
                    await answer.write(chunk)
                await answer.write_eof()
            return answer
