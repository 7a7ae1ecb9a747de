"""``kubectl port-forward`` to a pod and to a Service, over kubectl's WebSocket tunnel and its SPDY fallback;
``kubectl exec`` over SPDY/3.1 too (its WebSocket side is test_kubectl_exec's), and the pod and service
HTTP proxies (``kubectl get --raw .../proxy/...``)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import kubernetes  # a dev dependency: installed with the suite
import pytest
from kubernetes.stream import portforward

from conftest import REPO, Kubectl, eventually, free_port

pytestmark = pytest.mark.e2e

PORT = free_port()
# Larger than a SPDY frame (32 KiB) and than its initial window (64 KiB), so the copy spans many frames.
BODY = bytes(range(256)) * 1200
SERVE = f"""
import http.server
open("big.bin", "wb").write(bytes(range(256)) * 1200)
http.server.ThreadingHTTPServer(("127.0.0.1", {PORT}), http.server.SimpleHTTPRequestHandler).serve_forever()
"""
MANIFEST = [
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pf-web", "labels": {"app": "pf-web"}},
        "spec": {
            "containers": [
                {
                    "name": "web",
                    "image": "python:3.11",
                    "command": ["python", "-c", SERVE],
                    "ports": [{"name": "http", "containerPort": PORT}],
                }
            ]
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "pf-web"},
        "spec": {"selector": {"app": "pf-web"}, "ports": [{"name": "web", "port": 80, "targetPort": "http"}]},
    },
]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def web(kubectl: Kubectl) -> Iterator[str]:
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": MANIFEST}))
    eventually(lambda: _listening(PORT), timeout=90, what="the pod's http.server to listen")
    yield "pf-web"
    kubectl("delete", "pod,service", "pf-web", "--ignore-not-found", "--wait=false")


class PortForward:
    """A running ``kubectl port-forward``; kubectl picks the local port (``:REMOTE``) and says which."""

    def __init__(self, kubectl: Kubectl, target: str, remote: int, tmp: Path, *, websockets: bool = True) -> None:
        self.out, self.err = tmp / f"pf-{remote}.out", tmp / f"pf-{remote}.err"
        env = {**kubectl.env, "KUBECTL_PORT_FORWARD_WEBSOCKETS": str(websockets).lower()}
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                ["kubectl", "port-forward", "-v=6", target, f":{remote}"],
                stdout=out,
                stderr=err,
                env=env,
                cwd=REPO,
                stdin=subprocess.DEVNULL,
            )
        self.local = int(eventually(self._forwarding, timeout=60, what=f"kubectl port-forward {target} to listen"))

    def _forwarding(self) -> str | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"kubectl port-forward exited {self.proc.returncode}: {self.err.read_text()}")
        found = re.search(r"Forwarding from 127\.0\.0\.1:(\d+) ->", self.out.read_text())
        return found.group(1) if found else None

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.local}{path}", timeout=60) as answer:
            body: bytes = answer.read()
            return body

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=30)
        return self.err.read_text()


@pytest.mark.parametrize(
    ("target", "remote"), [("pod/pf-web", PORT), ("svc/pf-web", 80)], ids=["pod", "service-named-target-port"]
)
def test_port_forward_over_the_websocket_tunnel(
    kubectl: Kubectl, web: str, tmp_path: Path, target: str, remote: int
) -> None:
    forward = PortForward(kubectl, target, remote, tmp_path)
    try:
        assert forward.get("/big.bin") == BODY
        assert forward.get("/big.bin") == BODY  # a second connection on the same tunnel
    finally:
        log = forward.stop()
    assert re.search(r"GET https://\S+/pods/pf-web/portforward 101 Switching Protocols", log), log


def test_port_forward_falls_back_to_spdy(kubectl: Kubectl, web: str, tmp_path: Path) -> None:
    forward = PortForward(kubectl, "pod/pf-web", PORT, tmp_path, websockets=False)
    try:
        assert forward.get("/big.bin") == BODY
    finally:
        log = forward.stop()
    assert re.search(r"POST https://\S+/pods/pf-web/portforward 101 Switching Protocols", log), log


def test_a_port_nothing_listens_on_is_reported_and_ends_the_forward(kubectl: Kubectl, web: str, tmp_path: Path) -> None:
    closed = free_port()
    forward = PortForward(kubectl, "pod/pf-web", closed, tmp_path)
    with pytest.raises(OSError):  # the connection is dropped: nothing answered on the pod's side
        forward.get("/")
    eventually(lambda: forward.proc.poll() is not None, timeout=60, what="kubectl to give up")
    log = forward.stop()
    assert forward.proc.returncode == 1
    uid = kubectl("get", "pod", "pf-web", "-o", "jsonpath={.metadata.uid}")
    assert f"error forwarding port {closed} to pod {uid}, uid : failed to connect to localhost:{closed}" in log
    assert "connect: connection refused" in log and "error: lost connection to pod" in log


def test_exec_over_spdy_has_the_streams_and_the_exit_code(kubectl: Kubectl, web: str) -> None:
    spdy = {**kubectl.env, "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}

    def kubectl_exec(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        command = ["kubectl", "exec", "-v=6", *args]
        return subprocess.run(command, input=stdin, capture_output=True, text=True, env=spdy, timeout=60, cwd=REPO)

    ran = kubectl_exec(web, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (ran.returncode, ran.stdout) == (3, "out\n"), ran.stderr
    assert "err\n" in ran.stderr and "command terminated with exit code 3" in ran.stderr
    assert re.search(r"POST https://\S+/pods/pf-web/exec\?\S+ 101 Switching Protocols", ran.stderr), ran.stderr
    fed = kubectl_exec("-i", web, "--", "cat", stdin="through stdin\n")
    assert (fed.returncode, fed.stdout) == (0, "through stdin\n"), fed.stderr


def test_the_service_and_pod_proxies_reach_the_pods_server(kubectl: Kubectl, web: str) -> None:
    base = "/api/v1/namespaces/default"
    for path in (
        f"{base}/services/pf-web:80/proxy/",
        f"{base}/services/http:pf-web:web/proxy/",
        f"{base}/pods/pf-web/proxy/",
    ):
        assert "big.bin" in kubectl("get", "--raw", path), path  # the directory listing of the pod's server
    none = kubectl.run("get", "--raw", f"{base}/services/pf-web:81/proxy/")
    assert 'Error from server (ServiceUnavailable): no service port 81 found for service "pf-web"' in none.stderr


def test_the_kubernetes_python_client_forwards_over_v4_channels(kubectl: Kubectl, web: str) -> None:

    api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(kubectl.env["KUBECONFIG"]))
    closed = free_port()
    forward = portforward(api.connect_get_namespaced_pod_portforward, web, "default", ports=f"{PORT},{closed}")
    sock = forward.socket(PORT)
    sock.sendall(b"GET /big.bin HTTP/1.0\r\n\r\n")
    answer = b""
    while data := sock.recv(65536):
        answer += data
    assert answer.startswith(b"HTTP/1.0 200 OK") and answer.endswith(BODY)
    error = eventually(lambda: forward.error(closed), timeout=30, what="the closed port's error")
    assert f"error forwarding port {closed} to pod" in error and "connection refused" in error
    forward.close()
