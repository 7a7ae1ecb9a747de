"""Container probes, run the way the kubelet runs them: startup, liveness and readiness workers.

Each running container with probes gets a ``ContainerProbes``: one worker per probe, ticking every
``periodSeconds`` once ``initialDelaySeconds`` have passed since the container started. A probe
is ``exec`` (the node agent runs the command with the container's environment and mounts),
``httpGet`` (2xx/3xx is success; ``host`` defaults to the pod IP, ``port`` is a number or a named
container port, ``scheme`` HTTP or HTTPS without certificate checks, ``httpHeaders``),
``tcpSocket`` (a connection opens) or ``grpc`` (the standard ``grpc.health.v1.Health/Check`` over
plaintext HTTP/2, ``service`` optional); each attempt gets ``timeoutSeconds``. A result only counts
after ``successThreshold`` successes or ``failureThreshold`` failures in a row.

What the results mean, as in the kubelet: until the startup probe succeeds the container is not
``started`` and the other probes wait; readiness starts False and drives the container's
``ready`` (hence the pod's ``Ready`` condition); a failed liveness or startup probe kills the
container (``Killing`` event) and the pod's restart policy decides what follows. Every failed
attempt is a ``Unhealthy`` Warning event worded like the kubelet's.

The node agent owns processes and status: it passes in a ``Target`` (how to reach the container)
and ``Hooks`` (what to do with results). Nothing here touches the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from trainyard.api.meta import Obj

KINDS = {"startupProbe": "Startup", "livenessProbe": "Liveness", "readinessProbe": "Readiness"}
ACTIONS = ("exec", "httpGet", "tcpSocket", "grpc")
# What the kubelet keeps of an exec probe's output and sends as a probe's User-Agent.
MAX_OUTPUT = 10 * 1024
USER_AGENT = "kube-probe/1.32"


@dataclass(frozen=True)
class Probe:
    kind: str  # Startup, Liveness or Readiness, as events name it
    action: str
    handler: Obj
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3
    # A liveness or startup probe's own grace period for the kill it causes (else the pod's).
    termination_grace: int | None = None


def _positive(spec: Obj, key: str, default: int) -> int:
    value = spec.get(key)
    # The API server defaults a zero or absent field; a negative one it would reject.
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def parse(field_name: str, spec: Obj) -> Probe:
    """A container's ``livenessProbe``/``readinessProbe``/``startupProbe`` with the API's defaults."""
    action = next((a for a in ACTIONS if a in spec), "")
    delay = spec.get("initialDelaySeconds")
    grace = spec.get("terminationGracePeriodSeconds")
    return Probe(
        kind=KINDS[field_name],
        action=action,
        handler=dict(spec.get(action) or {}) if action else {},
        initial_delay=float(delay) if isinstance(delay, int) and delay > 0 else 0.0,
        period=float(_positive(spec, "periodSeconds", 10)),
        timeout=float(_positive(spec, "timeoutSeconds", 1)),
        success_threshold=_positive(spec, "successThreshold", 1),
        failure_threshold=_positive(spec, "failureThreshold", 3),
        termination_grace=grace if isinstance(grace, int) and not isinstance(grace, bool) and grace >= 0 else None,
    )


def probes_of(container: Obj, *, listens: bool = True) -> list[Probe]:
    """The container's probes; its tcpSocket ones only if it ``listens``.

    A container that listens nowhere (the node's sshd stand-in) could not answer them, and in host
    network mode a port such as sshd's 2222 (Trainer's MPI runtimes probe it before their launcher
    starts) could not tell its pods apart anyway: it is ready while it runs.
    """
    found = [parse(name, container[name]) for name in KINDS if isinstance(container.get(name), dict)]
    return [probe for probe in found if listens or probe.action != "tcpSocket"]


@dataclass(frozen=True)
class Outcome:
    ok: bool
    output: str = ""
    # The probe could not be run at all ("probe errored"), as opposed to running and failing.
    errored: bool = False


# Runs an exec probe's argv for at most ``timeout`` seconds: (exit code or None on timeout, output).
Execute = Callable[[list[str], float], Awaitable[tuple[int | None, str]]]


@dataclass(frozen=True)
class Target:
    """How probes reach one container."""

    host: str
    ports: dict[str, int]  # named container ports
    execute: Execute


@dataclass(frozen=True)
class Hooks:
    """What the node agent does with results."""

    changed: Callable[[], Awaitable[None]]  # started or ready flipped: report the pod's status
    event: Callable[[str, str, str], Awaitable[None]]  # type, reason, message
    kill: Callable[[Probe], Awaitable[None]]  # a liveness/startup probe failed for good


class PortError(Exception):
    pass


def resolve_port(port: Any, target: Target) -> int:
    if isinstance(port, bool):
        raise PortError(f"invalid port: {port}")
    if isinstance(port, int):
        number = port
    elif isinstance(port, str) and port.isdigit():
        number = int(port)
    elif isinstance(port, str) and port in target.ports:
        number = target.ports[port]
    else:
        raise PortError(f"couldn't find port: {port} in container")
    if not 0 < number < 65536:
        raise PortError(f"invalid port number: {number}")
    return number


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _dial_error(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connect: connection refused"
    return f"connect: {(exc.strerror or str(exc)).lower()}"


async def check_tcp(probe: Probe, target: Target) -> Outcome:
    host = probe.handler.get("host") or target.host
    try:
        port = resolve_port(probe.handler.get("port"), target)
    except PortError as exc:
        return Outcome(False, str(exc), errored=True)
    address = _host_port(host, port)
    try:
        async with asyncio.timeout(probe.timeout):
            _, writer = await asyncio.open_connection(host, port)
    except TimeoutError:
        return Outcome(False, f"dial tcp {address}: i/o timeout")
    except OSError as exc:
        return Outcome(False, f"dial tcp {address}: {_dial_error(exc)}")
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return Outcome(True)


def _request(host: str, port: int, path: str, headers: list[Obj]) -> bytes:
    fields = {"host": ("Host", _host_port(host, port)), "user-agent": ("User-Agent", USER_AGENT)}
    fields["accept"] = ("Accept", "*/*")
    for header in headers:
        name, value = str(header.get("name") or ""), str(header.get("value") or "")
        if name:
            fields[name.lower()] = (name, value)
    lines = [f"GET {path} HTTP/1.1", *(f"{n}: {v}" for n, v in fields.values()), "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1", errors="replace")


async def check_http(probe: Probe, target: Target) -> Outcome:
    handler = probe.handler
    scheme = str(handler.get("scheme") or "HTTP").upper()
    host = handler.get("host") or target.host
    try:
        port = resolve_port(handler.get("port"), target)
    except PortError as exc:
        return Outcome(False, str(exc), errored=True)
    path = str(handler.get("path") or "/")
    path = path if path.startswith("/") else "/" + path
    url = f"{scheme.lower()}://{_host_port(host, port)}{path}"
    context: ssl.SSLContext | None = None
    if scheme == "HTTPS":
        # The kubelet does not verify a probe's certificate either.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(probe.timeout):
            try:
                reader, writer = await asyncio.open_connection(host, port, ssl=context)
            except OSError as exc:
                return Outcome(False, f'Get "{url}": dial tcp {_host_port(host, port)}: {_dial_error(exc)}')
            try:
                writer.write(_request(host, port, path, handler.get("httpHeaders") or []))
                await writer.drain()
                status_line = await reader.readline()
            finally:
                writer.close()
    except TimeoutError:
        waited = "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        return Outcome(False, f'Get "{url}": {waited}')
    except OSError as exc:
        return Outcome(False, f'Get "{url}": {exc.strerror or exc}')
    parts = status_line.decode("latin-1").split()
    if len(parts) < 2 or not parts[1].isdigit():
        return Outcome(False, f'Get "{url}": malformed HTTP response {status_line[:64]!r}')
    code = int(parts[1])
    if 200 <= code < 400:
        return Outcome(True)
    return Outcome(False, f"HTTP probe failed with statuscode: {code}")


_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
_GRPC_UNIMPLEMENTED = "12"


def _health_request(service: str) -> bytes:
    """A length-prefixed ``grpc.health.v1.HealthCheckRequest`` (field 1: the service name)."""
    name = service.encode()
    payload = b""
    if name:
        length, varint = len(name), bytearray()
        while True:
            byte, length = length & 0x7F, length >> 7
            varint.append(byte | (0x80 if length else 0))
            if not length:
                break
        payload = b"\x0a" + bytes(varint) + name
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


def _health_status(message: bytes) -> int:
    """The ``status`` (field 1, a varint) of a length-prefixed ``HealthCheckResponse``; 0 when absent."""
    payload, i = message[5:], 0
    while i < len(payload):
        tag, i = payload[i], i + 1
        value = shift = 0
        while i < len(payload):
            byte, i = payload[i], i + 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if tag == 0x08:
            return value
    return 0


async def check_grpc(probe: Probe, target: Target) -> Outcome:
    """The gRPC health protocol (``grpc.health.v1.Health/Check``) over plaintext HTTP/2, as the kubelet calls it."""
    host = target.host
    try:
        port = resolve_port(probe.handler.get("port"), target)
    except PortError as exc:
        return Outcome(False, str(exc), errored=True)
    address, within = _host_port(host, port), f"{probe.timeout:g}s"
    try:
        async with asyncio.timeout(probe.timeout):
            reader, writer = await asyncio.open_connection(host, port)
    except TimeoutError:
        return Outcome(
            False, f'timeout: failed to connect service "{address}" within {within}: context deadline exceeded'
        )
    except OSError as exc:
        return Outcome(False, f'timeout: failed to connect service "{address}" within {within}: {_dial_error(exc)}')
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    body, headers = b"", {}
    try:
        async with asyncio.timeout(probe.timeout):
            connection.initiate_connection()
            stream = connection.get_next_available_stream_id()
            connection.send_headers(
                stream,
                [
                    (":method", "POST"),
                    (":scheme", "http"),
                    (":path", "/grpc.health.v1.Health/Check"),
                    (":authority", address),
                    ("content-type", "application/grpc"),
                    ("te", "trailers"),
                    ("user-agent", USER_AGENT),
                ],
            )
            connection.send_data(stream, _health_request(str(probe.handler.get("service") or "")), end_stream=True)
            writer.write(connection.data_to_send())
            ended = False
            while not ended:
                data = await reader.read(65535)
                if not data:
                    raise ConnectionResetError("connection closed")
                for event in connection.receive_data(data):
                    if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                        headers.update({str(k): str(v) for k, v in event.headers})
                    elif isinstance(event, h2.events.DataReceived):
                        body += event.data
                        connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                        ended = True
                writer.write(connection.data_to_send())
    except TimeoutError:
        return Outcome(False, f"timeout: health rpc did not complete within {within}")
    except (OSError, h2.exceptions.ProtocolError) as exc:
        return Outcome(False, f"error: health rpc probe failed: {exc}")
    finally:
        writer.close()
    code = headers.get("grpc-status", "")
    if code == _GRPC_UNIMPLEMENTED:
        detail = headers.get("grpc-message", "unknown service grpc.health.v1.Health")
        return Outcome(
            False,
            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): "
            f"rpc error: code = Unimplemented desc = {detail}",
        )
    if code != "0":
        detail = f"grpc-status {code or 'missing'} {headers.get('grpc-message', '')}".rstrip()
        return Outcome(False, f"error: health rpc probe failed: {detail}")
    status = _health_status(body)
    if status != 1:
        return Outcome(False, f'service unhealthy (responded with "{_HEALTH_STATUS.get(status, str(status))}")')
    return Outcome(True)


async def check_exec(probe: Probe, target: Target) -> Outcome:
    command = [str(a) for a in probe.handler.get("command") or []]
    if not command:
        return Outcome(False, "exec probe has no command", errored=True)
    try:
        code, output = await target.execute(command, probe.timeout)
    except OSError as exc:
        return Outcome(False, f'exec: "{command[0]}": {exc.strerror or exc}', errored=True)
    if code is None:
        # Go's %q, as the kubelet words it.
        return Outcome(False, f"command {json.dumps(' '.join(command))} timed out")
    return Outcome(code == 0, output[-MAX_OUTPUT:].strip())


async def check(probe: Probe, target: Target) -> Outcome:
    if probe.action == "exec":
        return await check_exec(probe, target)
    if probe.action == "httpGet":
        return await check_http(probe, target)
    if probe.action == "tcpSocket":
        return await check_tcp(probe, target)
    if probe.action == "grpc":
        return await check_grpc(probe, target)
    return Outcome(False, "probe has no handler (exec, httpGet, tcpSocket)", errored=True)


@dataclass
class ContainerProbes:
    """The probe workers of one run of one container, and what they concluded so far."""

    probes: list[Probe]
    target: Target
    hooks: Hooks
    started_event: asyncio.Event = field(default_factory=asyncio.Event)
    readiness_ok: bool = False
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not any(p.kind == "Startup" for p in self.probes):
            self.started_event.set()

    @property
    def started(self) -> bool:
        return self.started_event.is_set()

    @property
    def ready(self) -> bool:
        if not self.started:
            return False
        return self.readiness_ok or not any(p.kind == "Readiness" for p in self.probes)

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._work(p), name=f"probe-{p.kind}") for p in self.probes]

    async def stop(self) -> None:
        current = asyncio.current_task()
        tasks = [t for t in self._tasks if t is not current]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _work(self, probe: Probe) -> None:
        await asyncio.sleep(probe.initial_delay)
        successes = failures = 0
        while True:
            if probe.kind != "Startup":
                await self.started_event.wait()
            outcome = await check(probe, self.target)
            if outcome.ok:
                successes, failures = successes + 1, 0
            else:
                successes, failures = 0, failures + 1
                verb = "errored" if outcome.errored else "failed"
                await self.hooks.event("Warning", "Unhealthy", f"{probe.kind} probe {verb}: {outcome.output}")
            if probe.kind == "Startup":
                if successes >= probe.success_threshold:
                    self.started_event.set()
                    await self.hooks.changed()
                    return
                if failures >= probe.failure_threshold:
                    await self.hooks.kill(probe)
                    return
            elif probe.kind == "Liveness":
                if failures >= probe.failure_threshold:
                    await self.hooks.kill(probe)
                    return
            elif not self.readiness_ok and successes >= probe.success_threshold:
                self.readiness_ok = True
                await self.hooks.changed()
            elif self.readiness_ok and failures >= probe.failure_threshold:
                self.readiness_ok = False
                await self.hooks.changed()
            await asyncio.sleep(probe.period)


def killing_message(container: str, probe: Probe, restart_policy: str) -> str:
    """The kubelet's ``Killing`` event for a container a probe failed."""
    message = f"Container {container} failed {probe.kind.lower()} probe"
    return message if restart_policy == "Never" else f"{message}, will be restarted"


def named_ports(container: Obj) -> dict[str, int]:
    return {
        str(p["name"]): int(p["containerPort"])
        for p in container.get("ports") or []
        if isinstance(p, dict) and p.get("name") and isinstance(p.get("containerPort"), int)
    }
