"""The autoscaler's flags, as kube-controller-manager's, read from the plane's environment.

``yard up --horizontal-pod-autoscaler-sync-period`` (``$TRAINYARD_HPA_SYNC_PERIOD``, default 15 s)
and ``--horizontal-pod-autoscaler-downscale-stabilization`` (``$TRAINYARD_HPA_DOWNSCALE_STABILIZATION``,
default 5 min: what an HPA without ``behavior.scaleDown.stabilizationWindowSeconds`` waits).
Durations are seconds or Go-style ``15s``, ``5m``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

SYNC_ENV = "TRAINYARD_HPA_SYNC_PERIOD"
DOWNSCALE_ENV = "TRAINYARD_HPA_DOWNSCALE_STABILIZATION"


@dataclass(frozen=True)
class Settings:
    sync_period: float = 15.0
    downscale_stabilization: float = 300.0


def duration(text: str, env: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for suffix in ("ms", "s", "m", "h"):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * units[suffix]
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"${env} must be a duration (15s, 5m, or seconds), not {text!r}") from None


def from_env(environ: Mapping[str, str] | None = None) -> Settings:
    env = environ if environ is not None else os.environ
    sync = duration(env[SYNC_ENV], SYNC_ENV) if env.get(SYNC_ENV) else 15.0
    down = duration(env[DOWNSCALE_ENV], DOWNSCALE_ENV) if env.get(DOWNSCALE_ENV) else 300.0
    if not sync > 0:
        raise ValueError(f"${SYNC_ENV} must be positive, not {env[SYNC_ENV]!r}")
    if down < 0:
        raise ValueError(f"${DOWNSCALE_ENV} must not be negative, not {env[DOWNSCALE_ENV]!r}")
    return Settings(sync, down)
