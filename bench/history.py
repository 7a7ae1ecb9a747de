"""The job history's figures: how fast the store records reports, how fast it answers the dashboard.

1. ``record_job`` throughput: 1,000 PyTorchJobs x 20 reports each (every report a new object, as
   the watch delivers it), written as the recorder writes them (a burst per transaction) and, for
   contrast, one transaction per write.
2. ``rows()`` (the history list, 1,000 rows) and ``detail()`` of one job on a store of 1,000
   finished jobs (20 points, 2 pods, 10 events, a 64 KiB log each).
3. The recorder under a burst: 1,000 jobs appear at once, then each reports 20 times, fed to its
   subscriber as the watches would; the longest the event loop was held (a 10 ms heartbeat's worst
   lateness), the longest a read of the store from the loop waited meanwhile, and how long a report
   took to reach ``on_point`` (the live chart's path); then one report alone, and 1,000 jobs each
   reporting once a second.

Prints figures; asserts nothing. ``--jobs`` and ``--reports`` change the sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lightkube import AsyncClient, KubeConfig

from trainyard.dashboard.history.recorder import Recorder
from trainyard.dashboard.history.store import HistoryStore
from trainyard.dashboard.watching import Change, Watched
from trainyard.embedded import kubeconfig

START = datetime(2026, 1, 1, tzinfo=UTC)


def stamp(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def job(i: int, report: int, *, finished: bool = False) -> dict[str, Any]:
    """Job ``i`` as its ``report``-th status shows it: a PyTorchJob of a master and 2 workers."""
    container = {
        "name": "pytorch",
        "image": "python:3.11",
        "command": ["python3", "train.py", "--epochs", "20"],
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
        "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
    }
    spec = {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [container]}}}
    conditions = [
        {"type": "Created", "status": "True", "reason": "PyTorchJobCreated", "lastTransitionTime": stamp(i)},
        {"type": "Running", "status": "True", "reason": "PyTorchJobRunning", "lastTransitionTime": stamp(i + 1)},
    ]
    if finished:
        conditions[1]["status"] = "False"
        conditions.append(
            {
                "type": "Succeeded",
                "status": "True",
                "reason": "PyTorchJobSucceeded",
                "lastTransitionTime": stamp(i + 99),
            }
        )
    progress = {
        "currentEpoch": report,
        "totalEpochs": 20,
        "progressPercentage": report * 5,
        "metrics": {"loss": 1.0 / (report + 1), "accuracy": report / 20, "lr": 0.001},
        "lastUpdateTime": stamp(i + report * 3),
        "lastCheckpoint": {"path": f"/ckpt/job-{i}/epoch-{report}", "epoch": report, "time": stamp(i + report * 3)},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": f"job-{i}",
            "namespace": "bench",
            "uid": f"00000000-0000-0000-0000-{i:012d}",
            "creationTimestamp": stamp(i),
            "resourceVersion": str(i * 100 + report),
            "labels": {"team": "vision"},
        },
        "spec": {"runPolicy": {"cleanPodPolicy": "None"}, "pytorchReplicaSpecs": {"Master": spec, "Worker": spec}},
        "status": {
            "conditions": conditions,
            "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 1}},
            "trainingProgress": progress,
            "startTime": stamp(i + 1),
        },
    }


def pod(i: int, role: str) -> dict[str, Any]:
    labels = {"training.kubeflow.org/job-name": f"job-{i}", "training.kubeflow.org/replica-type": role}
    return {
        "metadata": {"name": f"job-{i}-{role}-0", "namespace": "bench", "uid": f"pod-{i}-{role}", "labels": labels},
        "spec": {"nodeName": "node-1", "containers": [{"name": "pytorch"}]},
        "status": {"phase": "Succeeded", "startTime": stamp(i), "containerStatuses": [{"name": "pytorch"}]},
    }


def event(i: int, n: int) -> dict[str, Any]:
    return {
        "metadata": {"uid": f"ev-{i}-{n}", "namespace": "bench"},
        "type": "Normal",
        "reason": "SuccessfulCreatePod",
        "message": f"Created pod: job-{i}-worker-{n}",
        "count": 1,
        "lastTimestamp": stamp(i + n),
        "involvedObject": {"kind": "PyTorchJob", "name": f"job-{i}"},
    }


def throughput(home: Path, jobs: int, reports: int) -> None:
    batched = HistoryStore(home / "batched.db", max_jobs=jobs)
    started = time.perf_counter()
    points = 0
    for report in range(1, reports + 1):
        with batched.batch():  # a burst: every job's report of one round
            points += sum(batched.record_job(job(i, report)) is not None for i in range(jobs))
    took = time.perf_counter() - started
    writes = jobs * reports
    print(
        f"record_job, {jobs} jobs x {reports} reports, {jobs} writes a transaction: {took:.2f} s, "
        f"{writes / took:,.0f} writes/s, {points} points"
    )
    single = HistoryStore(home / "single.db", max_jobs=jobs)
    rounds = max(1, reports // 10)
    started = time.perf_counter()
    for report in range(1, rounds + 1):
        for i in range(jobs):
            single.record_job(job(i, report))
    took = time.perf_counter() - started
    print(
        f"record_job, one transaction a write ({jobs * rounds} writes): {took:.2f} s, "
        f"{jobs * rounds / took:,.0f} writes/s"
    )
    batched.close()
    single.close()


def reads(home: Path, jobs: int, reports: int) -> None:
    store = HistoryStore(home / "full.db", max_jobs=jobs)
    log = b"".join(b"epoch 3 step %06d loss 0.1234 accuracy 0.9876 lr 0.001\n" % n for n in range(1200))[: 64 << 10]
    for i in range(jobs):
        with store.batch():
            for report in range(1, reports + 1):
                store.record_job(job(i, report, finished=report == reports))
            for role in ("master", "worker"):
                store.record_pod(job(i, 0)["metadata"]["uid"], pod(i, role))
                store.record_log(job(i, 0)["metadata"]["uid"], f"job-{i}-{role}-0", "pytorch", log)
            for n in range(10):
                store.record_event(job(i, 0)["metadata"]["uid"], event(i, n))
    size = (home / "full.db").stat().st_size + (home / "full.db-wal").stat().st_size
    print(f"a store of {jobs} finished jobs: {size / 1e6:.0f} MB")
    for what, call in (
        (f"rows(limit={jobs})", lambda: store.rows(limit=jobs)),
        ("rows() (200)", lambda: store.rows()),
        ("rows(namespace=bench, kind=PyTorchJob)", lambda: store.rows(namespace="bench", kind="PyTorchJob")),
        ("detail(uid)", lambda: store.detail(job(jobs // 2, 0)["metadata"]["uid"])),
        ("points(uid)", lambda: store.points(job(jobs // 2, 0)["metadata"]["uid"])),
    ):
        times = []
        for _ in range(5):
            started = time.perf_counter()
            call()
            times.append(time.perf_counter() - started)
        print(f"{what}: median {statistics.median(times) * 1000:.1f} ms, worst {max(times) * 1000:.1f} ms")
    started = time.perf_counter()
    pruned = store.prune(START + timedelta(days=400))
    print(f"prune of {pruned} jobs (all too old): {(time.perf_counter() - started) * 1000:.0f} ms")
    store.close()


async def burst(home: Path, jobs: int, reports: int) -> None:
    store = HistoryStore(home / "recorder.db", max_jobs=jobs)
    # Never called: no watch runs here, the changes are handed to the subscriber directly.
    client = AsyncClient(KubeConfig.from_dict(kubeconfig("http://127.0.0.1:9")))
    watched = Watched(client)
    recorder = Recorder(client, watched, store, clock=lambda: START)
    sent: dict[tuple[str, int], float] = {}
    delays: list[float] = []
    written = asyncio.Event()

    def told(into: list[float], expected: int) -> Callable[[str, dict[str, Any]], None]:
        def listen(uid: str, point: dict[str, Any]) -> None:
            into.append(time.perf_counter() - sent[(uid, point["epoch"])])
            if len(into) >= expected:
                written.set()

        return listen

    recorder.on_point.append(told(delays, jobs * reports))
    lateness: list[float] = []

    async def heartbeat() -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            lateness.append(time.perf_counter() - before - 0.01)

    rounds = [[job(i, report) for i in range(jobs)] for report in range(1, reports + 1)]  # built before the clock
    # As the plane does once started (gctuning.settle): what exists now is never collected again, so
    # a full collection over these 20,000 objects does not count as the recorder's pause.
    gc.collect()
    gc.freeze()
    waits: list[float] = []

    async def reader() -> None:
        # A dashboard request reading the store from the loop while the writer writes.
        while True:
            before = time.perf_counter()
            store.points(rounds[0][0]["metadata"]["uid"])
            waits.append(time.perf_counter() - before)
            await asyncio.sleep(0.02)

    writer = asyncio.create_task(recorder.run())
    beat = asyncio.create_task(heartbeat())
    read = asyncio.create_task(reader())
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    for report, objs in enumerate(rounds, start=1):
        for obj in objs:
            uid = obj["metadata"]["uid"]
            sent[(uid, report)] = time.perf_counter()
            for subscriber in watched.subscribers:
                subscriber(Change("job", "ADDED" if report == 1 else "MODIFIED", obj, uid))
        await asyncio.sleep(0)  # the watch hands over a burst of events, then the loop runs on
    await written.wait()
    took = time.perf_counter() - started
    for task in (beat, writer, read):
        task.cancel()
    await asyncio.gather(beat, writer, read, return_exceptions=True)
    await client.close()
    delays.sort()
    print(
        f"recorder, {jobs} jobs x {reports} reports fed at once: all written in {took:.2f} s; the loop held at "
        f"most {max(lateness) * 1000:.0f} ms (median lateness {statistics.median(lateness) * 1000:.1f} ms)"
    )
    print(f"a read from the loop meanwhile (the points of one job): worst {max(waits) * 1000:.0f} ms")
    print(
        f"report to on_point: median {delays[len(delays) // 2] * 1000:.0f} ms, "
        f"p99 {delays[int(len(delays) * 0.99)] * 1000:.0f} ms, worst {delays[-1] * 1000:.0f} ms (all at once)"
    )
    # One report alone, as a live job's: what an open chart waits.
    alone: list[float] = []
    watched.subscribers.clear()
    recorder = Recorder(client, watched, store, clock=lambda: START)
    writer = asyncio.create_task(recorder.run())
    for report in range(reports + 1, reports + 11):
        obj = job(0, report)
        written.clear()
        recorder.on_point[:] = [told(alone, report - reports)]
        sent[(obj["metadata"]["uid"], report)] = time.perf_counter()
        for subscriber in watched.subscribers:
            subscriber(Change("job", "MODIFIED", obj, obj["metadata"]["uid"]))
        await written.wait()
    print(
        f"one report alone to on_point: median {statistics.median(alone) * 1000:.0f} ms, "
        f"worst {max(alone) * 1000:.0f} ms"
    )
    # Steady work: every job reports once a second (1,000 reports a second), for 5 seconds.
    steady: list[float] = []
    written.clear()
    recorder.on_point[:] = [told(steady, jobs * 5)]
    base = reports + 20
    for second in range(5):
        for tick in range(10):
            for i in range(tick * jobs // 10, (tick + 1) * jobs // 10):
                obj = job(i, base + second)
                sent[(obj["metadata"]["uid"], base + second)] = time.perf_counter()
                for subscriber in watched.subscribers:
                    subscriber(Change("job", "MODIFIED", obj, obj["metadata"]["uid"]))
            await asyncio.sleep(0.1)
    await written.wait()
    steady.sort()
    print(
        f"{jobs} jobs reporting once a second, report to on_point: median {steady[len(steady) // 2] * 1000:.0f} ms, "
        f"p99 {steady[int(len(steady) * 0.99)] * 1000:.0f} ms, worst {steady[-1] * 1000:.0f} ms"
    )
    writer.cancel()
    await asyncio.gather(writer, return_exceptions=True)
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--reports", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yard-history-bench-") as tmp:
        home = Path(tmp)
        throughput(home, args.jobs, args.reports)
        reads(home, args.jobs, args.reports)
        asyncio.run(burst(home, args.jobs, args.reports))


if __name__ == "__main__":
    main()
