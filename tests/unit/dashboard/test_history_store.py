"""The history store on a real SQLite file: points kept once per report, the tail of a log cut at a
line, pruning by age and by count (never a running job), deleted jobs in the history list, and the
HistoryDetail the dashboard serves."""

from __future__ import annotations

import sqlite3
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from trainyard.dashboard.history.store import SCHEMA_VERSION, HistoryError, HistoryStore, tail

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def stamp(minutes: float) -> str:
    return (NOW + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pytorchjob(
    uid: str,
    *,
    name: str | None = None,
    namespace: str = "default",
    epoch: int | None = None,
    loss: float | None = None,
    updated: float = 0,
    checkpoint: str | None = None,
    finished: float | None = None,
) -> dict[str, Any]:
    conditions = [{"type": "Created", "status": "True", "lastTransitionTime": stamp(-60)}]
    conditions.append({"type": "Running", "status": "False" if finished is not None else "True"})
    if finished is not None:
        conditions.append({"type": "Succeeded", "status": "True", "lastTransitionTime": stamp(finished)})
    status: dict[str, Any] = {"conditions": conditions}
    if epoch is not None:
        progress: dict[str, Any] = {"currentEpoch": epoch, "totalEpochs": 10, "lastUpdateTime": stamp(updated)}
        if loss is not None:
            progress["metrics"] = {"loss": loss, "phase": "train"}
        if checkpoint is not None:
            progress["lastCheckpoint"] = {"path": checkpoint, "epoch": epoch, "time": stamp(updated)}
        status["trainingProgress"] = progress
    container = {"name": "pytorch", "image": "python:3.11", "command": ["true"]}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name or uid, "namespace": namespace, "uid": uid, "creationTimestamp": stamp(-60)},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}}}},
        "status": status,
    }


@pytest.fixture
def store(tmp_path: Path) -> HistoryStore:
    return HistoryStore(tmp_path / "home" / "history.db", max_jobs=3, max_age=timedelta(days=1), log_bytes=64)


def test_the_file_is_the_owners_alone_and_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    HistoryStore(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    with pytest.raises(HistoryError, match=r"newer trainyard .* upgrade trainyard, or move the file away"):
        HistoryStore(path)


def test_a_report_is_one_point_however_often_the_job_is_seen_with_it(store: HistoryStore) -> None:
    assert store.record_job(pytorchjob("a")) is None  # no report yet
    first = store.record_job(pytorchjob("a", epoch=1, loss=0.9, updated=1))
    assert first == {"time": stamp(1), "step": None, "epoch": 1, "metrics": {"loss": 0.9}}
    assert store.record_job(pytorchjob("a", epoch=1, loss=0.9, updated=1)) is None
    assert store.record_job(pytorchjob("a", epoch=2, loss=0.5, updated=2)) is not None
    assert store.record_job(pytorchjob("a", epoch=2, loss=0.5, updated=2)) is None
    assert [p["metrics"]["loss"] for p in store.points("a")] == [0.9, 0.5]
    # A store opened again on the file knows the last point: the same report is still not new.
    again = HistoryStore(store.path)
    assert again.record_job(pytorchjob("a", epoch=2, loss=0.5, updated=2)) is None
    assert len(again.points("a")) == 2


def test_checkpoints_are_kept_once_each_latest_first(store: HistoryStore) -> None:
    for epoch, path in ((1, "/ck/1"), (2, "/ck/2"), (2, "/ck/2")):
        store.record_job(pytorchjob("a", epoch=epoch, loss=1.0 / epoch, updated=epoch, checkpoint=path))
    assert [c["path"] for c in store.checkpoints("a")] == ["/ck/2", "/ck/1"]
    assert store.checkpoints("a")[0] == {"path": "/ck/2", "epoch": 2, "time": stamp(2)}


def test_a_log_keeps_its_last_bytes_from_a_line_start(store: HistoryStore) -> None:
    store.record_job(pytorchjob("a"))
    lines = b"".join(b"line %03d of the training log\n" % i for i in range(20))  # 28 bytes each
    store.record_log("a", "a-master-0", "pytorch", lines)
    kept = store.log("a", "a-master-0", "pytorch")
    assert kept == b"line 018 of the training log\nline 019 of the training log\n"
    assert store.log("a", "a-master-0", "other") is None
    # One line longer than the limit: its end, since no line starts in it.
    store.record_log("a", "a-master-0", "pytorch", b"x" * 100)
    assert store.log("a", "a-master-0", "pytorch") == b"x" * 64
    # Nothing is kept for a job never recorded.
    store.record_log("nobody", "p", "c", b"hello\n")
    assert store.log("nobody", "p", "c") is None


@pytest.mark.parametrize(
    ("data", "limit", "kept"),
    [
        (b"abc\n", 10, b"abc\n"),
        (b"aaaa\nbbbb\n", 5, b"bbbb\n"),  # the cut falls on a line start
        (b"aaaa\nbbbb\n", 6, b"bbbb\n"),
        (b"aaaa\nbbbb", 3, b"bbb"),  # no line starts in the tail
        (b"abc", 0, b""),
    ],
    ids=["short", "at-a-line-start", "mid-line", "no-line-start", "nothing"],
)
def test_tail(data: bytes, limit: int, kept: bytes) -> None:
    assert tail(data, limit) == kept


def test_the_history_lists_finished_and_deleted_jobs_latest_first(store: HistoryStore) -> None:
    store.record_job(pytorchjob("running", epoch=1, loss=0.5, updated=1))
    store.record_job(pytorchjob("early", finished=1))
    store.record_job(pytorchjob("late", namespace="other", finished=5))
    store.mark_deleted(pytorchjob("gone", epoch=3, loss=0.1, updated=2), stamp(3))
    rows = store.rows()
    assert [r["uid"] for r in rows] == ["late", "gone", "early"]
    gone = rows[1]
    assert gone["deleted"] == stamp(3) and gone["finished"] is None and gone["eta"] is None
    assert gone["epoch"] == 3 and gone["kind"] == "PyTorchJob" and gone["plural"] == "pytorchjobs"
    assert rows[0]["state"] == "Succeeded" and rows[0]["finished"] == stamp(5)
    assert [r["uid"] for r in store.rows(namespace="other")] == ["late"]
    assert [r["uid"] for r in store.rows(kind="TFJob")] == []
    assert [r["uid"] for r in store.rows(limit=1)] == ["late"]
    assert sorted(store.live_uids()) == ["early", "late", "running"]
    assert store.points("gone")[0]["metrics"] == {"loss": 0.1}  # the final object's report is kept


def test_pruning_drops_what_ended_too_long_ago_and_beyond_the_newest_and_all_of_it(store: HistoryStore) -> None:
    with store.batch():
        for i in range(5):
            uid = f"done-{i}"
            store.record_job(pytorchjob(uid, epoch=1, loss=0.5, updated=i, checkpoint="/ck", finished=i))
            store.record_pod(uid, {"metadata": {"name": f"{uid}-master-0"}, "spec": {}, "status": {}})
            store.record_event(uid, {"metadata": {"uid": f"ev-{uid}"}, "reason": "Created"})
            store.record_log(uid, f"{uid}-master-0", "pytorch", b"hello\n")
        store.record_job(pytorchjob("ancient", finished=-3 * 24 * 60))
        store.record_job(pytorchjob("running", epoch=1, loss=0.5, updated=-10 * 24 * 60))
    assert store.prune(NOW) == 3  # ancient (age), done-0 and done-1 (count: 3 kept)
    assert [r["uid"] for r in store.rows()] == ["done-4", "done-3", "done-2"]
    assert store.job("running") is not None and store.job("ancient") is None
    assert store.detail("done-0") is None and store.points("done-0") == [] and store.checkpoints("done-0") == []
    assert store.log("done-0", "done-0-master-0", "pytorch") is None
    with sqlite3.connect(store.path) as db:
        for table in ("points", "checkpoints", "events", "pods", "logs"):
            uids = {r[0] for r in db.execute(f"SELECT DISTINCT uid FROM {table}")}
            assert uids <= {"done-2", "done-3", "done-4", "running"}, table
    assert store.prune(NOW) == 0
    # A pruned job's report is new again if the job comes back (its cache went with it).
    assert store.record_job(pytorchjob("done-0", epoch=1, loss=0.5, updated=0, finished=0)) is not None


def test_a_batch_that_fails_writes_nothing(store: HistoryStore) -> None:
    with pytest.raises(RuntimeError), store.batch():
        store.record_job(pytorchjob("a", epoch=1, loss=0.5, updated=1))
        raise RuntimeError("stop")
    assert store.job("a") is None
    assert store.record_job(pytorchjob("a", epoch=1, loss=0.5, updated=1)) is not None


def test_the_detail_has_every_part_of_a_history_detail(store: HistoryStore) -> None:
    job = pytorchjob("a", epoch=2, loss=0.5, updated=2, checkpoint="/ck/2", finished=3)
    store.record_job(pytorchjob("a", epoch=1, loss=0.9, updated=1, checkpoint="/ck/1"))
    store.record_job(job)
    labels = {"training.kubeflow.org/replica-type": "master"}
    pod = {
        "metadata": {"name": "a-master-0", "labels": labels},
        "spec": {"nodeName": "n1", "containers": [{"name": "pytorch"}]},
        "status": {"phase": "Succeeded", "containerStatuses": [{"name": "pytorch", "restartCount": 1}]},
    }
    store.record_pod("a", {**pod, "status": {"phase": "Running"}})
    store.record_pod("a", pod)  # the last seen of the same pod replaces the first
    involved = {"kind": "Pod", "name": "a-master-0"}
    event = {"metadata": {"uid": "e1"}, "type": "Normal", "reason": "Started", "involvedObject": involved}
    store.record_event("a", {**event, "count": 1, "lastTimestamp": stamp(1)})
    store.record_event("a", {**event, "count": 2, "lastTimestamp": stamp(2)})
    store.record_log("a", "a-master-0", "pytorch", b"done\n")
    detail = store.detail("a")
    assert detail is not None
    assert set(detail) == {"row", "yaml", "conditions", "replicas", "events", "checkpoints", "metrics", "logs"}
    assert detail["row"]["uid"] == "a" and detail["row"]["state"] == "Succeeded"
    assert "name: a\n" in detail["yaml"]
    assert [c["type"] for c in detail["conditions"]][-1] == "Succeeded"
    assert detail["replicas"] == [
        {
            "type": "master",
            "pods": [
                {
                    "name": "a-master-0",
                    "phase": "Succeeded",
                    "node": "n1",
                    "restarts": 1,
                    "ready": False,
                    "containers": ["pytorch"],
                    "started": None,
                    "reason": None,
                }
            ],
        }
    ]
    assert [(e["reason"], e["count"], e["object"]) for e in detail["events"]] == [("Started", 2, "Pod/a-master-0")]
    assert [c["path"] for c in detail["checkpoints"]] == ["/ck/2", "/ck/1"]
    assert [p["epoch"] for p in detail["metrics"]] == [1, 2]
    assert detail["logs"] == [{"pod": "a-master-0", "container": "pytorch", "bytes": 5}]
    assert store.detail("missing") is None


def test_a_report_without_its_own_time_is_stamped_when_seen_and_kept_once(store: HistoryStore) -> None:
    # seed 004's TrainingJob: a flat status, no time on the report
    job = {
        "apiVersion": "ml.example.com/v1",
        "kind": "TrainingJob",
        "metadata": {"name": "flat", "namespace": "default", "uid": "flat", "creationTimestamp": stamp(-60)},
        "spec": {},
        "status": {"progress": "30%", "currentEpoch": 3, "totalEpochs": 10, "metrics": {"loss": 0.5}},
    }
    assert store.record_job(job) is None, "without a time there is no point to draw"
    first = store.record_job(job, stamp(1))
    assert first == {"time": stamp(1), "step": None, "epoch": 3, "metrics": {"loss": 0.5}}
    assert store.record_job(job, stamp(2)) is None, "seen again later, the same report"
    job["status"] = {**job["status"], "currentEpoch": 4, "metrics": {"loss": 0.4}}
    assert store.record_job(job, stamp(3)) == {"time": stamp(3), "step": None, "epoch": 4, "metrics": {"loss": 0.4}}
    assert [p["epoch"] for p in store.points("flat")] == [3, 4]
