"""``yard up``'s node-failure settings as the plane reads them: Go durations or seconds, named when wrong."""

from __future__ import annotations

import pytest

from trainyard.cluster.clients.nodelifecycle import settings


def test_durations_as_kube_controller_manager_takes_them() -> None:
    assert settings.parse_duration("50s") == 50
    assert settings.parse_duration("1m30s") == 90
    assert settings.parse_duration("500ms") == 0.5
    assert settings.parse_duration("7") == 7


@pytest.mark.parametrize("bad", ["", "5x", "s", "1m 2s"])
def test_a_bad_duration_says_how_to_write_one(bad: str) -> None:
    with pytest.raises(ValueError, match="write it as 50s"):
        settings.parse_duration(bad)


def test_from_env_defaults_and_refusals() -> None:
    assert settings.from_env({}).grace == 50
    assert settings.from_env({settings.GRACE_ENV: "4s"}).grace == 4
    with pytest.raises(ValueError, match=settings.GRACE_ENV):
        settings.from_env({settings.GRACE_ENV: "0"})
