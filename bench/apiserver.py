"""Embedded API server figures: create, get and list latency, and write-to-watch-event latency.

Starts the API server in-process on a temporary home and drives it over HTTP with aiohttp's
client. Prints figures; asserts nothing.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from trainyard.cluster.paths import Layout
from trainyard.cluster.plane import ApiPlane

N = 300


def ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    return (
        f"median {statistics.median(ordered) * 1000:6.2f} ms   p95 {ordered[int(len(ordered) * 0.95)] * 1000:6.2f} ms"
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        plane = ApiPlane(Layout(Path(home)), port=0)
        await plane.start()
        base = f"{plane.url}/api/v1/namespaces/default/configmaps"
        async with aiohttp.ClientSession() as client:
            creates, gets = [], []
            for i in range(N):
                t = time.perf_counter()
                async with client.post(base, json={"metadata": {"name": f"cm-{i}"}, "data": {"k": "v" * 100}}) as r:
                    assert r.status == 201, await r.text()
                creates.append(time.perf_counter() - t)
                t = time.perf_counter()
                async with client.get(f"{base}/cm-{i}") as r:
                    await r.read()
                gets.append(time.perf_counter() - t)
            t = time.perf_counter()
            async with client.get(base) as r:
                listed = await r.json()
            list_s = time.perf_counter() - t
            rv = listed["metadata"]["resourceVersion"]
            latencies = []
            async with client.get(f"{base}?watch=true&resourceVersion={rv}&timeoutSeconds=30") as stream:
                for i in range(50):
                    t = time.perf_counter()
                    body = json.dumps({"data": {"k": str(i)}})
                    headers = {"Content-Type": "application/merge-patch+json"}
                    async with client.patch(f"{base}/cm-{i}", data=body, headers=headers) as r:
                        await r.read()
                    event = json.loads(await stream.content.readline())
                    assert event["type"] == "MODIFIED"
                    latencies.append(time.perf_counter() - t)
        await plane.stop()
    print(f"create            {ms(creates)}")
    print(f"get               {ms(gets)}")
    print(f"list {N} objects  {list_s * 1000:6.2f} ms")
    print(f"patch → watch     {ms(latencies)}")
    print(f"ratio list/get    x{list_s / statistics.median(gets):.1f} for {N} objects")


if __name__ == "__main__":
    asyncio.run(main())
