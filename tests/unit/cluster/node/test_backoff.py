import pytest

from trainyard.cluster.clients.node.backoff import BackOff, from_env, go_duration


def test_kubelet_schedule_doubles_to_five_minutes() -> None:
    backoff, waits, last = BackOff(), [], None
    for _ in range(9):
        last = backoff.delay(last, ran_for=1)
        waits.append(go_duration(last))
    assert waits == ["0s", "10s", "20s", "40s", "1m20s", "2m40s", "5m0s", "5m0s", "5m0s"]


def test_a_long_clean_run_resets_the_schedule() -> None:
    backoff = BackOff(0.2)
    assert backoff.delay(3.2, ran_for=11.9) == 6.0
    assert backoff.delay(3.2, ran_for=12.0) == 0
    assert BackOff().reset_after == 600


def test_configured_base_keeps_kubelet_proportions() -> None:
    backoff = BackOff(0.2)
    waits = [go_duration(backoff.delay(d, 0)) for d in (None, 0.0, 0.2, 0.4, 4.0)]
    assert waits == ["0s", "200ms", "400ms", "800ms", "6s"]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (0.0015, "1.5ms"), (1.5, "1.5s"), (59, "59s"), (60, "1m0s"), (3725.5, "1h2m5.5s")],
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_base_from_environment() -> None:
    assert from_env({}).base == 10
    assert from_env({"TRAINYARD_RESTART_BACKOFF": "0.5"}).base == 0.5
    for bad in ("0", "-1", "soon"):
        with pytest.raises(ValueError, match="TRAINYARD_RESTART_BACKOFF"):
            from_env({"TRAINYARD_RESTART_BACKOFF": bad})
