from __future__ import annotations

import sys
import threading

import pytest

from trainyard.runtime import reporting
from trainyard.runtime.env import global_rank
from trainyard.runtime.reporting import Reporter, Snapshot, estimate_remaining, fraction_done


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ListSink:
    def __init__(self) -> None:
        self.sent: list[Snapshot] = []

    def send(self, snapshot: Snapshot, timeout: float) -> None:
        self.sent.append(snapshot)


class RaisingSink:
    def __init__(self) -> None:
        self.calls = 0

    def send(self, snapshot: Snapshot, timeout: float) -> None:
        self.calls += 1
        raise ConnectionRefusedError("control plane unreachable")


class HangingSink:
    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def send(self, snapshot: Snapshot, timeout: float) -> None:
        self.entered.set()
        self.release.wait()


def make(sink: object, clock: Clock, **kwargs: object) -> Reporter:
    return Reporter(sink, clock=clock, wall=lambda: 1_700_000_000.0, start=False, **kwargs)  # type: ignore[arg-type]


def test_at_most_one_send_per_interval_with_the_latest_values() -> None:
    clock, sink = Clock(), ListSink()
    reporter = make(sink, clock, interval=1.0)
    reporter.report(step=1, total_steps=100, metrics={"loss": 2.0})
    assert reporter.pump()
    for step in range(2, 50):
        reporter.report(step=step, metrics={"loss": 2.0 / step})
        assert not reporter.pump()  # the clock has not moved: rate limited
    clock.now += 0.99
    assert not reporter.pump()
    clock.now += 0.01
    assert reporter.pump()
    assert [s.step for s in sink.sent] == [1, 49]
    assert sink.sent[-1].metrics == {"loss": 2.0 / 49}
    assert not reporter.pump()  # nothing new
    clock.now += 5
    assert not reporter.pump()


def test_fields_left_out_keep_their_values_and_metrics_merge() -> None:
    clock, sink = Clock(), ListSink()
    reporter = make(sink, clock)
    reporter.report(epoch=1, total_epochs=10, metrics={"loss": 1.0})
    reporter.report(metrics={"accuracy": 0.5})
    reporter.checkpoint_saved("/ckpt/checkpoint-00000002.ckpt", epoch=2)
    reporter.pump()
    snap = sink.sent[0]
    assert (snap.epoch, snap.total_epochs) == (2, 10)
    assert snap.metrics == {"loss": 1.0, "accuracy": 0.5}
    assert snap.checkpoint is not None
    assert snap.checkpoint.path == "/ckpt/checkpoint-00000002.ckpt"
    assert snap.checkpoint.epoch == 2


def test_flush_sends_inside_the_interval() -> None:
    clock, sink = Clock(), ListSink()
    reporter = make(sink, clock)
    reporter.report(epoch=1, total_epochs=4)
    reporter.pump()
    reporter.report(epoch=2)
    assert not reporter.pump()
    assert reporter.flush(timeout=1)
    assert [s.epoch for s in sink.sent] == [1, 2]


def test_a_raising_sink_drops_updates_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    clock, sink = Clock(), RaisingSink()
    reporter = make(sink, clock)
    for i in range(3):
        reporter.report(step=i, total_steps=10)
        clock.now += 2
        assert reporter.pump()
    assert (sink.calls, reporter.dropped, reporter.sent) == (3, 3, 0)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "unreachable" in warnings[0].getMessage()


def test_a_hanging_sink_never_blocks_report() -> None:
    sink = HangingSink()
    reporter = Reporter(sink, interval=0.0)  # a real sender thread
    reporter.report(step=0, total_steps=10)
    assert sink.entered.wait(5)  # the sender is now stuck inside the sink
    calls = 0
    for step in range(1, 10_001):
        reporter.report(step=step, metrics={"loss": 1.0 / step})
        calls += 1
    assert calls == 10_000  # every call returned while the sink hangs
    assert reporter.flush(timeout=0.05) is False  # flush is bounded too
    sink.release.set()
    assert reporter.flush(timeout=5)
    reporter.close(timeout=1)


def test_the_sender_thread_delivers() -> None:
    sink = ListSink()
    reporter = Reporter(sink, interval=0.01)
    reporter.report(epoch=3, total_epochs=3, metrics={"accuracy": 0.9})
    assert reporter.flush(timeout=5)
    assert sink.sent[-1].progress_percentage == 100
    reporter.close()


def test_a_disabled_reporter_stores_nothing() -> None:
    sink = ListSink()
    reporter = make(sink, Clock(), enabled=False)
    reporter.report(step=1, total_steps=2)
    assert not reporter.pump()
    assert reporter.flush()
    assert sink.sent == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((None, None, None, None), None),
        ((3, 10, None, None), 0.3),
        ((3, 10, 50, 200), 0.25),  # steps win when both are known
        ((3, None, 50, None), None),
        ((12, 10, None, None), 1.0),
        ((None, None, 5, 0), None),
    ],
)
def test_fraction_done(args: tuple[int | None, ...], expected: float | None) -> None:
    assert fraction_done(*args) == expected


@pytest.mark.parametrize(
    ("fraction", "baseline", "elapsed", "expected"),
    [
        (0.25, 0.0, 100.0, 300),
        (0.8, 0.6, 20.0, 20),  # resumed at 60 %: only the progress since then counts
        (0.5, 0.5, 10.0, None),  # no progress yet
        (1.0, 0.0, 10.0, 0),
        (None, 0.0, 10.0, None),
        (0.5, 0.0, 0.0, None),
    ],
)
def test_estimate_remaining(
    fraction: float | None, baseline: float | None, elapsed: float, expected: int | None
) -> None:
    assert estimate_remaining(fraction, baseline, elapsed) == expected


def test_snapshot_progress_and_eta_from_the_clock() -> None:
    clock, sink = Clock(), ListSink()
    reporter = make(sink, clock)
    reporter.report(epoch=2, total_epochs=10)
    reporter.pump()
    clock.now += 60
    reporter.report(epoch=4)
    reporter.pump()
    first, second = sink.sent
    assert (first.progress_percentage, first.estimated_remaining_seconds) == (20, None)
    assert (second.progress_percentage, second.estimated_remaining_seconds) == (40, 180)


@pytest.mark.parametrize(
    ("environ", "rank"),
    [
        ({}, 0),
        ({"RANK": "3"}, 3),
        ({"RANK": "0", "OMPI_COMM_WORLD_RANK": "2"}, 0),
        ({"PET_NODE_RANK": "1", "PET_NPROC_PER_NODE": "4", "LOCAL_RANK": "2"}, 6),
        ({"PET_NODE_RANK": "0", "PET_NPROC_PER_NODE": "auto", "LOCAL_RANK": "0"}, 0),
        ({"PET_NODE_RANK": "0", "PET_NPROC_PER_NODE": "auto", "LOCAL_RANK": "1"}, 1),
        ({"OMPI_COMM_WORLD_RANK": "5"}, 5),
        ({"JAX_PROCESS_ID": "1"}, 1),
        ({"DMLC_TASK_ID": "2"}, 2),
        ({"RANK": "x"}, 0),
    ],
)
def test_global_rank(environ: dict[str, str], rank: int) -> None:
    assert global_rank(environ) == rank


def test_module_level_report_only_on_rank_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reporting, "_default", None)  # restored after the test
    sink = ListSink()
    monkeypatch.setenv("RANK", "1")
    reporter = reporting.configure(sink, start=False)
    reporting.report(step=1, total_steps=2)
    assert not reporter.enabled
    assert reporting.flush()
    assert sink.sent == []
    monkeypatch.setenv("RANK", "0")
    reporter = reporting.configure(sink, start=False)
    reporting.report(step=1, total_steps=2)
    reporting.checkpoint_saved("/c/1", epoch=1)
    assert reporting.flush()
    assert sink.sent[-1].progress_percentage == 50
    monkeypatch.setenv("RANK", "1")
    reporter = reporting.configure(sink, start=False, all_ranks=True)
    assert reporter.enabled


def test_module_level_report_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reporting, "_default", None)
    reporting.configure(ListSink(), start=False)
    reporting.report(metrics=42)  # type: ignore[arg-type]
    reporting.checkpoint_saved(object())  # type: ignore[arg-type]


class HistorySink(ListSink):
    wants_history = True

    def __init__(self) -> None:
        super().__init__()
        self.closed: list[str] = []

    def close(self, timeout: float) -> None:
        self.closed.append(threading.current_thread().name)


def test_a_history_sink_gets_every_epoch_boundary_once_however_rate_limited() -> None:
    clock, history, latest = Clock(), HistorySink(), ListSink()
    reporter = make([latest, history], clock)
    for epoch in range(1, 6):
        for step in range(3):
            # step-level reports naming the current epoch are no boundary
            reporter.report(epoch=epoch - 1, step=step, metrics={"batch_loss": float(step)})
        reporter.report(epoch=epoch, total_epochs=5, metrics={"loss": 1.0 / epoch})
        reporter.pump()
    assert reporter.flush()
    assert [len(s.epochs) for s in history.sent] == [2, 4]  # epochs 0-1 at the first pump, 2-5 at flush
    records = [record for snapshot in history.sent for record in snapshot.epochs]
    assert [r.epoch for r in records] == [0, 1, 2, 3, 4, 5]
    assert records[0].metrics == {"batch_loss": 0.0}  # as they stood when epoch 0 was first named
    assert records[3].metrics == {"batch_loss": 2.0, "loss": 1.0 / 3}
    assert records[3].time == 1_700_000_000.0
    assert [s.epoch for s in latest.sent] == [s.epoch for s in history.sent] == [1, 5]
    assert [s.epochs for s in latest.sent] == [(), ()]  # a status sink wants no history
    assert reporter.flush()
    assert len(history.sent) == 2  # nothing new


def test_history_is_bounded_and_counts_what_it_dropped() -> None:
    history = HistorySink()
    reporter = make(history, Clock(), history_limit=3)
    for epoch in range(5):
        reporter.report(epoch=epoch, metrics={"loss": float(epoch)})
    reporter.pump()
    assert [r.epoch for r in history.sent[0].epochs] == [2, 3, 4]
    assert reporter.history_dropped == 2


def test_without_a_history_sink_no_history_is_kept() -> None:
    sink = ListSink()
    reporter = make(sink, Clock())
    reporter.report(epoch=1, metrics={"loss": 1.0})
    reporter.report(epoch=2, metrics={"loss": 0.5})
    reporter.pump()
    assert sink.sent[0].epochs == ()


def test_params_merge_and_travel_in_every_snapshot() -> None:
    sink = ListSink()
    reporter = make(sink, Clock())
    reporter.log_params({"lr": 0.1, "batch_size": 32})
    reporter.log_params({"lr": 0.01})
    reporter.log_params(None)  # type: ignore[arg-type]  # ignored, logged, never raised
    assert reporter.pump()  # params alone are something to send
    assert sink.sent[0].params == {"lr": 0.01, "batch_size": 32}


def test_one_failing_sink_neither_stops_nor_silences_another(caplog: pytest.LogCaptureFixture) -> None:
    clock, good, bad = Clock(), ListSink(), RaisingSink()
    reporter = make([bad, good], clock)
    for step in range(3):
        reporter.report(step=step, total_steps=10)
        clock.now += 2
        reporter.pump()
    assert [s.step for s in good.sent] == [0, 1, 2]
    assert (reporter.sent, reporter.dropped) == (3, 3)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert warnings[0].startswith("RaisingSink: update dropped")


def test_close_sends_what_is_pending_then_closes_sinks_once() -> None:
    history = HistorySink()
    reporter = make(history, Clock())
    reporter.report(epoch=1, metrics={"loss": 1.0})
    reporter.pump()
    reporter.report(epoch=2, metrics={"loss": 0.5})
    reporter.close()
    reporter.close()
    reporter.report(epoch=3)  # after close: ignored
    assert [s.epoch for s in history.sent] == [1, 2]
    assert history.closed == [threading.current_thread().name]


def test_close_runs_the_sinks_close_on_the_sender_thread() -> None:
    history = HistorySink()
    reporter = Reporter(history, interval=0.01)
    reporter.report(epoch=1, metrics={"loss": 1.0})
    reporter.close(timeout=5)
    assert history.closed == ["trainyard-report-HistorySink"]
    assert history.sent[-1].epochs[-1].epoch == 1


def test_a_hanging_sink_does_not_hold_the_others() -> None:
    class Live(ListSink):
        def __init__(self) -> None:
            super().__init__()
            self.got_step_5 = threading.Event()

        def send(self, snapshot: Snapshot, timeout: float) -> None:
            super().send(snapshot, timeout)
            if snapshot.step == 5:
                self.got_step_5.set()

    hanging, live = HangingSink(), Live()
    reporter = Reporter([hanging, live], interval=0.0)
    reporter.report(step=0, total_steps=10)
    assert hanging.entered.wait(5)
    reporter.report(step=5)
    assert live.got_step_5.wait(5)  # while the other sink hangs
    assert not reporter.flush(timeout=0.05)  # which never took step 5
    hanging.release.set()
    assert reporter.flush(timeout=5)
    reporter.close(timeout=1)


def test_a_closing_sink_that_raises_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    class BadClose(ListSink):
        def close(self, timeout: float) -> None:
            raise OSError("server gone")

    reporter = make(BadClose(), Clock())
    reporter.report(step=1)
    reporter.close()
    assert any("close failed: OSError('server gone')" in r.getMessage() for r in caplog.records)


def test_module_level_log_params(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reporting, "_default", None)
    sink = ListSink()
    reporting.configure(sink, start=False)
    reporting.log_params({"optimizer": "adam"})
    assert reporting.flush()
    assert sink.sent[-1].params == {"optimizer": "adam"}


def test_default_sink_prefers_trainyards_progress_route(monkeypatch: pytest.MonkeyPatch) -> None:
    # The progress sink's module may be absent (it is optional here): the Trainer sink is chosen then.
    monkeypatch.setitem(sys.modules, "trainyard.runtime.progress", None)
    monkeypatch.setenv("TRAINYARD_PROGRESS_URL", "http://127.0.0.1:1/progress")
    monkeypatch.setenv("KUBEFLOW_TRAINER_SERVER_URL", "http://127.0.0.1:1/status")
    assert type(reporting.default_sink()).__name__ == "TrainerStatusSink"
    monkeypatch.delenv("KUBEFLOW_TRAINER_SERVER_URL")
    assert reporting.default_sink() is None
