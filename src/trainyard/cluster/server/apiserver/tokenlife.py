"""The longest life of a service-account token this plane issues: kube-apiserver's
``--service-account-max-token-expiration``, read from the plane's environment.

``yard up --service-account-max-token-expiration`` sets it for the plane it starts. Unlike
kube-apiserver's flag it has no lower bound of an hour, so that a test can watch a token expire
and the node refresh it. Kept apart from ``tokens`` so that the ``yard`` command checks it without
importing the API server.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

MAX_EXPIRATION_ENV = "TRAINYARD_SERVICE_ACCOUNT_MAX_TOKEN_EXPIRATION"


def max_expiration(environ: Mapping[str, str] | None = None) -> int | None:
    """The cap in seconds (``MAX_EXPIRATION_ENV``); None: tokens live as long as they are asked to."""
    raw = (os.environ if environ is None else environ).get(MAX_EXPIRATION_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"${MAX_EXPIRATION_ENV}={raw!r}: expected a positive whole number of seconds")
    return int(raw)
