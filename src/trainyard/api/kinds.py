"""The table of job kinds trainyard serves: the one place that lists them.

Adding a kind means one API module (``api/kubeflow/<kind>.py``: types, defaults, rules, its
``KindInfo``) registered here, and one framework plugin registered in ``frameworks.registry``.
Everything else (the API server's CRDs and admission, the operator's controllers and flags, the
SDK, the CLI) reads the kinds from these tables.
"""

from __future__ import annotations

from trainyard.api import kubeflow
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow.jax import JAXJOB
from trainyard.api.kubeflow.mpi import MPIJOB
from trainyard.api.kubeflow.mxnet import MXJOB
from trainyard.api.kubeflow.paddle import PADDLEJOB
from trainyard.api.kubeflow.pytorch import PYTORCHJOB
from trainyard.api.kubeflow.tensorflow import TFJOB
from trainyard.api.kubeflow.xgboost import XGBOOSTJOB

KINDS: dict[str, KindInfo] = {
    info.kind: info for info in (PYTORCHJOB, TFJOB, XGBOOSTJOB, PADDLEJOB, JAXJOB, MXJOB, MPIJOB)
}

DEFAULT_KIND = PYTORCHJOB.kind
"""The kind a call that names none means (the Kubeflow SDK's ``job_kind`` default)."""

UPSTREAM_FRAMEWORKS: dict[str, str] = {**kubeflow.UPSTREAM_FRAMEWORKS}
"""Every kind upstream serves, trainyard's or not yet, → its metrics' ``framework`` label."""


def kind_for_plural(plural: str) -> KindInfo | None:
    return next((info for info in KINDS.values() if info.plural == plural), None)


def framework_label(kind: str) -> str:
    """The ``framework`` label of a kind's job metrics: its own, else upstream's, else its name."""
    info = KINDS.get(kind)
    if info is not None:
        return info.framework
    return UPSTREAM_FRAMEWORKS.get(kind, kind.lower())
