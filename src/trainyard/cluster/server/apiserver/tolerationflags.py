"""kube-apiserver's ``--default-not-ready-toleration-seconds`` and ``--default-unreachable-toleration-seconds``
(both 300 by default), read from the plane's environment as ``yard up`` sets them; the
DefaultTolerationSeconds admission plugin (``writes.admission.default_toleration_seconds``) gives
them to every new pod. Kept apart from the server so the ``yard`` command checks them without it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

NOT_READY_ENV = "TRAINYARD_DEFAULT_NOT_READY_TOLERATION_SECONDS"
UNREACHABLE_ENV = "TRAINYARD_DEFAULT_UNREACHABLE_TOLERATION_SECONDS"
DEFAULT_SECONDS = 300


def from_env(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(not-ready, unreachable) toleration seconds; ValueError names the variable that is wrong."""
    env = os.environ if environ is None else environ
    out = []
    for name in (NOT_READY_ENV, UNREACHABLE_ENV):
        raw = env.get(name, "").strip()
        if not raw:
            out.append(DEFAULT_SECONDS)
        elif raw.lstrip("-").isdigit():
            out.append(int(raw))
        else:
            raise ValueError(f"${name}={raw!r}: expected a whole number of seconds")
    return out[0], out[1]
