"""Which training-job kinds a cluster serves, and how a user's word ("ptj", "jobs", "TFJob") names them.

The job families of ``api.families.FAMILIES`` list the kinds trainyard knows; each kind carries
the ``JobView`` of its family: how its STATE, outcome, pods, replicas and columns are read, so no
verb of the CLI names a kind or a family.

The kinds come from API discovery of the groups those kinds live in. An open family's group
(``Family.open_groups``, v1's) is open: a kind the operator serves there works in the CLI without a
table entry, read by that family's view. A closed family's group also serves objects that are no
jobs (a TrainJob's TrainingRuntimes), so only its listed kinds are taken, and a cluster that does
not serve the group (404) has none of them. trainyard's own kinds are the fallback when discovery
is refused (RBAC on a real cluster). Nothing here assumes a v1 kind: a job's replica specs are the
``*ReplicaSpecs`` field of its spec, its pods are found through upstream's labels and
ownerReferences, and which replica is the master is its plugin's word (``master_replica``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any

from lightkube import Client
from lightkube.generic_resource import create_namespaced_resource

from trainyard.api.defaults import apply_defaults
from trainyard.api.families import FAMILIES, default_family
from trainyard.api.family import FamilyKind
from trainyard.api.jobview import JobView
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kinds import DEFAULT_KIND, KINDS
from trainyard.frameworks.registry import plugin_for

# Words that mean "every job kind", as `yard get jobs`.
# ("trainingjob(s)" name the seed's TrainingJob kind, not every job.)
ALL_JOBS = ("job", "jobs")


@dataclass(frozen=True)
class JobKind(FamilyKind):
    """A kind as a cluster serves it, with its family's view (one of ``api.families``' or discovered)."""

    view: JobView = field(default_factory=lambda: default_family().view, compare=False)
    open_group: bool = field(default=False, compare=False)
    """Whether discovery in its group takes kinds trainyard lists no entry for (its family's ``open_groups``)."""

    @property
    def resource(self) -> Any:
        return _resource(self.group, self.version, self.kind, self.plural)

    def names(self) -> tuple[str, ...]:
        return (self.plural, self.singular, self.kind.lower(), *self.short_names)


class UnknownKindError(LookupError):
    """A word that names no served job kind; the message lists the ones that are."""


@cache
def _resource(group: str, version: str, kind: str, plural: str) -> Any:
    return create_namespaced_resource(group, version, kind, plural)


def kind_info(word: str) -> KindInfo:
    """trainyard's kind a word names: its kind, plural, singular or a short name."""
    info = KINDS.get(word) or next(
        (i for i in KINDS.values() if word.lower() in (i.plural, i.singular, *i.short_names)), None
    )
    if info is None:
        raise ValueError(f"unknown job kind {word!r}; known kinds: {', '.join(KINDS)}")
    return info


def master_replica(job: dict[str, Any], info: KindInfo) -> tuple[str, int] | None:
    """The replica (type, index) of a job manifest that its plugin gives the master role; None if none."""
    model = apply_defaults(info.model.model_validate(job), info)
    plugin = plugin_for(info.kind)
    for rtype, spec in model.replica_specs.items():
        for index in range(spec.replicas or 0):
            if plugin.is_master_role(model, rtype, index):
                return rtype, index
    return None


def builtin_kinds() -> list[JobKind]:
    """Every kind trainyard knows, family by family in the table's order."""
    return [
        JobKind(**asdict(k), view=family.view, open_group=family.open_groups)
        for family in FAMILIES.values()
        for k in family.kinds()
    ]


def get_json(client: Client, path: str) -> Any:
    """GET a path of the API server through the client's own connection (auth, TLS) as JSON."""
    inner = client._client  # lightkube keeps its configured HTTP client here; it has no public raw GET
    response = inner.send(inner._client.build_request("GET", path))
    response.raise_for_status()
    return response.json()


def default_kind() -> JobKind:
    """trainyard's kind a call that names none means."""
    return next(k for k in builtin_kinds() if k.kind == DEFAULT_KIND)


def served_kinds(client: Client) -> list[JobKind]:
    """The job kinds the cluster serves (API discovery of our kinds' groups), or trainyard's own if refused."""
    builtin = builtin_kinds()
    out: list[JobKind] = []
    for group, version in dict.fromkeys((k.group, k.version) for k in builtin):
        known = {k.kind: k for k in builtin if (k.group, k.version) == (group, version)}
        # A group of an open family's kinds is open to kinds trainyard has no entry for; others are not.
        opener = next((k for k in known.values() if k.open_group), None)
        found = _discovered(client, group, version, known, opener)
        out += list(known.values()) if found is None else found
    return out


def _discovered(
    client: Client, group: str, version: str, known: dict[str, JobKind], opener: JobKind | None
) -> list[JobKind] | None:
    """The group's job kinds as discovery lists them; None when discovery gives no answer to go by.

    ``opener``: a kind of the open family the group is of (None: a closed group); a kind the table
    does not list is read as that family reads its jobs.
    """
    open_group = opener is not None
    try:
        listing = get_json(client, f"/apis/{group}/{version}")
    except Exception as exc:  # discovery refused or absent: the kinds this trainyard knows
        absent = getattr(getattr(exc, "response", None), "status_code", None) == 404
        return [] if absent and not open_group else None
    out = []
    for res in listing.get("resources") or []:
        if "/" in res.get("name", "") or not res.get("namespaced", True):
            continue  # subresources (status, scale) and anything cluster-scoped
        kind = res["kind"]
        mine = known.get(kind) or opener
        if mine is None:
            continue  # not a job (a TrainingRuntime)
        out.append(
            JobKind(
                kind=kind,
                plural=res["name"],
                singular=res.get("singularName") or kind.lower(),
                short_names=tuple(res.get("shortNames") or ()),
                group=group,
                version=version,
                default_container=mine.default_container if kind in known else None,
                view=mine.view,
                open_group=open_group,
            )
        )
    return out if out or not open_group else None


def resolve(word: str, kinds: list[JobKind]) -> list[JobKind]:
    """The kinds a word names: all of them for "jobs", else the one whose name it is."""
    wanted = word.lower().split(".", 1)[0]  # kubectl accepts pytorchjobs.kubeflow.org
    if wanted in ALL_JOBS:
        return list(kinds)
    for kind in kinds:
        if wanted in kind.names():
            return [kind]
    served = ", ".join(k.plural for k in kinds) or "none"
    raise UnknownKindError(f"unknown job kind {word!r}; this cluster serves: {served} (or 'jobs' for all)")


def by_kind(kind: str, kinds: list[JobKind]) -> JobKind | None:
    """The served kind of a manifest's ``kind`` (exact, as the API server matches it)."""
    return next((k for k in kinds if k.kind == kind), None)
