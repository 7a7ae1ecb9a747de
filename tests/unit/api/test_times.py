"""``metav1.Time`` as the API writes it: RFC 3339, whole seconds, ``Z``, whatever zone it came in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from trainyard.api.meta import format_time, parse_time


def test_times_are_written_in_utc_whole_seconds_even_when_the_last_one_was_another_second() -> None:
    base = datetime(2026, 11, 27, 4, 5, 6, 999_999, tzinfo=UTC)
    plus5 = timezone(timedelta(hours=5))
    cases = [
        (base, "2026-11-27T04:05:06Z"),
        (base.replace(microsecond=0), "2026-11-27T04:05:06Z"),
        (base + timedelta(microseconds=1), "2026-11-27T04:05:07Z"),
        (base.astimezone(plus5), "2026-11-27T04:05:06Z"),  # the same instant, written in UTC
        (datetime(2026, 11, 27, 9, 5, 6, tzinfo=plus5), "2026-11-27T04:05:06Z"),
        (datetime(2026, 11, 27, 9, 5, 7, tzinfo=plus5), "2026-11-27T04:05:07Z"),
        (datetime(1970, 1, 1, tzinfo=UTC) - timedelta(microseconds=1), "1969-12-31T23:59:59Z"),
        (datetime(1970, 1, 1, tzinfo=UTC), "1970-01-01T00:00:00Z"),
        (datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), "9999-12-31T23:59:59Z"),
    ]
    for moment, written in cases * 2:  # each again after another second: nothing stale is reused
        assert format_time(moment) == written, moment
        assert parse_time(written) == moment.replace(microsecond=0).astimezone(UTC)
