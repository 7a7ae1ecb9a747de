"""What the dashboard does to a job, each one API write: suspend, resume, scale, delete.

Suspend and resume patch the field the job's family names (``JobView.suspend_field``: v1's
``spec.runPolicy.suspend``, a TrainJob's ``spec.suspend``), as ``kubectl patch`` would; scale
patches the scale subresource (what an HPA writes), whose bounds the job's own validation
enforces; delete is ``kubectl delete``'s, background propagation. Failures come back as the API's
``Status``, so the page shows the server's own words.
"""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient
from lightkube.types import PatchType

from trainyard.api.meta import Obj
from trainyard.client.resources import plain_resource, to_dict
from trainyard.dashboard import views


def resource(row: dict[str, Any]) -> Any:
    return plain_resource(row["group"], row["version"], row["kind"], row["plural"])


def nested(path: str, value: Any) -> Obj:
    """``{"spec": {"runPolicy": {"suspend": value}}}`` for ``spec.runPolicy.suspend``."""
    out: Any = value
    for part in reversed(path.split(".")):
        out = {part: out}
    return dict(out)


async def set_suspended(client: AsyncClient, job: Obj, suspend: bool) -> Obj:
    row = views.row(job)
    path = views.view_of(job).suspend_field
    if path is None:
        raise ValueError(f"a {row['kind']} cannot be suspended")
    patch = nested(path, suspend)
    written = await client.patch(
        resource(row), row["name"], patch, namespace=row["namespace"], patch_type=PatchType.MERGE
    )
    return to_dict(written)


async def scale(client: AsyncClient, job: Obj, replicas: int) -> Obj:
    row = views.row(job)
    res = resource(row)
    await client.patch(
        res.Scale, row["name"], {"spec": {"replicas": replicas}}, namespace=row["namespace"], patch_type=PatchType.MERGE
    )
    return to_dict(await client.get(res, row["name"], namespace=row["namespace"]))


async def delete(client: AsyncClient, job: Obj) -> None:
    row = views.row(job)
    await client.delete(resource(row), row["name"], namespace=row["namespace"])
