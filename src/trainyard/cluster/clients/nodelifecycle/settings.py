"""The node controllers' settings, read from the plane's environment as ``yard up`` sets them.

``yard up --node-monitor-grace-period`` (kube-controller-manager's flag of the same name, a Go
duration such as ``50s`` or plain seconds) reaches the plane as ``$TRAINYARD_NODE_MONITOR_GRACE_PERIOD``,
as the restart back-off does; PodGC's quarantine of a missing node (40 s upstream, no flag there)
can be shortened with ``$TRAINYARD_POD_GC_QUARANTINE`` for tests. Kept apart from the controllers
so that the ``yard`` command checks a value without importing them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from trainyard.cluster.clients.nodelifecycle.health import NODE_MONITOR_GRACE_PERIOD, NODE_STARTUP_GRACE_PERIOD

GRACE_ENV = "TRAINYARD_NODE_MONITOR_GRACE_PERIOD"
QUARANTINE_ENV = "TRAINYARD_POD_GC_QUARANTINE"
GC_PERIOD = 20.0
"""How often PodGC looks at every pod (upstream's gcCheckPeriod)."""
QUARANTINE = 40.0
"""How long PodGC waits for a missing node to come back before its pods are orphans (upstream's quarantineTime)."""
TERMINATED_POD_GC_THRESHOLD = 12500
"""kube-controller-manager's --terminated-pod-gc-threshold: terminated pods kept before PodGC deletes the oldest."""
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration (``50s``, ``1m30s``, ``500ms``) or a plain number of seconds."""
    raw = text.strip()
    try:
        return float(raw)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for match in _PART.finditer(raw):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(raw) or not raw:
        raise ValueError(f"invalid duration {text!r}: write it as 50s, 1m30s or a number of seconds")
    return total


@dataclass(frozen=True)
class Settings:
    grace: float = NODE_MONITOR_GRACE_PERIOD
    startup_grace: float = NODE_STARTUP_GRACE_PERIOD
    quarantine: float = QUARANTINE
    gc_period: float = GC_PERIOD
    terminated_threshold: int = TERMINATED_POD_GC_THRESHOLD


def from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings ``yard up`` passed on; ValueError names the variable and what is wrong."""
    env = os.environ if environ is None else environ
    out: dict[str, float] = {}
    for name, field in ((GRACE_ENV, "grace"), (QUARANTINE_ENV, "quarantine")):
        raw = env.get(name, "").strip()
        if not raw:
            continue
        try:
            value = parse_duration(raw)
        except ValueError as exc:
            raise ValueError(f"${name}: {exc}") from None
        if not value > 0:
            raise ValueError(f"${name}={raw!r}: must be a positive duration")
        out[field] = value
    defaults = Settings()
    return Settings(grace=out.get("grace", defaults.grace), quarantine=out.get("quarantine", defaults.quarantine))
