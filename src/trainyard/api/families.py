"""The table of job families trainyard serves: the one place that lists them (the API half).

A family is one row here (``api.family.Family``: its kinds, CRDs, seed objects and ``JobView``)
and one row of ``operator.families.OPERATOR_FAMILIES`` under the same name (its controllers, RBAC
and metrics reader). The embedded plane installs what this table says, the SDK and CLI discover,
name and read jobs through it, the operator's flags accept its kinds; none of them names a family.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainyard.api import replicaspecs as replica_specs
from trainyard.api.family import Family, Seed
from trainyard.api.jobshapes import JobSample
from trainyard.api.katib import family as experiments
from trainyard.api.kinds import DEFAULT_KIND
from trainyard.api.meta import Obj
from trainyard.api.trainer import family as trainjobs
from trainyard.api.trainer import optfamily as optimizationjobs
from trainyard.api.trainingjob import family as trainingjobs

# Families of one API group stay together: discovery lists a group's kinds in one place.
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (replica_specs.FAMILY, trainjobs.FAMILY, optimizationjobs.FAMILY, trainingjobs.FAMILY, experiments.FAMILY)
}


def family_of(kind: str) -> Family | None:
    return next((f for f in FAMILIES.values() if kind in f.kind_names()), None)


def default_family() -> Family:
    """The family of the kind a call that names none means; its view reads jobs no family claims."""
    found = family_of(DEFAULT_KIND)
    assert found is not None, "the default kind has a family"
    return found


def job_kinds() -> tuple[str, ...]:
    """Every kind any family serves as a job, in table order."""
    return tuple(kind for f in FAMILIES.values() for kind in f.kind_names())


def crds() -> list[Obj]:
    """Every family's CRDs, in table order."""
    return [crd for f in FAMILIES.values() for crd in f.crds()]


def shipped() -> list[Obj]:
    """Every family's shipped custom resources, in table order."""
    return [obj for f in FAMILIES.values() for obj in f.shipped()]


def seeds() -> list[Seed]:
    """Every family's seed objects, in table order."""
    return [seed for f in FAMILIES.values() for seed in f.seeds()]


def sample(job: Mapping[str, Any]) -> JobSample | None:
    """The job as the per-job metrics show it, read by its kind's family; None for a kind of none."""
    family = family_of(str(job.get("kind", "")))
    return family.sample(dict(job)) if family is not None and isinstance(job.get("spec"), Mapping) else None
