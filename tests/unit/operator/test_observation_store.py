"""The observation store: a Trial's series replaced from a re-read log, appended from pushed reports."""

from __future__ import annotations

from pathlib import Path

from trainyard.controller.search import MetricValue
from trainyard.operator.observations import ObservationStore


def test_replace_keeps_the_longer_series_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "observations.db"
    store = ObservationStore(path)
    series = [MetricValue("loss", 1.0), MetricValue("loss", 0.5, "2026-12-03T12:00:00Z")]
    store.replace("ns", "t1", series)
    store.replace("ns", "t1", series[:1])  # a log read after the pod went: shorter, ignored
    store.close()
    again = ObservationStore(path)
    assert again.values("ns", "t1") == series
    assert again.values("ns", "t2") == []


def test_append_and_forget() -> None:
    store = ObservationStore()
    store.append("ns", "t1", [MetricValue("loss", 2.0, "a")])
    store.append("ns", "t1", [MetricValue("loss", 1.0, "b"), MetricValue("accuracy", 0.5, "b")])
    assert [(v.name, v.value) for v in store.values("ns", "t1")] == [("loss", 2.0), ("loss", 1.0), ("accuracy", 0.5)]
    assert store.trials() == {("ns", "t1")}
    store.forget("ns", "t1")
    assert store.values("ns", "t1") == []
