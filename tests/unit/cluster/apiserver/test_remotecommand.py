"""``pods/exec`` and ``pods/attach``: the options, the channel framing, and sessions with real sockets and processes.

The exec session talks to a real exec server (``node.podexec``) whose pod lookup is this test's
(the agent's own lookup is the node's tests'); the WebSocket transport runs on a real aiohttp
server with a real aiohttp client, for each subprotocol family.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from trainyard.cluster import logs
from trainyard.cluster.clients.node import podexec
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.remotecommand import options as opts
from trainyard.cluster.server.apiserver.remotecommand import websocket
from trainyard.cluster.server.apiserver.remotecommand.session import AttachSession, ExecSession, Outcome


def pod(*containers: str, init: tuple[str, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": "n", "containers": [{"name": c} for c in containers]}
    if init:
        spec["initContainers"] = [{"name": c} for c in init]
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": spec}


# -- options -------------------------------------------------------------------------------------------


def test_the_container_is_chosen_as_kube_apiserver_chooses_it() -> None:
    assert opts.container_for(pod("main"), None) == "main"
    assert opts.container_for(pod("a", "b", init=("i",)), "i") == "i"
    with pytest.raises(errors.ApiError) as many:
        opts.container_for(pod("a", "b", init=("i",)), None)
    assert many.value.message == (
        "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
    )
    with pytest.raises(errors.ApiError) as wrong:
        opts.container_for(pod("a"), "x")
    assert (wrong.value.code, wrong.value.message) == (400, "container x is not valid for pod p")


def test_a_terminal_merges_stderr_and_a_request_must_want_a_stream_and_a_command() -> None:
    query = {"stdout": "true", "stderr": "true", "tty": "true"}
    assert opts.parse(query, ["sh"], pod("m"), attach=False) == opts.Options("m", ("sh",), False, True, False, True)
    with pytest.raises(errors.ApiError, match="at least one command"):
        opts.parse({"stdout": "1"}, [], pod("m"), attach=False)
    with pytest.raises(errors.ApiError, match="at least 1 of stdin, stdout, stderr"):
        opts.parse({}, ["sh"], pod("m"), attach=False)
    assert opts.parse({"stdin": "1"}, [], pod("m"), attach=True).command == ()


def test_the_error_channel_says_an_exit_code_as_clients_read_it() -> None:
    assert opts.exit_status(0)["status"] == "Success"
    status = opts.exit_status(3)
    assert (status["status"], status["reason"]) == ("Failure", "NonZeroExitCode")
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    assert opts.failure('container not found ("x")')["message"] == 'Internal error occurred: container not found ("x")'


# -- framing -------------------------------------------------------------------------------------------


def test_the_client_s_first_served_subprotocol_wins_and_none_is_the_plain_channel_protocol() -> None:
    assert websocket.choose("v5.channel.k8s.io, v4.channel.k8s.io") == websocket.V5
    assert websocket.choose("x.k8s.io,v4.base64.channel.k8s.io") == websocket.V4_BASE64
    assert websocket.choose(None) == ""
    with pytest.raises(errors.ApiError, match="requested protocol"):
        websocket.choose("chat")


@pytest.mark.parametrize(
    ("protocol", "wire", "status_json"),
    [
        (websocket.V5, b"\x01hi", True),
        (websocket.V4, b"\x01hi", True),
        (websocket.V4_BASE64, "1aGk=", True),
        (websocket.CHANNEL, b"\x01hi", False),
        (websocket.BASE64, "1aGk=", False),
    ],
)
def test_messages_are_framed_by_channel_per_protocol(protocol: str, wire: bytes | str, status_json: bool) -> None:
    framing = websocket.Framing(protocol)
    assert framing.encode(websocket.STDOUT, b"hi") == wire
    assert framing.decode(wire) == (1, b"hi")
    failure = opts.exit_status(2)
    assert framing.error_message(failure) == (
        json.dumps(failure).encode() if status_json else failure["message"].encode()
    )
    assert framing.error_message(opts.success()) == (json.dumps(opts.success()).encode() if status_json else None)


def test_a_binary_protocol_takes_text_frames_as_their_bytes() -> None:
    # The kubernetes Python client writes chr(channel) + text as a text frame.
    assert websocket.Framing(websocket.V4).decode("\x00abc\n") == (0, b"abc\n")


def test_window_sizes_are_read_across_messages() -> None:
    resizes = websocket.Resizes()
    assert resizes.feed(b'{"Width":80,') == []
    assert resizes.feed(b'"Height":24}{"Width":100,"Height":30}') == [(80, 24), (100, 30)]


# -- sessions with a real exec server -------------------------------------------------------------------


class Output:
    def __init__(self) -> None:
        self.out, self.err = bytearray(), bytearray()

    async def stdout(self, data: bytes) -> None:
        self.out += data

    async def stderr(self, data: bytes) -> None:
        self.err += data


def serving_node(tmp_path: Path, scenario: Callable[[Layout], Awaitable[None]]) -> None:
    """Run ``scenario`` with an exec server whose one running pod is default/p (container main) in ``tmp_path``."""
    layout = Layout(tmp_path)
    sessions: set[int] = set()

    def target(request: podexec.Request) -> podexec.Target:
        if request.pod != ("default", "p"):
            raise podexec.Refused(podexec.not_found(request))
        if request.container not in (None, "main"):
            raise podexec.Refused(f'container not found ("{request.container}")')
        env = {"PATH": os.environ["PATH"], "POD_VAR": "from-the-container"}
        return podexec.Target("default/p", "p", env, str(tmp_path), None, None, sessions)

    async def main() -> None:
        server = podexec.ExecServer(layout, target)
        await server.start()
        try:
            await scenario(layout)
        finally:
            await server.close()

    asyncio.run(main())


def exec_session(layout: Layout, *argv: str, name: str = "p", container: str = "main", **flags: bool) -> ExecSession:
    options = opts.Options(container, argv, **({"stdout": True, "stderr": True} | flags))
    return ExecSession(layout.exec_socket, "default", name, options)


def test_exec_runs_an_argv_in_the_pod_and_ends_with_its_exit_code(tmp_path: Path) -> None:
    async def scenario(layout: Layout) -> None:
        output = Output()
        outcome = await exec_session(layout, "sh", "-c", 'echo "$POD_VAR"; echo e >&2; exit 3').run(output)
        assert (outcome, bytes(output.out), bytes(output.err)) == (Outcome(code=3), b"from-the-container\n", b"e\n")
        output = Output()
        assert await exec_session(layout, "no-such-command").run(output) == Outcome(code=127)
        assert b'exec: "no-such-command": executable file not found in $PATH' in output.err

    serving_node(tmp_path, scenario)


def test_exec_stdin_ends_when_the_client_closes_it(tmp_path: Path) -> None:
    async def scenario(layout: Layout) -> None:
        session, output = exec_session(layout, "cat", stdin=True), Output()
        running = asyncio.create_task(session.run(output))
        await session.write_stdin(b"one\n")
        await session.write_stdin(b"two\n")
        session.close_stdin()
        assert await asyncio.wait_for(running, 30) == Outcome(code=0)
        assert bytes(output.out) == b"one\ntwo\n"

    serving_node(tmp_path, scenario)


def test_exec_with_a_tty_is_the_commands_controlling_terminal_and_resizes(tmp_path: Path) -> None:
    async def scenario(layout: Layout) -> None:
        session, output = exec_session(layout, "sh", stdin=True, stderr=False, tty=True), Output()
        running = asyncio.create_task(session.run(output))
        session.resize(111, 33)
        await session.write_stdin(b"tty; stty size; exit 4\n")
        assert await asyncio.wait_for(running, 30) == Outcome(code=4)
        assert b"/dev/pts/" in output.out and b"33 111" in output.out

    serving_node(tmp_path, scenario)


def test_exec_refusals_are_the_kubelets_words_as_an_internal_error(tmp_path: Path) -> None:
    async def scenario(layout: Layout) -> None:
        outcome = await exec_session(layout, "true", container="x").run(Output())
        assert outcome.error == 'unable to upgrade connection: container not found ("x")'
        assert outcome.status()["code"] == 500
        outcome = await exec_session(layout, "true", name="gone").run(Output())
        assert outcome.error == "unable to upgrade connection: pod does not exist"

    serving_node(tmp_path, scenario)


def test_attach_follows_the_log_from_now_on_and_writes_to_the_stdin_fifo(tmp_path: Path) -> None:
    log, fifo = tmp_path / "main.log", tmp_path / "main.stdin"
    writer = logs.LogWriter(log)
    writer.write("stdout", b"before\n")
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # as the shim holds it for the container
    done = False

    async def main() -> None:
        options = opts.Options("main", (), stdin=True, stdout=True, stderr=True)
        session, output = AttachSession(log, fifo, options, lambda: done), Output()
        running = asyncio.create_task(session.run(output))
        await asyncio.sleep(0.3)  # the session found the log's end (nothing tells when it did)
        writer.write("stdout", b"after\n")
        writer.write("stderr", b"oops\n")
        await session.write_stdin(b"typed\n")
        for _ in range(600):  # polled: the session reads the log every 0.1 s
            if b"oops" in output.err:
                break
            await asyncio.sleep(0.05)
        nonlocal done
        done = True
        assert await asyncio.wait_for(running, 30) == Outcome(code=0)
        assert (bytes(output.out), bytes(output.err)) == (b"after\n", b"oops\n")
        assert os.read(reader, 100) == b"typed\n"

    try:
        asyncio.run(main())
    finally:
        os.close(reader)
        writer.close()


# -- the WebSocket transport ----------------------------------------------------------------------------


class Echo:
    """A session that echoes stdin to stdout, says each resize on stderr, and exits 9 when stdin closes."""

    def __init__(self) -> None:
        self.output: Any = None
        self.ended = asyncio.Event()

    async def run(self, output: Any) -> Outcome:
        self.output = output
        await self.ended.wait()
        return Outcome(code=9)

    async def write_stdin(self, data: bytes) -> None:
        await self.output.stdout(data)

    def close_stdin(self) -> None:
        self.ended.set()

    def resize(self, width: int, height: int) -> None:
        asyncio.get_running_loop().create_task(self.output.stderr(f"{width}x{height}".encode()))

    def close(self) -> None:
        self.ended.set()


async def _talk(protocol: str, send: list[bytes | str], *, end_after: float | None = None) -> list[bytes | str]:
    """Messages from the server to a real client that sent ``send`` (the session ends on stdin's close, or after)."""
    session = Echo()

    async def handler(request: web.Request) -> web.StreamResponse:
        if end_after is not None:
            asyncio.get_running_loop().call_later(end_after, session.ended.set)
        return await websocket.serve(request, session, stdout=True, stderr=True)

    app = web.Application()
    app.router.add_get("/exec", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    url = f"http://127.0.0.1:{port}/exec"
    try:
        async with aiohttp.ClientSession() as client, client.ws_connect(url, protocols=(protocol,)) as ws:
            assert ws.protocol == protocol
            for message in send:
                await (ws.send_str(message) if isinstance(message, str) else ws.send_bytes(message))
            return [message.data async for message in ws]
    finally:
        await runner.cleanup()


def test_v5_opens_on_stdout_carries_streams_and_ends_stdin_with_the_close_signal() -> None:
    resize = b"\x04" + json.dumps({"Width": 80, "Height": 24}).encode()
    got = asyncio.run(_talk(websocket.V5, [b"\x00hello", resize, b"\xff\x00"]))
    assert got[:3] == [b"\x01", b"\x01hello", b"\x0280x24"]
    last = got[3]
    assert isinstance(last, bytes) and last[:1] == b"\x03"
    assert json.loads(last[1:])["details"]["causes"] == [{"reason": "ExitCode", "message": "9"}]


def test_v4_base64_frames_text_and_base64() -> None:
    got = asyncio.run(_talk(websocket.V4_BASE64, ["0" + base64.b64encode(b"hi").decode()], end_after=0.5))
    assert got[:2] == ["1", "1" + base64.b64encode(b"hi").decode()]
    last = got[2]
    assert isinstance(last, str) and last[0] == "3"
    assert json.loads(base64.b64decode(last[1:]))["reason"] == "NonZeroExitCode"
