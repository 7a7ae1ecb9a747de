"""The scheduler's pod queue: back-off per failed attempt, moves on cluster changes, flushes."""

from __future__ import annotations

from trainyard.cluster.clients.scheduler.queueing import FLUSH_SECONDS, PodQueue


def test_a_failed_pod_waits_for_a_change_then_for_its_back_off() -> None:
    q = PodQueue(initial=1.0, maximum=10.0)
    q.add("a")
    assert q.take() == {"a"}
    assert q.failed("a", now=100.0) == 101.0
    q.expire(105.0)
    assert q.take() == set()  # nothing changed: no retry however long the back-off is over
    q.move_all(105.0)
    assert q.take() == {"a"}


def test_a_change_during_back_off_retries_when_it_ends() -> None:
    q = PodQueue(initial=1.0, maximum=10.0)
    q.failed("a", now=0.0)
    q.failed("a", now=0.0)  # second failure: 2 s
    q.move_all(1.0)
    assert q.take() == set()
    assert q.next_wakeup() == 2.0
    q.expire(2.0)
    assert q.take() == {"a"}


def test_back_off_doubles_to_its_maximum_and_success_forgets_it() -> None:
    q = PodQueue(initial=1.0, maximum=10.0)
    ends = [q.failed("a", now=0.0) for _ in range(6)]
    assert ends == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    q.remove("a")
    assert q.failed("a", now=0.0) == 1.0


def test_unschedulable_pods_are_flushed_eventually() -> None:
    q = PodQueue()
    q.failed("a", now=0.0)
    assert q.next_wakeup() == FLUSH_SECONDS
    q.expire(FLUSH_SECONDS)
    assert q.take() == {"a"}


def test_an_update_makes_a_pod_active_at_once() -> None:
    q = PodQueue()
    q.failed("a", now=0.0)
    q.add("a")
    assert "a" in q and q.take() == {"a"}


def test_backing_off_pods_can_be_taken_early_soonest_first() -> None:
    q = PodQueue(initial=1.0, maximum=10.0)
    for uid, now in (("late", 5.0), ("soon", 0.0), ("mid", 2.0)):
        q.failed(uid, now=now)
    q.move_all(0.5)
    assert q.pop_backing(2) == ["soon", "mid"]
    assert set(q.backing) == {"late"}
    assert q.pop_backing(5) == ["late"] and not q.backing


def test_move_retries_only_the_pods_named() -> None:
    q = PodQueue(initial=1.0, maximum=10.0)
    q.failed("waits-for-a-sibling", now=0.0)
    q.failed("other", now=0.0)
    q.move(["waits-for-a-sibling", "unknown"], 5.0)
    assert q.take() == {"waits-for-a-sibling"}
    q.move(["other"], 0.5)  # its back-off is not over: it backs off, then is tried
    assert q.take() == set()
    q.expire(1.0)
    assert q.take() == {"other"}
