"""Optional capabilities of a framework plugin beyond ``base.Framework``, one small Protocol each.

``registry`` finds them by ``isinstance``, so generic code asks "which plugins have operator
flags" or "can this kind run a function" and never names a kind:

- ``OperatorFlags``: flags of the operator's command line that belong to one framework
  (upstream's ``--pytorch-init-container-*``), declared as data (``OperatorFlag``) so that this
  layer knows no CLI framework; ``operator.flags`` adds every registered plugin's.
- ``FunctionJobs``: the kind can run one Python function on N replicas (the SDK's
  ``TrainingClient.create_job(train_func=...)``); the plugin lays out the replicas, the SDK
  packages the function.
- ``LauncherJobs``: the kind's outcome is a launcher's, a batch/v1 Job beside worker pods
  (MPIJob); ``controller.launched`` runs it instead of the replica engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from trainyard.api.common import TrainingJob
from trainyard.api.meta import TypedObject
from trainyard.frameworks.base import Child


@dataclass(frozen=True)
class OperatorFlag:
    """One flag of the operator's command line: ``--name VALUE``, of ``type``, ``default`` when absent."""

    name: str
    type: type[str] | type[int] | type[float]
    default: str | int | float | None
    help: str
    """Says the default itself, as upstream's help does."""

    @property
    def dest(self) -> str:
        """The key of its value in what ``controller_settings`` gets: the name without dashes, ``_`` within."""
        return self.name.removeprefix("--").replace("-", "_")


@runtime_checkable
class OperatorFlags(Protocol):
    @property
    def operator_flags(self) -> Sequence[OperatorFlag]: ...

    def controller_settings(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The ``controller.ControllerSettings`` fields its flags' ``values`` (by ``OperatorFlag.dest``) set, by name.

        Raises ``SystemExit`` with the flag's name for a value the flags refuse.
        """
        ...


@runtime_checkable
class FunctionJobs(Protocol):
    @property
    def function_image(self) -> str:
        """The image the replicas run when the caller names none."""
        ...

    @property
    def function_roles(self) -> Mapping[str, str]:
        """Replica types beyond the workers a caller may ask for, by the SDK's keyword
        (TFJob's ``num_chief_replicas`` → ``Chief``); empty when the kind has none."""
        ...

    def function_entrypoint(self, num_workers: int, num_procs_per_worker: int | str | None) -> str:
        """The command each replica runs the function's file with (e.g. ``torchrun``)."""
        ...

    def function_spec(
        self,
        template: dict[str, Any],
        num_workers: int,
        num_procs_per_worker: int | str | None,
        roles: Mapping[str, int],
    ) -> dict[str, Any]:
        """The job's ``spec`` (JSON-shaped): ``num_workers`` replicas and ``roles`` (replica type →
        count, from ``function_roles``), all of pod ``template``."""
        ...


@runtime_checkable
class LauncherJobs(Protocol):
    """The kind is run by a launcher: one batch/v1 Job whose outcome is the job's, beside worker
    pods it reaches itself (the mpi-operator's shape: ``mpirun`` in the launcher, ranks in the
    workers). The engine's ``controller.launched`` drives it; the plugin only describes objects.
    """

    @property
    def launcher_type(self) -> str:
        """The replica type the launcher Job runs (its template is that replica spec's)."""
        ...

    @property
    def worker_type(self) -> str:
        """The replica type the engine runs as pods, one per index."""
        ...

    def launcher_name(self, job: TrainingJob) -> str: ...

    def launcher_job(self, job: TrainingJob) -> dict[str, Any]:
        """The launcher Job's manifest (apiVersion, kind, metadata.name, spec) for a defaulted job."""
        ...

    def worker_pod(self, job: TrainingJob, index: int, pod: dict[str, Any]) -> dict[str, Any]:
        """The engine's pod for worker ``index`` (names, operator labels, env, restartPolicy) as the kind wants it."""
        ...

    def waits_for_workers(self, job: TrainingJob) -> bool:
        """Whether the launcher is created only once every worker pod is Ready."""
        ...

    def companions(
        self,
        job: TrainingJob,
        running_workers: Sequence[str],
        existing: Sequence[TypedObject],
        keys: KeyPairs,
        cluster_domain: str,
    ) -> Sequence[Child]:
        """What the launcher and workers need beside themselves while the launcher has not finished
        (a Service, the hostfile's ConfigMap, SSH credentials): ``running_workers`` are the names of
        the worker pods that run now, ``existing`` the owned objects as read, ``keys`` a fresh key
        pair on demand (called only for credentials that do not exist yet), ``cluster_domain`` what
        fully qualified names end in after ``.svc`` (empty: nothing)."""
        ...


KeyPairs = Callable[[], tuple[str, str]]
"""A fresh SSH key pair: (private key in PEM, public key in ``authorized_keys`` form)."""


def launcher_jobs(plugin: object) -> LauncherJobs | None:
    """``plugin`` as ``LauncherJobs`` when it has the capability, else None.

    Asked on every reconcile: a Protocol's ``isinstance`` looks up each of its members every time
    (about as long as the rest of a small reconcile's gang step); plugins of one class have the
    same members, so the first one's answer is kept for the class.
    """
    cls = type(plugin)
    launches = _LAUNCHES.get(cls)
    if launches is None:
        launches = _LAUNCHES[cls] = isinstance(plugin, LauncherJobs)
    return cast(LauncherJobs, plugin) if launches else None


_LAUNCHES: dict[type, bool] = {}
