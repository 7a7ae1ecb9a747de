"""The kubelet's crash-loop back-off: how long a restarting container waits, and how it is worded.

Pure arithmetic, kept apart from the node agent so the schedule can be tested without processes.
The kubelet restarts a container at once after its first exit, waits 10 s after the second,
doubles the wait after every further exit up to 5 minutes, and forgets the history once a
container has run for 10 minutes. Here the
base is configurable (``yard up --restart-backoff``) and the cap and reset window keep the
kubelet's proportions to it (30x and 60x).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

KUBELET_BASE = 10.0
ENV = "TRAINYARD_RESTART_BACKOFF"
_CAP_FACTOR = 30.0
_RESET_FACTOR = 60.0


@dataclass(frozen=True)
class BackOff:
    base: float = KUBELET_BASE

    def __post_init__(self) -> None:
        if not self.base > 0:
            raise ValueError(f"restart back-off must be a positive number of seconds, not {self.base!r}")

    @property
    def cap(self) -> float:
        return self.base * _CAP_FACTOR

    @property
    def reset_after(self) -> float:
        return self.base * _RESET_FACTOR

    def delay(self, previous: float | None, ran_for: float) -> float:
        """The wait before the next restart, given the last wait (None: no restart yet) and the last run's length."""
        if previous is None or ran_for >= self.reset_after:
            return 0.0
        return min(previous * 2, self.cap) if previous else self.base


def from_env(environ: dict[str, str] | None = None) -> BackOff:
    raw = (os.environ if environ is None else environ).get(ENV, "")
    if not raw:
        return BackOff()
    try:
        return BackOff(float(raw))
    except ValueError as exc:
        raise ValueError(f"${ENV}={raw!r}: {exc}") from None


def go_duration(seconds: float) -> str:
    """``seconds`` as Go's ``time.Duration.String`` writes it (``10s``, ``1m20s``, ``5m0s``, ``200ms``)."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return _trim(nanos / size) + unit
    hours, rest = divmod(nanos, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = _trim(rest / 1e9) + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    if minutes:
        return f"{minutes}m{text}"
    return text


def _trim(value: float) -> str:
    return f"{value:.9f}".rstrip("0").rstrip(".")
