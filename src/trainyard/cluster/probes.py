"""Container probes, run the way the kubelet runs them: startup, liveness and readiness workers.

Each running container with probes gets a ``ContainerProbes``: one worker per probe, ticking every
``periodSeconds`` once ``initialDelaySeconds`` have passed since the container started. A probe
is ``exec`` (the node agent runs the command with the container's environment and mounts),
``httpGet`` (2xx/3xx is success; ``host`` defaults to the pod IP, ``port`` is a number or a named
container port, ``scheme`` HTTP or HTTPS without certificate checks, ``httpHeaders``) or
``tcpSocket`` (a connection opens); each attempt gets ``timeoutSeconds``. A result only counts
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

Obj = dict[str, Any]

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


def probes_of(container: Obj) -> list[Probe]:
    return [parse(name, container[name]) for name in KINDS if isinstance(container.get(name), dict)]


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
        return Outcome(False, "grpc probes are not supported by the local node", errored=True)
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
