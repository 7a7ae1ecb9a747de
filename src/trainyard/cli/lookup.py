"""Finding the job a command names: ``KIND/NAME``, ``KIND NAME`` or a bare name among every kind."""

from __future__ import annotations

from lightkube import Client
from lightkube.core.exceptions import ApiError

from trainyard.api.meta import Obj
from trainyard.cli.common import UserError, kinds_of
from trainyard.client.resources import is_status, to_dict
from trainyard.sdk.kinds import JobKind, resolve


class NotFoundError(UserError):
    pass


def split_target(target: str, name: str | None) -> tuple[str, str]:
    if name is not None:
        return target, name
    if "/" in target:
        kind_word, job_name = target.split("/", 1)
        return kind_word, job_name
    return "jobs", target


def find_job(client: Client, kind_word: str, name: str, namespace: str) -> tuple[JobKind, Obj]:
    """The job of that name among the kinds the word names; NotFoundError says where it looked."""
    kinds = resolve(kind_word, kinds_of(client))
    for kind in kinds:
        try:
            return kind, to_dict(client.get(kind.resource, name, namespace=namespace))
        except ApiError as exc:
            if not is_status(exc, 404):
                raise
    what = kinds[0].singular if len(kinds) == 1 else "job"
    raise NotFoundError(f'{what} "{name}" not found in namespace {namespace}')
