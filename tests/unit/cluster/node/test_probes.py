"""Probe handlers against real sockets, servers and processes, and the workers' kubelet semantics."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import pytest

import grpc_health_server
from trainyard.cluster.clients.node import probes
from trainyard.cluster.clients.node.probes import ContainerProbes, Hooks, Outcome, Probe, Target, parse


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run_process(argv: list[str], timeout: float) -> tuple[int | None, str]:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        async with asyncio.timeout(timeout):
            out, _ = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        return None, ""
    return process.returncode, out.decode()


def target(ports: dict[str, int] | None = None) -> Target:
    return Target("127.0.0.1", ports or {}, run_process)


def test_parse_applies_the_api_defaults() -> None:
    probe = parse("livenessProbe", {"httpGet": {"port": 80}})
    assert (probe.kind, probe.action, probe.handler) == ("Liveness", "httpGet", {"port": 80})
    assert (probe.initial_delay, probe.period, probe.timeout) == (0.0, 10.0, 1.0)
    assert (probe.success_threshold, probe.failure_threshold, probe.termination_grace) == (1, 3, None)
    custom = parse(
        "startupProbe",
        {
            "exec": {"command": ["true"]},
            "initialDelaySeconds": 5,
            "periodSeconds": 2,
            "timeoutSeconds": 3,
            "failureThreshold": 30,
            "terminationGracePeriodSeconds": 0,
        },
    )
    assert (custom.kind, custom.initial_delay, custom.period, custom.timeout) == ("Startup", 5.0, 2.0, 3.0)
    assert (custom.failure_threshold, custom.termination_grace) == (30, 0)
    assert [p.kind for p in probes.probes_of({"readinessProbe": {"tcpSocket": {"port": 1}}, "name": "c"})] == [
        "Readiness"
    ]


async def serve_http(codes: dict[str, int], seen: list[bytes]) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        seen.append(request)
        path = request.split()[1].decode()
        if path == "/hang":
            await asyncio.sleep(5)
        writer.write(f"HTTP/1.1 {codes.get(path, 404)} X\r\nContent-Length: 0\r\n\r\n".encode())
        await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def http_probe(port: Any, path: str, **extra: Any) -> Probe:
    return Probe("Readiness", "httpGet", {"port": port, "path": path, **extra}, timeout=0.5)


def test_http_get_success_failure_and_errors() -> None:
    async def scenario() -> None:
        seen: list[bytes] = []
        server = await serve_http({"/ok": 200, "/moved": 302, "/bad": 500, "/hang": 200}, seen)
        port = server.sockets[0].getsockname()[1]
        async with server:
            assert await probes.check_http(http_probe("web", "/ok"), target({"web": port})) == Outcome(True)
            assert (await probes.check_http(http_probe(port, "moved"), target())).ok
            bad = await probes.check_http(http_probe(port, "/bad"), target())
            assert bad == Outcome(False, "HTTP probe failed with statuscode: 500")
            hung = await probes.check_http(http_probe(port, "/hang"), target())
            assert hung.output == (
                f'Get "http://127.0.0.1:{port}/hang": context deadline exceeded '
                "(Client.Timeout exceeded while awaiting headers)"
            )
            headers = [{"name": "X-Token", "value": "t"}, {"name": "Host", "value": "example"}]
            await probes.check_http(http_probe(port, "/ok", httpHeaders=headers), target())
        request = seen[-1].decode()
        assert "X-Token: t" in request and "Host: example" in request and "User-Agent: kube-probe/1.32" in request
        assert seen[0].startswith(b"GET /ok HTTP/1.1") and seen[1].startswith(b"GET /moved ")
        closed = free_port()
        refused = await probes.check_http(http_probe(closed, "/x"), target())
        assert (
            refused.output
            == f'Get "http://127.0.0.1:{closed}/x": dial tcp 127.0.0.1:{closed}: connect: connection refused'
        )
        unknown = await probes.check_http(http_probe("metrics", "/"), target({"web": 1}))
        assert unknown == Outcome(False, "couldn't find port: metrics in container", errored=True)

    asyncio.run(scenario())


def test_tcp_socket_open_and_closed() -> None:
    async def scenario() -> None:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            assert (await probes.check_tcp(Probe("Liveness", "tcpSocket", {"port": port}), target())).ok
        closed = free_port()
        result = await probes.check_tcp(Probe("Liveness", "tcpSocket", {"port": closed}), target())
        assert result == Outcome(False, f"dial tcp 127.0.0.1:{closed}: connect: connection refused")

    asyncio.run(scenario())


def test_exec_reports_exit_code_output_and_timeout() -> None:
    async def scenario() -> None:
        ok = Probe("Liveness", "exec", {"command": ["sh", "-c", "echo fine"]})
        assert await probes.check_exec(ok, target()) == Outcome(True, "fine")
        failing = Probe("Liveness", "exec", {"command": ["sh", "-c", "echo broken >&2; exit 3"]})
        assert await probes.check_exec(failing, target()) == Outcome(False, "broken")
        slow = Probe("Liveness", "exec", {"command": ["sleep", "5"]}, timeout=0.2)
        assert await probes.check_exec(slow, target()) == Outcome(False, 'command "sleep 5" timed out')
        missing = Probe("Liveness", "exec", {"command": ["/nonexistent/probe"]})
        result = await probes.check_exec(missing, target())
        assert result.errored and result.output.startswith('exec: "/nonexistent/probe": ')

    asyncio.run(scenario())


class Recorder:
    def __init__(self) -> None:
        self.changes = 0
        self.events: list[str] = []
        self.killed: list[str] = []

    def hooks(self) -> Hooks:
        async def changed() -> None:
            self.changes += 1

        async def event(type_: str, reason: str, message: str) -> None:
            self.events.append(f"{type_} {reason} {message}")

        async def kill(probe: Probe) -> None:
            self.killed.append(probe.kind)

        return Hooks(changed, event, kill)


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll a condition the workers reach on their own schedule (they expose no event to wait on)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


def fast(kind: str, handler: dict[str, Any], action: str = "tcpSocket", **kw: Any) -> Probe:
    return Probe(kind, action, handler, period=0.05, timeout=0.5, **kw)


def test_readiness_starts_false_and_follows_thresholds() -> None:
    async def scenario() -> None:
        port = free_port()
        recorder = Recorder()
        readiness = fast("Readiness", {"port": port}, success_threshold=2, failure_threshold=3)
        workers = ContainerProbes([readiness], target(), recorder.hooks())
        assert workers.started and not workers.ready
        workers.start()
        await until(lambda: len(recorder.events) >= 2)
        assert not workers.ready and recorder.changes == 0
        assert recorder.events[0].startswith("Warning Unhealthy Readiness probe failed: dial tcp 127.0.0.1:")
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", port)
        await until(lambda: workers.ready)
        assert recorder.changes == 1
        server.close()
        await server.wait_closed()
        failures = len(recorder.events)
        await until(lambda: not workers.ready)
        # Unready only after failureThreshold failures in a row.
        assert len(recorder.events) - failures >= 3 and recorder.changes == 2
        await workers.stop()
        assert recorder.killed == []

    asyncio.run(scenario())


def test_startup_probe_holds_back_liveness_and_kills_when_it_gives_up() -> None:
    async def scenario() -> None:
        calls: list[list[str]] = []

        async def execute(argv: list[str], timeout: float) -> tuple[int | None, str]:
            calls.append(argv)
            return 1, "unhealthy"

        recorder = Recorder()
        startup = fast("Startup", {"port": free_port()}, failure_threshold=3)
        liveness = fast("Liveness", {"command": ["check"]}, action="exec", failure_threshold=1)
        workers = ContainerProbes([startup, liveness], Target("127.0.0.1", {}, execute), recorder.hooks())
        assert not workers.started and not workers.ready
        workers.start()
        await until(lambda: bool(recorder.killed))
        await workers.stop()
        assert recorder.killed == ["Startup"] and calls == []
        assert len([e for e in recorder.events if "Startup probe failed" in e]) == 3

    asyncio.run(scenario())


def test_liveness_runs_once_started_and_kills_after_failure_threshold() -> None:
    async def scenario() -> None:
        results = iter([(0, ""), (1, "a"), (0, ""), (1, "b"), (1, "c")])

        async def execute(argv: list[str], timeout: float) -> tuple[int | None, str]:
            return next(results)

        recorder = Recorder()
        liveness = fast("Liveness", {"command": ["check"]}, action="exec", failure_threshold=2)
        workers = ContainerProbes([liveness], Target("127.0.0.1", {}, execute), recorder.hooks())
        workers.start()
        await until(lambda: bool(recorder.killed))
        await workers.stop()
        # A success in between resets the count: only "b" then "c" were two in a row.
        assert recorder.events == [f"Warning Unhealthy Liveness probe failed: {m}" for m in "abc"]
        assert recorder.killed == ["Liveness"] and workers.ready

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ("Always", "Container web failed liveness probe, will be restarted"),
        ("Never", "Container web failed liveness probe"),
    ],
)
def test_killing_message(policy: str, message: str) -> None:
    assert probes.killing_message("web", Probe("Liveness", "exec", {}), policy) == message


def test_named_ports() -> None:
    container = {"ports": [{"name": "http", "containerPort": 8080}, {"containerPort": 9000}]}
    assert probes.named_ports(container) == {"http": 8080}


def test_grpc_health_check(tmp_path: Path) -> None:
    flag = tmp_path / "serving"

    async def scenario() -> None:
        server = await asyncio.start_server(grpc_health_server.handler(str(flag)), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            probe = Probe("Readiness", "grpc", {"port": port})
            assert await probes.check(probe, target()) == Outcome(
                False, 'service unhealthy (responded with "NOT_SERVING")'
            )
            flag.touch()
            assert await probes.check(probe, target()) == Outcome(True)
            named = Probe("Readiness", "grpc", {"port": port, "service": "trainer"})
            assert await probes.check(named, target()) == Outcome(True)
            unknown = await probes.check(Probe("Readiness", "grpc", {"port": port, "service": "x"}), target())
            assert unknown == Outcome(False, "error: health rpc probe failed: grpc-status 5 unknown service")
        closed = free_port()
        refused = await probes.check(Probe("Liveness", "grpc", {"port": closed}), target())
        assert refused.output == (
            f'timeout: failed to connect service "127.0.0.1:{closed}" within 1s: connect: connection refused'
        )

    asyncio.run(scenario())


def test_grpc_against_a_server_without_the_health_service() -> None:
    async def scenario() -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
            conn.initiate_connection()
            writer.write(conn.data_to_send())
            while data := await reader.read(65535):
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.StreamEnded):
                        grpc_health_server.respond(conn, event.stream_id, "/other.Service/Call", b"", "")
                writer.write(conn.data_to_send())
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        async with server:
            result = await probes.check(
                Probe("Liveness", "grpc", {"port": server.sockets[0].getsockname()[1]}), target()
            )
        assert result.output == (
            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): "
            "rpc error: code = Unimplemented desc = unknown method"
        )

    asyncio.run(scenario())
