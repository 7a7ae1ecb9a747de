"""The table of job families the operator runs: the operator's half of each family's row.

Each row is keyed by the name of the family's ``api.families.FAMILIES`` row (its kinds, CRDs, views
and metrics reader) and says what the operator needs beyond: how to build the family's
controllers for the manager, what they ask of which resources (``deploy/``'s RBAC) and which kinds
their jobs own. The manager and ``manifests`` read this table; neither names a family.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from lightkube import AsyncClient

from trainyard.api import katib, trainer, trainingjob
from trainyard.api import replicaspecs as replica_specs
from trainyard.api.families import FAMILIES
from trainyard.api.katib import family as experiments_family
from trainyard.api.kinds import KINDS
from trainyard.api.trainer import family as trainjobs_family
from trainyard.api.trainer import optfamily as optimizationjobs_family
from trainyard.api.trainingjob import family as trainingjobs_family
from trainyard.controller.children import REPLICA_KINDS
from trainyard.controller.trainjob import TrainJobSettings
from trainyard.frameworks.base import ChildKind
from trainyard.frameworks.registry import plugin_for
from trainyard.kit.informer import SharedInformers
from trainyard.operator import katibtrials, optimizationjobs, trainingjobs, trainjobs
from trainyard.operator.controller import REPLICA_VERBS, JobController
from trainyard.operator.katib import ExperimentController
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.observations import ObservationStore
from trainyard.operator.ports import PortAllocator
from trainyard.operator.rbac import Rule, job_kind_rules
from trainyard.operator.settings import OperatorSettings


@dataclass(frozen=True)
class Wiring:
    """What every controller of the process shares, as controller-runtime's manager hands it out."""

    client: AsyncClient
    settings: OperatorSettings
    clock: Callable[[], datetime]
    ports: PortAllocator
    metrics: OperatorMetrics
    may_write: Callable[[], bool]
    informers: SharedInformers
    """One informer per resource for all the controllers (every job kind's PodGroups, the jobs a
    TrainingJob owns), as controller-runtime's manager shares one cache."""


async def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Running:
    """One controller as the manager starts it."""

    kind: str
    run: Callable[[], Awaitable[None]]
    prime: Callable[[], Awaitable[None]] = field(default=_nothing)
    """Hold the host ports existing jobs use: every controller's is awaited before any runs."""


@dataclass(frozen=True)
class OperatorFamily:
    name: str
    """The name of its ``api.families.FAMILIES`` row."""
    controllers: Callable[[Wiring, tuple[str, ...]], list[Running]]
    """Its controllers for the kinds enabled (``--enable-scheme``), never called with none."""
    rules: Callable[[], list[Rule]]
    """What its controllers ask of its own kinds and companions (the owned kinds' are ``owned``'s)."""
    child_kinds: Callable[[], list[ChildKind]] = field(default=list)
    """The kinds its jobs own; one rule each, merged across families (``rbac.child_rules``)."""


# -- the replica-spec kinds: one JobController each -------------------------------------------------


def _job_controllers(wiring: Wiring, kinds: tuple[str, ...]) -> list[Running]:
    settings = wiring.settings
    # The v1 jobs' replicas report progress to the same status server, on its second route.
    v1 = replace(settings, controller=replace(settings.controller, progress_server=settings.trainer_status))
    controllers = [
        JobController(
            wiring.client,
            plugin_for(kind),
            v1,
            ports=wiring.ports,
            clock=wiring.clock,
            metrics=wiring.metrics,
            may_write=wiring.may_write,
            informers=wiring.informers,
        )
        for kind in kinds
    ]
    return [Running(c.plugin.info.kind, run=c.run, prime=c.prime) for c in controllers]


def _job_rules() -> list[Rule]:
    rules = []
    for group in sorted({info.group for info in KINDS.values()}):
        plurals = tuple(sorted(info.plural for info in KINDS.values() if info.group == group))
        rules += job_kind_rules(
            group,
            plurals,
            ("get", "list", "watch", "patch", "delete"),
            reads="the jobs' informers (list and watch); the status server reads one (get) to merge its training "
            "progress; record host ports (host network mode); delete at ttlSecondsAfterFinished",
            status="the one status merge-patch per pass; the status server's status.trainingProgress writes",
            owners="children carry blockOwnerDeletion: OwnerReferencesPermissionEnforcement asks for this",
        )
    rules.append(Rule("", tuple(k.plural for k in REPLICA_KINDS), REPLICA_VERBS, "a job's replicas and their Services"))
    return rules


REPLICA_SPECS = OperatorFamily(
    name=replica_specs.NAME,
    controllers=_job_controllers,
    rules=_job_rules,
    child_kinds=lambda: [kind for name in KINDS for kind in plugin_for(name).child_kinds],
)


# -- Kubeflow Trainer v2's TrainJob -----------------------------------------------------------------


def _trainjob_controllers(wiring: Wiring, kinds: tuple[str, ...]) -> list[Running]:
    settings = wiring.settings
    controller = trainjobs.TrainJobController(
        wiring.client,
        TrainJobSettings(
            settings.controller.network_mode,
            settings.controller.node_address,
            status_server=settings.trainer_status,
        ),
        namespace=settings.namespace,
        workers=settings.workers,
        ports=wiring.ports,
        clock=wiring.clock,
        metrics=wiring.metrics,
        may_write=wiring.may_write,
    )
    return [Running(trainer.TRAINJOB, run=controller.start, prime=controller.prime)]


def _trainjob_rules() -> list[Rule]:
    group = trainer.GROUP
    return [
        *job_kind_rules(
            group,
            (trainer.TRAINJOBS,),
            # list: also the check at start that TrainJobs are served
            ("list", "watch", "patch"),
            reads="the TrainJobs' informer; record host ports (host network mode)",
            status="the one TrainJob status merge-patch per pass",
            owners="a TrainJob's children carry blockOwnerDeletion (OwnerReferencesPermissionEnforcement)",
        ),
        Rule(
            group,
            (trainer.TRAINING_RUNTIMES, trainer.CLUSTER_TRAINING_RUNTIMES),
            trainjobs.RUNTIME_VERBS,
            "the runtimes' informers: a TrainJob's runtime read from them, and a change starts the TrainJobs naming it",
        ),
    ]


TRAINJOBS = OperatorFamily(
    name=trainjobs_family.NAME,
    controllers=_trainjob_controllers,
    rules=_trainjob_rules,
    # a TrainJob's PodGroup: the gang's rule (``manifests``) grants all it asks
    child_kinds=lambda: [kind for kind in trainjobs.CHILD_KINDS if kind.kind != "PodGroup"],
)


# -- the seed's TrainingJob -------------------------------------------------------------------------


def _trainingjob_controllers(wiring: Wiring, kinds: tuple[str, ...]) -> list[Running]:
    controller = trainingjobs.TrainingJobController(
        wiring.client,
        namespace=wiring.settings.namespace,
        workers=wiring.settings.workers,
        clock=wiring.clock,
        metrics=wiring.metrics,
        may_write=wiring.may_write,
        informers=wiring.informers,
    )
    return [Running(trainingjob.KIND, run=controller.start)]


def _trainingjob_rules() -> list[Rule]:
    return job_kind_rules(
        trainingjob.GROUP,
        (trainingjob.PLURAL,),
        # list: also the check at start that TrainingJobs are served
        ("list", "watch"),
        reads="the TrainingJobs' informer",
        status="the one TrainingJob status merge-patch per pass",
        owners="a TrainingJob's owned job carries blockOwnerDeletion (OwnerReferencesPermissionEnforcement)",
    )


TRAININGJOBS = OperatorFamily(
    name=trainingjobs_family.NAME,
    controllers=_trainingjob_controllers,
    rules=_trainingjob_rules,
    child_kinds=lambda: list(trainingjobs.CHILD_KINDS),
)


# -- Kubeflow Trainer's OptimizationJob -------------------------------------------------------------


def _optimizationjob_controllers(wiring: Wiring, kinds: tuple[str, ...]) -> list[Running]:
    controller = optimizationjobs.OptimizationJobController(
        wiring.client,
        namespace=wiring.settings.namespace,
        workers=wiring.settings.workers,
        clock=wiring.clock,
        metrics=wiring.metrics,
        may_write=wiring.may_write,
        informers=wiring.informers,
    )
    return [Running(trainer.OPTIMIZATIONJOB, run=controller.start)]


def _optimizationjob_rules() -> list[Rule]:
    return job_kind_rules(
        trainer.GROUP,
        (trainer.OPTIMIZATIONJOBS,),
        # list: also the check at start that OptimizationJobs are served
        ("list", "watch"),
        reads="the OptimizationJobs' informer",
        status="the one OptimizationJob status merge-patch per pass",
        owners="an OptimizationJob's trial TrainJobs carry blockOwnerDeletion (OwnerReferencesPermissionEnforcement)",
    )


OPTIMIZATIONJOBS = OperatorFamily(
    name=optimizationjobs_family.NAME,
    controllers=_optimizationjob_controllers,
    rules=_optimizationjob_rules,
    child_kinds=lambda: list(optimizationjobs.CHILD_KINDS),
)


# -- Katib's Experiments: the Experiment controller (with its Suggestions) and the Trial controller -----


def _katib_controllers(wiring: Wiring, kinds: tuple[str, ...]) -> list[Running]:
    settings = wiring.settings
    # The Trials' metrics, which medianstop compares across an Experiment's trials: one store for both.
    store = ObservationStore(settings.observations)
    experiments = ExperimentController(
        wiring.client,
        store,
        namespace=settings.namespace,
        workers=settings.workers,
        clock=wiring.clock,
        metrics=wiring.metrics,
        may_write=wiring.may_write,
    )
    trials = katibtrials.TrialController(
        wiring.client,
        store,
        namespace=settings.namespace,
        workers=settings.workers,
        clock=wiring.clock,
        metrics=wiring.metrics,
        may_write=wiring.may_write,
        informers=wiring.informers,
    )
    return [Running(katib.EXPERIMENT, run=experiments.start), Running(katib.TRIAL, run=trials.start)]


def _katib_rules() -> list[Rule]:
    group, experiments, suggestions, trials = katib.GROUP, katib.EXPERIMENTS, katib.SUGGESTIONS, katib.TRIALS
    return [
        Rule(group, (experiments,), ("list", "watch"), "the Experiments' informer"),
        Rule(
            group,
            (suggestions,),
            ("list", "watch", "create", "update"),
            "the Suggestions' informer; an Experiment's is created, its spec.requests updated",
        ),
        Rule(
            group,
            (trials,),
            ("list", "watch", "create", "delete"),
            "the Trials' informer; an Experiment's are created, and deleted when parallelTrialCount is lowered",
        ),
        Rule(
            group,
            tuple(f"{p}/status" for p in (experiments, suggestions, trials)),
            ("patch",),
            "one status merge-patch per pass: an Experiment's verdict, a Suggestion's assignments, a Trial's outcome",
        ),
        Rule(
            group,
            (f"{experiments}/finalizers", f"{trials}/finalizers"),
            ("update",),
            "an Experiment's Suggestion and Trials, a Trial's job carry blockOwnerDeletion "
            "(OwnerReferencesPermissionEnforcement)",
        ),
        Rule("", ("pods",), ("list",), "the StdOut collector finds a Trial's primary pod"),
        Rule("", ("pods/log",), ("get",), "the StdOut collector reads the primary container's output"),
    ]


def _katib_child_kinds() -> list[ChildKind]:
    from trainyard.api.katib.kinds import trial_kinds

    return [
        ChildKind(
            k.api_version, k.kind, k.plural, purpose="a Katib Trial's job", verbs=("list", "watch", "create", "delete")
        )
        for k in trial_kinds().values()
    ]


KATIB = OperatorFamily(
    name=experiments_family.NAME,
    controllers=_katib_controllers,
    rules=_katib_rules,
    child_kinds=_katib_child_kinds,
)


OPERATOR_FAMILIES: dict[str, OperatorFamily] = {
    f.name: f for f in (REPLICA_SPECS, TRAINJOBS, OPTIMIZATIONJOBS, TRAININGJOBS, KATIB)
}


def rows() -> list[tuple[str, tuple[str, ...], OperatorFamily]]:
    """Every family in ``api.families``' order: its name, its kinds, its operator row."""
    return [(name, family.kind_names(), OPERATOR_FAMILIES[name]) for name, family in FAMILIES.items()]
