"""What the API server calls for ``pods/exec`` and ``pods/attach``: the checks, then a session over
WebSocket (``websocket``) or SPDY/3.1 (``spdystreams``).

The request is checked before any upgrade (the container chosen, the options), as kube-apiserver
does, so a client that falls back to SPDY after a refused WebSocket handshake gets the same
``Status``. A request that upgrades to something else is not served here: the caller answers it
(``connect.refusal``).
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from trainyard.api.meta import Obj
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.apiserver.remotecommand import options as opts
from trainyard.cluster.server.apiserver.remotecommand import spdystreams, websocket
from trainyard.cluster.server.apiserver.remotecommand.session import AttachSession, ExecSession, Session

SERVED = frozenset({"exec", "attach"})


def session_for(
    request: web.Request, pod: Obj, subresource: str, layout: Layout, current: Callable[[], Obj | None]
) -> tuple[Session, opts.Options]:
    """The session a checked request runs (raises the ``ApiError`` kube-apiserver would answer).

    ``current`` reads the pod as it is now: an attach ends when its container does.
    """
    query = request.query
    options = opts.parse(query, query.getall("command", []), pod, attach=subresource == "attach")
    meta = pod["metadata"]
    namespace, name, uid = str(meta.get("namespace") or ""), meta["name"], meta["uid"]
    if subresource == "exec":
        return ExecSession(layout.exec_socket, namespace, name, options), options
    spec: Obj = next((c for c in pod["spec"].get("containers") or [] if c["name"] == options.container), {})
    stdin = layout.container_stdin(namespace, name, uid, options.container) if spec.get("stdin") else None

    def finished() -> bool:
        now = current()
        return now is None or now["metadata"]["uid"] != uid or not _running(now, options.container)

    log = layout.container_log(namespace, name, uid, options.container)
    return AttachSession(log, stdin, options, finished), options


def _running(pod: Obj, container: str) -> bool:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return bool((status.get("state") or {}).get("running"))
    return False


async def serve(
    request: web.Request, pod: Obj, subresource: str, layout: Layout, current: Callable[[], Obj | None]
) -> web.StreamResponse | None:
    """Serve the request over WebSocket or SPDY/3.1; None when it asks for another upgrade, after the checks."""
    session, options = session_for(request, pod, subresource, layout, current)
    if websocket.is_websocket(request.headers):
        return await websocket.serve(request, session, stdout=options.stdout, stderr=options.stderr)
    if spdystreams.is_spdy(request.headers):
        return await spdystreams.serve(request, session, options)
    return None
