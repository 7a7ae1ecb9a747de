"""``kubectl exec``, ``exec -it``, ``cp`` and ``attach`` against the plane, with the real kubectl.

kubectl 1.32 speaks WebSocket ``v5.channel.k8s.io`` to ``pods/exec`` and ``pods/attach``; the
command runs as a process of the pod (its env, its working directory), exit codes come back as
kubectl's own, a TTY is a pty whose size kubectl sets, ``kubectl cp`` is tar over exec, and the
official ``kubernetes`` client's ``stream`` (``v4.channel.k8s.io``) works too. One plain pod
running ``sleep`` serves every test.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import termios
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import kubernetes  # a dev dependency: installed with the suite
import pytest
from kubernetes.stream import stream

from conftest import Kubectl, Plane, eventually

pytestmark = pytest.mark.e2e

POD = "sleeper"
# Reads stdin (attach writes to it) and answers on both streams.
MAIN = 'echo started; while read line; do echo "got $line"; echo "err $line" >&2; done; sleep 3600'


@pytest.fixture(scope="module")
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"exec-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    container = {
        "name": "main",
        "image": "python",
        "command": ["sh", "-c", MAIN],
        "stdin": True,
        "env": [{"name": "GREETING", "value": "hello-from-pod"}],
    }
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD}, "spec": {"containers": [container]}}
    kubectl("apply", "-n", name, "-f", "-", input=json.dumps(pod))
    eventually(
        lambda: kubectl("get", "pod", POD, "-n", name, "-o", "jsonpath={.status.phase}") == "Running",
        what="the pod Running",
    )
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def test_exec_runs_in_the_pod_with_exit_codes_stdin_and_kubelet_words(kubectl: Kubectl, ns: str) -> None:
    assert kubectl("exec", "-n", ns, POD, "--", "printenv", "GREETING") == "hello-from-pod\n"
    # The pod's working directory (its own under the pod's directory), not the plane's.
    assert kubectl("exec", "-n", ns, POD, "--", "pwd").strip().endswith("/work")
    failed = kubectl.run("exec", "-n", ns, POD, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (failed.returncode, failed.stdout) == (3, "out\n")
    assert "err\n" in failed.stderr and "command terminated with exit code 3" in failed.stderr
    assert kubectl("exec", "-i", "-n", ns, POD, "--", "cat", input="hi\nthere\n") == "hi\nthere\n"
    missing = kubectl.run("exec", "-n", ns, POD, "--", "no-such-command")
    assert missing.returncode == 127
    assert 'exec: "no-such-command": executable file not found in $PATH' in missing.stderr
    wrong = kubectl.run("exec", "-n", ns, POD, "-c", "nope", "--", "true")
    assert wrong.returncode == 1
    assert f"Error from server (BadRequest): container nope is not valid for pod {POD}" in wrong.stderr


def _in_terminal(kubectl: Kubectl, args: list[str], typed: list[bytes], rows: int, cols: int) -> tuple[str, int]:
    """Run kubectl on a pty of ``rows`` x ``cols`` (as a user's terminal), typing ``typed`` line by line."""
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.execvpe("kubectl", ["kubectl", *args], kubectl.env)
    out, deadline = b"", time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    data = os.read(fd, 4096)
                except OSError:  # EIO: kubectl exited, the terminal has no process left
                    break
                if not data:
                    break
                out += data
            elif typed:
                # Quiet for half a second: the shell waits for its next line.
                os.write(fd, typed.pop(0))
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return out.decode(errors="replace"), os.waitstatus_to_exitcode(status)


def test_exec_it_is_a_shell_on_a_terminal_of_the_users_size(kubectl: Kubectl, ns: str) -> None:
    typed = [b"tty; stty size\r", b"echo $((40 + 2))\r", b"exit 5\r"]
    out, code = _in_terminal(kubectl, ["exec", "-it", "-n", ns, POD, "--", "sh"], typed, 33, 111)
    assert code == 5, out
    assert "/dev/pts/" in out and "33 111" in out and "42" in out, out


def test_cp_both_ways(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    source = tmp_path / "up"
    source.mkdir()
    (source / "a.txt").write_text("payload\n")
    # A relative path in the pod is against its working directory, as kubectl sends it to tar.
    kubectl("cp", "-n", ns, str(source / "a.txt"), f"{POD}:copied.txt")
    assert kubectl("exec", "-n", ns, POD, "--", "cat", "copied.txt") == "payload\n"
    kubectl("cp", "-n", ns, str(source), f"{POD}:updir")
    kubectl("cp", "-n", ns, f"{POD}:updir", str(tmp_path / "down"))
    assert (tmp_path / "down" / "a.txt").read_text() == "payload\n"


def test_attach_sees_output_from_now_on_and_writes_to_stdin(kubectl: Kubectl, ns: str) -> None:
    attach = subprocess.Popen(
        ["kubectl", "attach", "-i", "-n", ns, POD],
        env=kubectl.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert attach.stdin is not None and attach.stdout is not None
        seen = b""
        deadline = time.monotonic() + 60
        # Lines typed before the session is up are read too: typed until an answer shows.
        while b"got ping" not in seen and time.monotonic() < deadline:
            attach.stdin.write(b"ping\n")
            attach.stdin.flush()
            ready, _, _ = select.select([attach.stdout], [], [], 1.0)
            if ready:
                seen += os.read(attach.stdout.fileno(), 4096)
        assert b"got ping" in seen
        assert b"started" not in seen  # output from the attach on, not the log's past
    finally:
        attach.kill()
        attach.communicate(timeout=30)


def test_the_kubernetes_python_client_streams_exec(plane: Plane, ns: str) -> None:

    api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(plane.kubeconfig)))
    out = stream(api.connect_get_namespaced_pod_exec, POD, ns, command=["printenv", "GREETING"], stdout=True)
    assert out == "hello-from-pod\n"
    resp = stream(
        api.connect_get_namespaced_pod_exec,
        POD,
        ns,
        command=["sh", "-c", "read x; echo got $x; exit 7"],
        stdin=True,
        stdout=True,
        stderr=True,
        _preload_content=False,
    )
    resp.write_stdin("abc\n")
    resp.run_forever(timeout=30)
    assert (resp.read_stdout(), resp.returncode) == ("got abc\n", 7)
