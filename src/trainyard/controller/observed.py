"""Everything one reconcile pass may look at: the job, the children it owns, and the time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from trainyard.api.common import TrainingJob
from trainyard.api.core import Pod, Service
from trainyard.api.meta import TypedObject
from trainyard.frameworks.base import ChildKind
from trainyard.frameworks.capabilities import KeyPairs
from trainyard.frameworks.network import NetworkMode, WaitForMaster
from trainyard.frameworks.trainer.status import StatusServer


@dataclass(frozen=True)
class ControllerSettings:
    network_mode: NetworkMode = NetworkMode.CLUSTER_DNS
    node_address: str = "127.0.0.1"
    wait_for_master: WaitForMaster | None = field(default_factory=WaitForMaster)
    """Cluster mode: the init container Worker pods wait for the master with (None: disabled)."""
    gang_scheduler_name: str = ""
    """Upstream's ``--gang-scheduler-name``: empty is no gang scheduling, ``volcano`` Volcano's
    PodGroups, any other name scheduler-plugins' (with pods sent to that scheduler)."""
    cluster_domain: str = ""
    """Cluster mode: what fully qualified replica names end in after ``.svc`` (upstream's operator
    env ``CUSTOM_CLUSTER_DOMAIN``, read by ``operator.main``); empty: none."""
    pending_timeout: timedelta | None = timedelta(minutes=5)
    """A pod Pending longer than this gives its job a ``Pending`` condition naming why; None: never."""
    progress_server: StatusServer | None = None
    """The status server this operator serves (the TrainJob one, whose second route takes the
    ``kubeflow.org/v1`` jobs' progress): replica pods are told where to report; None: not served."""


def _no_key_pairs() -> tuple[str, str]:
    raise RuntimeError("this pass was given no SSH key source (Observed.key_pairs)")


@dataclass(frozen=True)
class Observed:
    job: TrainingJob
    pods: tuple[Pod, ...]
    services: tuple[Service, ...]
    now: datetime
    other_children: tuple[TypedObject, ...] = ()
    """Children of the owned kinds (the gang's PodGroup, the plugin's) whose controller owner is a
    job of this name, as read; ``of_kind`` picks one kind's. Some may be an older job's."""
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    """PriorityClass values by name, read only when a PodGroup's minResources must be computed."""
    key_pairs: KeyPairs = field(default=_no_key_pairs)
    """A fresh SSH key pair on demand (randomness, injected like the clock): the operator's
    generates one; called only when a job's credentials do not exist yet."""
    refused: Mapping[str, str] = field(default_factory=dict)
    """Replicas the API server refused to create in an earlier pass (a ResourceQuota's 403), by
    pod name, with its words: the job's ``Created`` condition says why they wait."""
    defaulted: TrainingJob | None = None
    """``apply_defaults(job)``, when the caller has it already (the operator keeps one per cached
    version of a job, as it keeps the job's model: its deep copy was a tenth of the operator's own
    CPU); None: the pass makes it. Shared like ``job``: a pass changes neither."""

    def of_kind(self, *kinds: ChildKind) -> tuple[TypedObject, ...]:
        wanted = {(k.group, k.kind) for k in kinds}
        return tuple(o for o in self.other_children if ((o.api_version or "").rpartition("/")[0], o.kind) in wanted)
