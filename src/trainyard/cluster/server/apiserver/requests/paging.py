"""Chunked lists: ``limit`` and ``continue``, and the list options that choose a revision.

A list with ``limit=N`` returns at most N items and, when more remain, an opaque
``metadata.continue`` token plus ``metadata.remainingItemCount`` (omitted under label or field
selectors, as upstream does). The token has kube-apiserver's shape (base64url of
``{"v":"meta.k8s.io/v1","rv":R,"start":"<last key>\\x00"}``), where R is the revision the first
page was read at and the key is the object's storage key relative to the list (``name``, or
``namespace/name`` across namespaces).

What is guaranteed: every page of one chunked list is served *at revision R*, as etcd does: the
store rebuilds the state at R from its change log, so items are never duplicated or skipped and
objects created, changed or deleted after the first page do not leak into later pages. Once the
store has compacted its change log past R (``Store.compact``) the next page is 410 ``Expired``
with upstream's message and a fresh token (``rv: -1``) that continues at the newest revision,
which may then be inconsistent with the earlier pages.

Revision choice (v1.32): ``resourceVersion`` unset: newest; ``"0"``: newest, and ``limit`` is
ignored (upstream answers from its watch cache); ``N`` with ``resourceVersionMatch=Exact``, or with
``limit`` and no match (legacy): exactly N; ``N`` otherwise: not older than N (the newest).
A revision newer than the store's is 504 ``Too large resource version``.

Callers: ``server`` parses the options, ``objects.list_page`` reads the page. Pure.
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from trainyard.cluster.server.apiserver import causes, errors

TOKEN_VERSION = "meta.k8s.io/v1"
EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of "
    "the results. Continuing with the provided token results in an inconsistent list - objects that were "
    "created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
)
EXPIRED_LIST = "The resourceVersion for the provided list is too old."
NEWEST = -1  # the revision of a token that continues at the newest revision


@dataclass(frozen=True)
class ListOptions:
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    match: str = ""


def _invalid_options(problems: list[causes.Cause]) -> errors.ApiError:
    summary = causes.render(problems)
    details = {
        "name": "",
        "group": "meta.k8s.io",
        "kind": "ListOptions",
        "causes": [{"reason": r, "field": f, "message": m} for r, f, m in problems],
    }
    return errors.ApiError(422, "Invalid", f'ListOptions.meta.k8s.io "" is invalid: {summary}', details)


def list_options(query: Mapping[str, str]) -> ListOptions:
    """The paging and revision options of a list request, validated as ``ValidateListOptions`` does."""
    raw_limit = query.get("limit") or "0"
    try:
        limit = int(raw_limit)
    except ValueError as exc:
        message = f'invalid value for "limit": strconv.ParseInt: parsing "{raw_limit}": invalid syntax'
        raise errors.bad_request(message) from exc
    opts = ListOptions(
        limit=max(limit, 0),
        continue_token=query.get("continue") or "",
        resource_version=query.get("resourceVersion") or "",
        match=query.get("resourceVersionMatch") or "",
    )
    problems: list[causes.Cause] = []
    if opts.match:
        if not opts.resource_version:
            problems.append(
                causes.forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"
                )
            )
        if opts.continue_token:
            problems.append(
                causes.forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided")
            )
        if opts.match not in ("Exact", "NotOlderThan"):
            problems.append(causes.not_supported("resourceVersionMatch", opts.match, ("Exact", "NotOlderThan", "")))
        if opts.match == "Exact" and opts.resource_version == "0":
            problems.append(
                causes.forbidden(
                    "resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
                )
            )
    if problems:
        raise _invalid_options(problems)
    if opts.continue_token and opts.resource_version not in ("", "0"):
        raise errors.bad_request("specifying resource version is not allowed when using continue")
    if opts.resource_version not in ("", "0"):
        parse_revision(opts.resource_version)
    return opts


def parse_revision(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0 or not text.isdigit():
        raise errors.bad_request(f'invalid resource version: strconv.ParseUint: parsing "{text}": invalid syntax')
    return value


# -- continue tokens ------------------------------------------------------------------------


@dataclass(frozen=True)
class Continue:
    revision: int
    start: str  # storage key relative to the list, inclusive; "<last key>\x00" continues after it


def encode(revision: int, start: str) -> str:
    raw = json.dumps({"v": TOKEN_VERSION, "rv": revision, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _not_valid(detail: str = "") -> errors.ApiError:
    message = "continue key is not valid" + (f": {detail}" if detail else "")
    return errors.bad_request(f"invalid continue token: {message}")


def decode(token: str) -> Continue:
    """Parse a token this server issued; anything else is 400, as upstream answers."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise _not_valid(str(exc)) from exc
    if not isinstance(data, dict):
        raise _not_valid("json: cannot unmarshal into Go value of type storage.continueToken")
    if data.get("v") != TOKEN_VERSION:
        raise _not_valid(f"server does not recognize this encoded version {data.get('v') or ''}".rstrip())
    revision, start = data.get("rv"), data.get("start")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision == 0 or revision < NEWEST:
        raise _not_valid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    if not isinstance(start, str) or not start:
        raise _not_valid("encoded start key empty (version meta.k8s.io/v1)")
    if posixpath.normpath("/" + start.lstrip("/")) != "/" + start.lstrip("/"):
        raise _not_valid(start)
    return Continue(revision, start)


def start_key(namespace: str, name: str, *, across_namespaces: bool) -> str:
    """The token key that continues right after the object ``namespace/name``."""
    return f"{namespace}/{name}\x00" if across_namespaces else f"{name}\x00"


def split_start(start: str, namespace: str, *, across_namespaces: bool) -> tuple[str, str]:
    """(namespace, name) lower bound, inclusive, of the rows a token continues with."""
    if across_namespaces:
        ns, _, name = start.partition("/")
        return ns, name
    return namespace, start


def expired_continue(start: str) -> errors.ApiError:
    error = errors.ApiError(410, "Expired", EXPIRED_CONTINUE)
    error.metadata["continue"] = encode(NEWEST, start)
    return error


def too_large(requested: int, current: int) -> errors.ApiError:
    return errors.ApiError(
        504,
        "Timeout",
        f"Too large resource version: {requested}, current: {current}",
        {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        },
    )
