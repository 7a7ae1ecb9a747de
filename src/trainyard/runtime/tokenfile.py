"""The ``Authorization`` header of a status sink: the pod's projected service-account token,
read from its file on every request.

The node (a kubelet on a cluster) replaces that file, atomically, once 80 % of the token's life
has passed, so a token kept in memory would be refused once it expires, in the middle of a long
training: one small read per request (a sink sends at most once a second) always holds the
current one.
"""

from __future__ import annotations


def bearer(token_path: str | None) -> dict[str, str]:
    """``{"Authorization": "Bearer <token>"}`` from the file, or nothing without a path or a token in it."""
    if not token_path:
        return {}
    with open(token_path, encoding="utf-8") as handle:
        token = handle.read().strip()
    return {"Authorization": f"Bearer {token}"} if token else {}
