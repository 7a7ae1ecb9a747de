"""DeleteOptions: read from a delete's body and query as kube-apiserver reads them, checked by type."""

from __future__ import annotations

from typing import Any

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.requests import bodies
from trainyard.cluster.server.apiserver.requests.incoming import ApiRequest
from trainyard.cluster.server.apiserver.requests.query import int64


async def delete_options(request: ApiRequest) -> dict[str, Any]:
    """The DeleteOptions of a delete: the body's, then the query's, checked; ``dryRun`` always a list."""
    opts: dict[str, Any] = {}
    raw = await bodies.read(request)
    if raw:
        parsed = bodies.decode(raw, "application/json", what="the DeleteOptions body")
        if isinstance(parsed, dict):
            opts.update(parsed)
    q = request.query
    if q.get("propagationPolicy"):
        opts["propagationPolicy"] = q["propagationPolicy"]
    if q.get("gracePeriodSeconds"):
        opts["gracePeriodSeconds"] = int64(q, "gracePeriodSeconds")
    if opts.get("orphanDependents") is True and "propagationPolicy" not in opts:
        opts["propagationPolicy"] = "Orphan"
    # kubectl --dry-run=server sends dryRun in the body, the Python clients as a query parameter.
    if q.get("dryRun"):
        opts["dryRun"] = q.getall("dryRun")
    opts = checked_delete_options(opts)
    opts["dryRun"] = opts.get("dryRun") or []
    if opts["dryRun"] not in ([], ["All"]):
        raise errors.bad_request(f'dryRun: Unsupported value: {opts["dryRun"]!r}: supported values: "All"')
    return opts


def checked_delete_options(opts: dict[str, Any]) -> dict[str, Any]:
    """DeleteOptions whose fields have the types the apiserver decodes them into; 400 otherwise."""
    # null reads as absent, as in a typed decoder
    grace, policy, dry_run = opts.get("gracePeriodSeconds"), opts.get("propagationPolicy"), opts.get("dryRun")
    if grace is not None and type(grace) is not int:
        raise errors.bad_request(f"gracePeriodSeconds must be an integer, not {grace!r}")
    if policy and policy not in ("Orphan", "Background", "Foreground"):
        raise errors.bad_request(f"propagationPolicy must be one of Orphan, Background or Foreground, not {policy!r}")
    if dry_run is not None and (not isinstance(dry_run, list) or not all(isinstance(d, str) for d in dry_run)):
        raise errors.bad_request(f"dryRun must be a list of strings, not {dry_run!r}")
    return {k: v for k, v in opts.items() if v is not None}
