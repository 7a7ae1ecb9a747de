"""What one request of the plane's own components costs: the CPU of a lightkube call served in-process.

A sweep of jobs (``jobs.py``) is about 47 API requests a job, most of them sent by the plane's own
scheduler, node agent and operator through ``cluster.apiserver.loopback``: their cost is most of
the plane's CPU per job. This runs an ``ApiPlane`` in this process, a ``trainyard.client.transport.Client``
routed to it as the plane routes its components', and times three requests those components send
most: an Event create, a pod status merge patch, a GET of one pod. Each is sent ``--count`` times
per round, on distinct pods, for three rounds; the least CPU of the three rounds is reported, per
request (client and server together: building the request, httpx, admission, managedFields, the
SQLite commit, decoding the answer). The client is routed as the plane routes its components'
(through ``Loopback.call`` without httpx, where the sources have ``Client.direct``). Prints
figures; asserts nothing.

Before/after: ``PYTHONPATH=/tmp/base/src ../.venv/bin/python request_cost.py`` runs an export of another
checkout's sources (``git archive <rev> src | tar -x -C /tmp/base``).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import yaml
from lightkube import KubeConfig
from lightkube.resources.core_v1 import Pod, PodStatus
from lightkube.types import PatchType

import trainyard
from trainyard.client.events import record_event
from trainyard.client.resources import build
from trainyard.client.transport import Client, wrap_transports

try:
    from trainyard.client.transport import route_directly
except ImportError:  # sources from before Client.direct: their plane sent everything through httpx
    route_directly = None  # type: ignore[assignment]
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.plane import ApiPlane
from trainyard.embedded import kubeconfig

ROUNDS = 3


async def least_cpu(count: int, send: Callable[[int, int], Awaitable[object]]) -> float:
    """The least CPU seconds per request over ``ROUNDS`` rounds of ``count`` requests each."""
    best = float("inf")
    for round_ in range(ROUNDS):
        started = time.process_time()
        for i in range(count):
            await send(round_, i)
        best = min(best, (time.process_time() - started) / count)
    return best


async def run(count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="yard-requests-bench-") as home:
        plane = ApiPlane(Layout(Path(home)), port=0, secure=True)
        await plane.start()
        assert plane.credentials is not None
        config = KubeConfig.from_dict(yaml.safe_load(yaml.safe_dump(kubeconfig(plane.url, plane.credentials))))
        client = Client(config, field_manager="bench")
        wrap_transports(client, plane.loopback.transport, watches=True)
        if route_directly is not None:
            route_directly(client, plane.loopback.call)
        try:
            container = {"name": "c", "image": "busybox", "command": ["true"]}
            for i in range(count):
                pod = {"metadata": {"name": f"p{i}", "namespace": "default"}, "spec": {"containers": [container]}}
                await client.create(build(Pod, pod))
            involved = {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "p0", "uid": "u"}

            async def event(round_: int, i: int) -> None:
                message, now = f"round {round_}, event {i}", "2026-11-26T00:00:00Z"
                kind = {"type_": "Normal", "reason": "Started", "component": "bench"}
                await record_event(client, involved, message=message, now=now, **kind)

            async def status(round_: int, i: int) -> object:
                ready = {"type": "Ready", "status": "True" if round_ % 2 else "False"}
                patch = {"status": {"phase": "Running", "conditions": [ready]}}
                return await client.patch(PodStatus, f"p{i}", patch, namespace="default", patch_type=PatchType.MERGE)

            async def get(round_: int, i: int) -> object:
                return await client.get(Pod, f"p{i}", namespace="default")

            return {
                "Event create": await least_cpu(count, event),
                "pod status merge patch": await least_cpu(count, status),
                "pod GET": await least_cpu(count, get),
            }
        finally:
            await client.close()
            await plane.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=500, help="requests of each kind per round")
    args = parser.parse_args()
    print(f"trainyard per-request benchmark; sources: {Path(trainyard.__file__).parent.parent}")
    for what, seconds in asyncio.run(run(args.count)).items():
        print(f"   {what:<24} {seconds * 1000:.3f} ms of CPU")


if __name__ == "__main__":
    main()
