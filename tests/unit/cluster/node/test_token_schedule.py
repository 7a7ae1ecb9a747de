"""When the node replaces a projected service-account token: the kubelet's token manager schedule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from trainyard.cluster.clients.node.tokens import Issued

EXPIRES = datetime(2026, 11, 26, 13, 0, 0, tzinfo=UTC)


def test_a_token_is_refreshed_at_80_percent_of_the_life_the_api_server_granted() -> None:
    hour = Issued("jwt", EXPIRES, 3600)
    assert hour.refresh_at() == EXPIRES - timedelta(minutes=12)
    capped = Issued("jwt", EXPIRES, 5)  # the plane granted 5 s, whatever the pod asked
    assert capped.refresh_at() == EXPIRES - timedelta(seconds=1)


def test_a_long_lived_token_is_refreshed_once_it_is_a_day_old() -> None:
    week = Issued("jwt", EXPIRES, 7 * 86400)
    assert week.refresh_at() == EXPIRES - timedelta(days=6)


def test_a_failed_refresh_is_retried_well_before_a_short_token_expires() -> None:
    assert Issued("jwt", EXPIRES, 3600).retry_after() == timedelta(seconds=10)
    assert Issued("jwt", EXPIRES, 5).retry_after() == timedelta(seconds=0.5)
