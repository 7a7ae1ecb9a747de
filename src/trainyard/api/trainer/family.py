"""The TrainJob family: Kubeflow Trainer v2's TrainJob, its runtimes' CRDs and what its installer seeds.

A TrainJob is no replica-spec kind. It has only Suspended / Complete / Failed conditions (a Running
condition would hide "Running" from the official SDK), so STATE is trainyard's ``status.state``;
its pods are its JobSet's (``jobset.sigs.k8s.io/jobset-name``), one step per node (``node-<completion
index>``); its status holds ``jobsStatus`` and, when training code reports it, ``trainerStatus``.
Beside the CRDs, the plane seeds what Trainer v2's clients expect to find: the ``kubeflow-system``
namespace with the ``kubeflow-trainer-public`` ConfigMap and the shipped ClusterTrainingRuntimes.
"""

from __future__ import annotations

import copy
from functools import partial

from trainyard.api import jobset, jobshapes, trainer, training
from trainyard.api.family import Family, FamilyKind, Seed
from trainyard.api.jobshapes import COMPLETED, FAILED, JobSample
from trainyard.api.jobview import JobView, ended, job_age, spec_of, status_of, training_columns, true_conditions
from trainyard.api.kueue.integration import Finish, Integration, Lookup, Referenced, true_condition
from trainyard.api.meta import Obj
from trainyard.api.trainer import catalog

NAME = "trainjobs"


def trainjob_state(job: Obj) -> str:
    """trainyard's ``status.state``; from the conditions when another controller wrote the status."""
    written = status_of(job).get("state")
    if written:
        return str(written)
    true = true_conditions(job)
    for type_ in (trainer.FAILED, trainer.COMPLETE, trainer.SUSPENDED):
        if type_ in true:
            return type_
    return "Created"  # what the official SDK calls a TrainJob before it runs


def runtime_of(job: Obj) -> str:
    """``spec.runtimeRef``'s name; a namespaced TrainingRuntime's is marked as such."""
    ref = spec_of(job).get("runtimeRef") or {}
    name = str(ref.get("name") or "-")
    return f"{name} ({trainer.TRAINING_RUNTIME})" if ref.get("kind") == trainer.TRAINING_RUNTIME else name


def num_nodes(job: Obj) -> int | None:
    """``spec.trainer.numNodes``; None when the runtime's ``mlPolicy`` decides."""
    value = (spec_of(job).get("trainer") or {}).get("numNodes")
    return int(value) if value is not None else None


def nodes_column(job: Obj) -> str:
    nodes = num_nodes(job)
    return "-" if nodes is None else str(nodes)


def jobs_summary(job: Obj) -> str:
    """``jobsStatus`` in one cell: ``node: 2 active``; the nodes wanted before there is any."""
    parts = []
    for row in status_of(job).get("jobsStatus") or []:
        bits = [f"{row.get(k)} {k}" for k in ("active", "succeeded", "failed", "suspended") if row.get(k)]
        parts.append(f"{row.get('name', '?')}: {', '.join(bits) or '-'}")
    if not parts:
        nodes = num_nodes(job)
        parts = [f"{trainer.NODE}: {nodes} wanted"] if nodes is not None else []
    return "; ".join(parts) or "-"


def wanted_nodes(job: Obj) -> list[str]:
    nodes = num_nodes(job)
    return [f"{trainer.NODE}-{i}" for i in range(nodes or 0)]


def trainjob_fields(job: Obj) -> list[tuple[str, str]]:
    """``yard describe``'s summary of a TrainJob's spec."""
    spec = spec_of(job)
    tr = spec.get("trainer") or {}
    out = [("Runtime", runtime_of(job)), ("Nodes", nodes_column(job) if num_nodes(job) else "(the runtime's)")]
    if tr.get("image"):
        out.append(("Image", str(tr["image"])))
    if tr.get("command"):
        # One line: an inline script's newlines and indentation collapse to single spaces.
        command = " ".join(" ".join(str(c) for c in [*tr["command"], *(tr.get("args") or [])]).split())
        out.append(("Command", command if len(command) <= 100 else command[:97] + "..."))
    if tr.get("resourcesPerNode"):
        limits = (tr["resourcesPerNode"].get("limits") or tr["resourcesPerNode"].get("requests")) or {}
        out.append(("Per node", ", ".join(f"{k} {v}" for k, v in limits.items()) or "-"))
    initializer = spec.get("initializer") or {}
    for what in ("dataset", "model"):
        uri = (initializer.get(what) or {}).get("storageUri")
        if uri:
            out.append((f"{what.capitalize()} from", str(uri)))
    if spec.get("suspend"):
        out.append(("Suspend", "true"))
    if spec.get("activeDeadlineSeconds"):
        out.append(("Deadline", f"{spec['activeDeadlineSeconds']}s"))
    if spec.get("managedBy") and spec["managedBy"] != trainer.CONTROLLER_NAME:
        out.append(("Managed by", str(spec["managedBy"])))
    return out


def trainjob_sections(job: Obj) -> list[tuple[str, list[str], list[list[str]]]]:
    """``yard describe``'s status tables of a TrainJob: its replicated Jobs."""
    status = status_of(job)
    keys = ("active", "ready", "succeeded", "failed", "suspended")
    jobs = [[str(row.get("name", "")), *(str(row.get(k, 0)) for k in keys)] for row in status.get("jobsStatus") or []]
    out = [("Jobs", ["NAME", *(k.upper() for k in keys)], jobs)]
    # The trainer's own report (``trainerStatus``) is describe's Training section (``JobView.training``).
    return out


VIEW = JobView(
    family="Kubeflow Trainer v2",
    state=trainjob_state,
    succeeded=trainer.COMPLETE,
    pod_labels=lambda name: {jobset.JOBSET_NAME: name},
    summary=jobs_summary,
    wanted=wanted_nodes,
    columns=(
        ("RUNTIME", runtime_of),
        ("NODES", nodes_column),
        *training_columns(training.from_trainer_status, ended(trainer.COMPLETE, trainer.FAILED)),
        ("AGE", job_age),
    ),
    wide_columns=(
        *training_columns(training.from_trainer_status, ended(trainer.COMPLETE, trainer.FAILED), wide=True),
        ("JOBS", jobs_summary),
    ),
    owned_pods_only=False,  # the JobSet is named after the TrainJob; its pods belong to its Jobs
    event_owners=("Job",),
    fields=trainjob_fields,
    sections=trainjob_sections,
    replicas_title="Nodes",
    suspend_field="spec.suspend",
    deadline=lambda job: spec_of(job).get("activeDeadlineSeconds"),
    deadline_field="spec.activeDeadlineSeconds",
    backoff_field="the runtime's replicated Jobs' backoffLimit",
    handled=lambda job: bool(status_of(job)),  # Pending has no condition: the state is what tells
    training=training.from_trainer_status,
)


def sample(job: Obj) -> JobSample:
    """The per-job metrics' reading: ``status.state`` and its conditions, progress from ``status.trainerStatus``."""
    spec, status = spec_of(job), status_of(job)
    state = jobshapes.word(status.get("state"), "")
    if not state:
        terminal = [
            s for ctype, s in (("Failed", FAILED), ("Complete", COMPLETED)) if jobshapes.true_condition(status, ctype)
        ]
        suspended = jobshapes.true_condition(status, "Suspended")
        state = terminal[0] if terminal else "Suspended" if suspended else "Pending"
    tr = spec.get("trainer") or {}
    nodes = tr.get("numNodes")
    # Without numNodes the runtime decides how many nodes run; the TrainJob alone does not say.
    workers = nodes if isinstance(nodes, int) else None
    reported = status.get("trainerStatus") or {}
    values = {m.get("name"): m.get("value") for m in reported.get("metrics") or [] if isinstance(m, dict)}
    loss, accuracy = jobshapes.loss_and_accuracy(values)
    finished, reason = jobshapes.ended(status, state)
    return JobSample(
        state=state,
        progress=jobshapes.number(reported.get("progressPercentage")),
        epoch=jobshapes.number(values.get("epoch")),
        loss=loss,
        accuracy=accuracy,
        workers=workers,
        gpus=None if workers is None else float(workers * jobshapes.gpus(tr.get("resourcesPerNode"))),
        started=None,
        finished=finished,
        failure_reason=reason,
    )


def _public_configmap(current: Obj) -> Obj | None:
    data = {"kubeflow_trainer_version": trainer.TRAINER_VERSION}
    return None if current.get("data") == data else {**current, "data": data}


def _upgrade(wanted: Obj, current: Obj) -> Obj | None:
    return catalog.upgrade(current, wanted)


def seeds() -> list[Seed]:
    """What Kubeflow Trainer v2 installs beside its CRDs, in the order it must be created."""
    namespace = Seed(
        "", "v1", "namespaces", "", trainer.SYSTEM_NAMESPACE, {"metadata": {"name": trainer.SYSTEM_NAMESPACE}}
    )
    public = {
        "metadata": {"name": trainer.TRAINER_PUBLIC_CONFIGMAP, "namespace": trainer.SYSTEM_NAMESPACE},
        "data": {"kubeflow_trainer_version": trainer.TRAINER_VERSION},
    }
    configmap = Seed(
        "", "v1", "configmaps", trainer.SYSTEM_NAMESPACE, trainer.TRAINER_PUBLIC_CONFIGMAP, public, _public_configmap
    )
    # A shipped runtime is created when absent. One that is present is brought up to date only if
    # trainyard installed it and nobody changed it since (its annotation says so, see
    # ``catalog.upgrade``): a runtime the user edited or wrote under that name is left alone.
    runtimes = [
        Seed(
            trainer.GROUP,
            trainer.VERSION,
            trainer.CLUSTER_TRAINING_RUNTIMES,
            "",
            wanted["metadata"]["name"],
            catalog.shipped(wanted),
            partial(_upgrade, wanted),
        )
        for wanted in trainer.runtimes()
    ]
    return [namespace, configmap, *runtimes]


RUNTIMES = (
    Referenced(
        trainer.GROUP, trainer.VERSION, trainer.CLUSTER_TRAINING_RUNTIME, trainer.CLUSTER_TRAINING_RUNTIMES, False
    ),
    Referenced(trainer.GROUP, trainer.VERSION, trainer.TRAINING_RUNTIME, trainer.TRAINING_RUNTIMES, True),
)


def _podsets(job: Obj, lookup: Lookup) -> list[Obj] | None:
    """The pod sets of the JobSet the TrainJob's runtime makes (Kueue's ``jobs/trainjob``): one per
    replicated Job, ``replicas`` x ``parallelism`` pods, the trainer's ``numNodes`` and
    ``resourcesPerNode`` applied to the trainer step; None until the runtime is there."""
    spec = spec_of(job)
    ref = spec.get("runtimeRef") or {}
    kind = str(ref.get("kind") or trainer.CLUSTER_TRAINING_RUNTIME)
    namespace = job["metadata"].get("namespace", "") if kind == trainer.TRAINING_RUNTIME else ""
    runtime = lookup(kind, namespace, str(ref.get("name") or ""))
    if runtime is None:
        return None
    given = spec.get("trainer") or {}
    nodes = given.get("numNodes") or ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("numNodes") or 1
    out = []
    for rjob in (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
        job_template = rjob.get("template") or {}
        labels = (job_template.get("metadata") or {}).get("labels") or {}
        job_spec = job_template.get("spec") or {}
        pod = copy.deepcopy(job_spec.get("template") or {})
        is_trainer = labels.get(trainer.ANCESTOR_LABEL) == trainer.ANCESTOR_TRAINER
        parallelism = nodes if is_trainer else job_spec.get("parallelism", 1)
        if is_trainer and given.get("resourcesPerNode") is not None:
            for container in (pod.get("spec") or {}).get("containers") or []:
                if container.get("name") == trainer.NODE:
                    container["resources"] = copy.deepcopy(given["resourcesPerNode"])
        replicas = 1 if is_trainer else rjob.get("replicas", 1)
        out.append({"name": rjob.get("name", ""), "count": int(replicas) * int(parallelism), "template": pod})
    return out


def _finished(job: Obj) -> Finish:
    found = true_condition(job, trainer.COMPLETE, trainer.FAILED)
    if found is None:
        return Finish(False)
    return Finish(True, found["type"] == trainer.COMPLETE, str(found.get("message") or ""))


def _active(job: Obj) -> bool:
    return any(
        isinstance(s, dict) and (s.get("active") or s.get("ready")) for s in status_of(job).get("jobsStatus") or []
    )


def _priority_class(job: Obj) -> str:
    return ""  # Kueue reads a TrainJob's priority from its WorkloadPriorityClass label only


QUEUEING = (
    Integration(
        group=trainer.GROUP,
        version=trainer.VERSION,
        kind=trainer.TRAINJOB,
        plural=trainer.TRAINJOBS,
        suspend_path=("spec", "suspend"),
        podsets=_podsets,
        finished=_finished,
        active=_active,
        priority_class=_priority_class,
        references=lambda: RUNTIMES,
    ),
)


FAMILY = Family(
    name=NAME,
    kinds=lambda: (
        FamilyKind(
            kind=trainer.TRAINJOB,
            plural=trainer.TRAINJOBS,
            singular=trainer.TRAINJOB.lower(),
            group=trainer.GROUP,
            version=trainer.VERSION,
            default_container=trainer.NODE,
        ),
    ),
    crds=trainer.crds,
    view=VIEW,
    sample=sample,
    seeds=seeds,
    shipped=trainer.runtimes,
    queueing=lambda: QUEUEING,
)
