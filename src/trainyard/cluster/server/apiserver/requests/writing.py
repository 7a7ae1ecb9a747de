"""Create, Update and PatchOptions: what a write asks for besides its object, read once from the
request's query as kube-apiserver reads it, and handed to the write verbs (``Objects``) as one
``WriteOptions`` value, as kube-apiserver's ``rest.Creater`` and ``rest.Updater`` take theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainyard.cluster.server.apiserver import causes, errors
from trainyard.cluster.server.apiserver.requests.incoming import ApiRequest
from trainyard.cluster.server.apiserver.requests.query import flag

Warnings = list[str]  # the Warning headers a write collects (unknown fields under fieldValidation=Warn)

FIELD_VALIDATION = ("", "Ignore", "Strict", "Warn")


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """The options of one write. The defaults are a write from inside the plane: no dry run, no
    field manager (``managedFields`` left as they are), no directive on unknown fields, warnings
    not collected."""

    dry_run: bool = False
    field_validation: str = ""
    manager: str | None = None
    force: bool = False  # apply only: take the fields other managers own
    # Where the write's warnings go, for the response's Warning headers: a list the request holds
    # and the write fills (frozen binds the list, not its contents).
    warnings: Warnings | None = None


INTERNAL = WriteOptions()


def write_options(request: ApiRequest, options_kind: str, *, applying: bool = False) -> WriteOptions:
    """The options of a write request; ``options_kind`` names them in a 422 (``CreateOptions``,
    ``UpdateOptions``, ``PatchOptions``). An apply's manager is its ``fieldManager``, which the
    caller has checked is there; any other write's falls back to the client's (``field_manager``)."""
    query = request.query
    directive = field_validation(query.get("fieldValidation"), options_kind)
    return WriteOptions(
        dry_run=query.get("dryRun") == "All",
        field_validation=directive,
        manager=query.get("fieldManager") if applying else field_manager(request),
        force=applying and flag(query.get("force")),
        warnings=[],
    )


def field_validation(value: str | None, options_kind: str) -> str:
    """The ``fieldValidation`` directive of a write; unset means Warn, as on a v1.32 server."""
    value = value or ""
    if value not in FIELD_VALIDATION:
        problem = causes.not_supported("fieldValidation", value, FIELD_VALIDATION)
        raise errors.ApiError(
            422,
            "Invalid",
            f'{options_kind}.meta.k8s.io "" is invalid: {causes.render([problem])}',
            {
                "name": "",
                "group": "meta.k8s.io",
                "kind": options_kind,
                "causes": [{"reason": problem[0], "field": problem[1], "message": problem[2]}],
            },
        )
    return value or "Warn"


def field_manager(request: ApiRequest) -> str:
    """The field manager of a write: ``?fieldManager=``, else the client's User-Agent product, as upstream."""
    manager = request.query.get("fieldManager")
    if manager:
        if len(manager) > 128:
            raise errors.bad_request("fieldManager: Too long: may not be more than 128 bytes")
        return manager
    agent = request.headers.get("User-Agent", "")
    return agent.split("/", 1)[0].strip() or "unknown"
