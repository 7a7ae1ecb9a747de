"""The observation store: every metric value collected for each Trial, in SQLite.

Katib keeps its trials' metric logs in a database behind its db-manager; here the operator keeps
them in one SQLite file (the embedded plane's is ``$TRAINYARD_HOME/observations.db``; on a cluster
a volume, or memory, where losing it only means re-reading what the pods still hold). A Trial's
rows are what medianstop compares, its curves what a dashboard draws, and what ends in the Trial's
``status.observation``. Writes are single small transactions in WAL mode (sub-millisecond), so the
controller calls them on its loop.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from trainyard.controller.search import MetricValue

SCHEMA = """
CREATE TABLE IF NOT EXISTS observations (
    namespace TEXT NOT NULL,
    trial TEXT NOT NULL,
    seq INTEGER NOT NULL,
    metric TEXT NOT NULL,
    value REAL NOT NULL,
    timestamp TEXT,
    PRIMARY KEY (namespace, trial, seq)
);
"""


class ObservationStore:
    def __init__(self, path: Path | str | None = None) -> None:
        target = str(path) if path is not None else ":memory:"
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        if path is not None:
            self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

    def values(self, namespace: str, trial: str) -> list[MetricValue]:
        rows = self.db.execute(
            "SELECT metric, value, timestamp FROM observations WHERE namespace=? AND trial=? ORDER BY seq",
            (namespace, trial),
        )
        return [MetricValue(name, value, timestamp) for name, value, timestamp in rows]

    def count(self, namespace: str, trial: str) -> int:
        row = self.db.execute("SELECT COUNT(*) FROM observations WHERE namespace=? AND trial=?", (namespace, trial))
        return int(row.fetchone()[0])

    def replace(self, namespace: str, trial: str, values: Sequence[MetricValue]) -> None:
        """The Trial's whole series, re-read from its source (a log): kept only if it is no shorter,
        since a log read after its pod went holds less than the one before."""
        if len(values) < self.count(namespace, trial):
            return
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute("DELETE FROM observations WHERE namespace=? AND trial=?", (namespace, trial))
            self._insert(namespace, trial, 0, values)

    def append(self, namespace: str, trial: str, values: Sequence[MetricValue]) -> None:
        """Values reported since the last ones (a job's pushed status), after them."""
        with self.db:
            self.db.execute("BEGIN")
            self._insert(namespace, trial, self.count(namespace, trial), values)

    def forget(self, namespace: str, trial: str) -> None:
        self.db.execute("DELETE FROM observations WHERE namespace=? AND trial=?", (namespace, trial))

    def trials(self) -> set[tuple[str, str]]:
        return {(ns, name) for ns, name in self.db.execute("SELECT DISTINCT namespace, trial FROM observations")}

    def close(self) -> None:
        self.db.close()

    def _insert(self, namespace: str, trial: str, start: int, values: Sequence[MetricValue]) -> None:
        self.db.executemany(
            "INSERT INTO observations (namespace, trial, seq, metric, value, timestamp) VALUES (?, ?, ?, ?, ?, ?)",
            [(namespace, trial, start + i, v.name, v.value, v.timestamp) for i, v in enumerate(values)],
        )
