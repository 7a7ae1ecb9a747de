"""A recording HTTP proxy in front of a plane, and what kube-apiserver's authorizer makes of each request.

A process under test (the operator, the dashboard) is given a kubeconfig whose server is the proxy
(``proxied``); the proxy forwards every request to the plane, streaming the answers (watches, logs)
back, and keeps the method and target of each. ``authorization`` turns one into the (API group,
resource[/subresource], verb) a real API server's RBAC checks, and ``grants`` turns a ClusterRole's
rules into the same triples, so a test can compare what a role grants with what was asked for.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import threading
import urllib.parse
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from conftest import Plane

Triple = tuple[str, str, str]

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer", "upgrade"}


class Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.upstreams: set[http.client.HTTPConnection] = set()
        super().__init__(("127.0.0.1", 0), _Forward)

    def close_upstreams(self) -> None:
        """End the forwarded watches still open to the plane: a forwarding thread notices that its client
        left only when the plane next sends something, and the plane's shutdown would wait for them."""
        with self.lock:
            for conn in self.upstreams:
                if conn.sock is not None:
                    with contextlib.suppress(OSError):
                        conn.sock.shutdown(socket.SHUT_RDWR)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def authorizations(self) -> set[Triple]:
        """The distinct (group, resource, verb) of the resource requests recorded so far."""
        with self.lock:
            requests = list(self.requests)
        return {t for method, target in requests if (t := authorization(method, target)) is not None}

    def summary(self) -> str:
        """How many requests, and their distinct triples one a line (what a failing test prints)."""
        observed = self.authorizations()
        with self.lock:
            count = len(self.requests)
        lines = [f"{count} requests, {len(observed)} distinct (group, resource, verb):"]
        return "\n".join([*lines, *(f"   {t}" for t in sorted(observed))])


@contextlib.contextmanager
def recording(plane: Plane) -> Iterator[Recorder]:
    """A recording proxy to ``plane`` (plain http) serving until the block ends."""
    server = Recorder(plane.url)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        server.close_upstreams()


class _Forward(BaseHTTPRequestHandler):
    """Forwards one request to the plane and streams the answer back (watches included)."""

    protocol_version = "HTTP/1.1"
    server: Recorder

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        with self.server.lock:
            self.server.requests.append((self.command, self.path))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP | {"host"}}
        up = self.server.upstream
        conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=None)
        with self.server.lock:
            self.server.upstreams.add(conn)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            answer = conn.getresponse()
            self.send_response(answer.status, answer.reason)
            for key, value in answer.getheaders():
                if key.lower() not in _HOP:
                    self.send_header(key, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while chunk := answer.read1(65536):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (OSError, http.client.HTTPException):  # an end went away mid-stream (between phases, at the end)
            self.close_connection = True
        finally:
            with self.server.lock:
                self.server.upstreams.discard(conn)
            conn.close()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward


def proxied(plane: Plane, recorder: Recorder, home: Path) -> Plane:
    """A Plane value whose kubeconfig reaches the plane through ``recorder``."""
    config = yaml.safe_load(plane.kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = recorder.url
    home.mkdir(parents=True, exist_ok=True)
    (home / "kubeconfig").write_text(yaml.safe_dump(config))
    return Plane(home, plane.port, plane.secure)


_PATH = re.compile(r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))(?P<rest>(?:/[^/]+)*)$")


def authorization(method: str, target: str) -> Triple | None:
    """(group, resource[/subresource], verb) as the API server's RequestInfo resolves it; None: not a resource."""
    split = urllib.parse.urlsplit(target)
    match = _PATH.match(split.path)
    if match is None:
        return None
    parts = [p for p in (match["rest"] or "").split("/") if p]
    if parts[:1] == ["namespaces"] and len(parts) >= 3:
        parts = parts[2:]
    if not parts:
        return None  # discovery of a group version
    resource, name, sub = parts[0], parts[1] if len(parts) > 1 else None, parts[2] if len(parts) > 2 else None
    query = urllib.parse.parse_qs(split.query)
    if method == "GET":
        verb = "get" if name else ("watch" if query.get("watch", [""])[0] in ("1", "true") else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method) or (
            "delete" if name else "deletecollection"
        )
    return (match["group"] or "", f"{resource}/{sub}" if sub else resource, verb)


def grants(rules: Iterable[dict[str, Any]]) -> set[Triple]:
    """The (group, resource, verb) a ClusterRole's ``rules`` (as the manifest writes them) allow."""
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def differences(
    observed: set[Triple], granted: set[Triple], *, plurals: set[tuple[str, str]], template: tuple[str, str]
) -> tuple[set[Triple], set[Triple]]:
    """What was asked for and is not granted, and what is granted and was never asked for.

    Every job kind gets the rules of one template, and the jobs a test drives are of the ``template``
    kind (group, plural): another kind of ``plurals`` is checked as the template's under its own plural.
    """
    unused = {_as_template(t, plurals, template) for t in granted} - observed
    return observed - granted, unused


def _as_template(triple: Triple, plurals: set[tuple[str, str]], template: tuple[str, str]) -> Triple:
    group, resource, verb = triple
    plural, slash, sub = resource.partition("/")
    if (group, plural) in plurals:
        return template[0], f"{template[1]}{slash}{sub}", verb
    return triple
