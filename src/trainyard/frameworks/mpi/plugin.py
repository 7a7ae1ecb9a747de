"""MPIJob v2beta1: the objects of the mpi-operator's shape, as it builds them (reference §3.7).

A launcher batch/v1 Job runs ``mpirun``; worker pods host the ranks, reached by name through one
headless Service; a ConfigMap holds the ``hostfile`` (and ``discover_hosts.sh`` for elastic
Horovod) and a Secret the SSH key pair both sides mount. What happens when is
``controller.launched``'s; this module only describes the objects. Open MPI's launcher env, its
hostfile lines and the key pair's volume are ``frameworks.openmpi``'s, shared with Trainer v2's
MPI policy; Intel MPI's and MPICH's are this module's.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping, Sequence
from typing import Any

from trainyard.api import labels
from trainyard.api.common import TrainingJob
from trainyard.api.core import EnvVar
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow.mpi import (
    LAUNCHER,
    MPIJOB,
    ROOT_SSH_PATH,
    WORKER,
    LauncherCreationPolicy,
    MPIImplementation,
    MPIJob,
)
from trainyard.api.meta import TypedObject
from trainyard.frameworks import openmpi
from trainyard.frameworks.base import Child, ChildKind, EnvScope, ReplicaCounts, Verdict
from trainyard.frameworks.capabilities import KeyPairs
from trainyard.frameworks.network import Network
from trainyard.frameworks.replicas import StaticWorld

CONFIG_SUFFIX = "-config"
SSH_SUFFIX = "-ssh"
LAUNCHER_SUFFIX = "-launcher"
CONFIG_VOLUME = "mpi-job-config"
CONFIG_MOUNT = "/etc/mpi"
DISCOVER_HOSTS = "discover_hosts.sh"
SSH_VOLUME = "ssh-auth"
ROLE_ENV = "K_MPI_JOB_ROLE"
SSHD = ["/usr/sbin/sshd", "-De"]
"""What a worker whose first container names no command runs: the launcher reaches it over SSH."""

_HOSTFILE_PATH = f"{CONFIG_MOUNT}/{openmpi.HOSTFILE}"
_CLUSTER_LOCAL = "cluster.local"  # the mpi-operator writes it into every pod's DNS search list as is


def _base64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _as_mpi(job: TrainingJob) -> MPIJob:
    assert isinstance(job, MPIJob)
    return job


def _slots(job: MPIJob) -> int:
    return job.spec.slots_per_worker if job.spec.slots_per_worker is not None else 1


class MPI(StaticWorld):
    info: KindInfo = MPIJOB
    env_scope: EnvScope = EnvScope.FIRST_CONTAINER
    # Never deleted by the operator (the garbage collector removes them with the job, as upstream),
    # and a key pair is never rewritten: RBAC grants no more (``verbs``).
    child_kinds: tuple[ChildKind, ...] = (
        ChildKind(
            "batch/v1",
            "Job",
            "jobs",
            purpose="an MPIJob's launcher runs as a Job (its startTime is cleared before it resumes)",
            patches_status=True,
            verbs=("list", "watch", "create", "update"),
        ),
        ChildKind(
            "v1",
            "ConfigMap",
            "configmaps",
            purpose="an MPIJob's hostfile and discover_hosts.sh",
            verbs=("list", "watch", "create", "update"),
        ),
        ChildKind("v1", "Secret", "secrets", purpose="an MPIJob's SSH key pair", verbs=("list", "watch", "create")),
        ChildKind(
            "v1",
            "Service",
            "services",
            purpose="the headless Service an MPIJob's pods resolve each other by",
            verbs=("list", "watch", "create", "update"),
        ),
    )
    launcher_type: str = LAUNCHER
    worker_type: str = WORKER

    # -- base.Framework ----------------------------------------------------------------------------

    def is_master_role(self, job: TrainingJob, replica_type: str, index: int) -> bool:
        return False

    def env(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[EnvVar]:
        return [EnvVar(name=ROLE_ENV, value="worker")] if replica_type == WORKER else []

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        # An MPIJob's conditions follow its launcher Job (``controller.launched``), not counts.
        return []

    # -- capabilities.LauncherJobs -------------------------------------------------------------------

    def launcher_name(self, job: TrainingJob) -> str:
        return job.name + LAUNCHER_SUFFIX

    def waits_for_workers(self, job: TrainingJob) -> bool:
        return _as_mpi(job).spec.launcher_creation_policy == LauncherCreationPolicy.WAIT_FOR_WORKERS_READY

    def host(self, job: TrainingJob, pod_name: str, cluster_domain: str) -> str:
        """A pod's name in the hostfile: ``<pod>.<job>.<namespace>.svc`` (+ the cluster domain)."""
        host = f"{pod_name}.{job.name}.{job.namespace}.svc"
        return f"{host}.{cluster_domain}" if cluster_domain else host

    def worker_pod(self, job: TrainingJob, index: int, pod: dict[str, Any]) -> dict[str, Any]:
        mpi = _as_mpi(job)
        pod = copy.deepcopy(pod)
        meta, spec = pod["metadata"], pod["spec"]
        pod_labels = meta.setdefault("labels", {})
        pod_labels[labels.JOB_ROLE] = "worker"
        # With the launcher as a worker, it is index 0 and the workers count from 1 (Kueue's TAS
        # needs every pod of the group to have a unique index).
        pod_labels[labels.REPLICA_INDEX] = str(index + 1 if mpi.spec.run_launcher_as_worker else index)
        self._place(mpi, meta["name"], spec)
        first = spec["containers"][0]
        if not first.get("command") and not first.get("args"):
            first["command"] = list(SSHD)
        self._mount_ssh(mpi, spec)
        return pod

    def launcher_job(self, job: TrainingJob) -> dict[str, Any]:
        mpi = _as_mpi(job)
        policy = mpi.run_policy
        spec: dict[str, Any] = {
            "template": self._launcher_template(mpi),
            # A replacement launcher pod only once the last one is gone for good (kubernetes#115844).
            "podReplacementPolicy": "Failed",
        }
        for key, value in (
            ("ttlSecondsAfterFinished", policy.ttl_seconds_after_finished),
            ("activeDeadlineSeconds", policy.active_deadline_seconds),
            ("backoffLimit", policy.backoff_limit),
        ):
            if value is not None:
                spec[key] = value
        if policy.suspend:
            spec["suspend"] = True
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": self.launcher_name(mpi), "labels": {"app": mpi.name}},
            "spec": spec,
        }

    def companions(
        self,
        job: TrainingJob,
        running_workers: Sequence[str],
        existing: Sequence[TypedObject],
        keys: KeyPairs,
        cluster_domain: str,
    ) -> Sequence[Child]:
        mpi = _as_mpi(job)
        hosts = self._config_map(mpi, running_workers, cluster_domain)
        return [self._service(mpi), hosts, self._ssh_secret(mpi, existing, keys)]

    # -- the objects ---------------------------------------------------------------------------------

    def _service(self, job: MPIJob) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": job.name, "labels": {"app": job.name}},
            "spec": {
                "clusterIP": "None",
                "selector": {labels.OPERATOR_NAME: self.info.controller_name, labels.JOB_NAME: job.name},
                # Not-ready pods resolve only when the launcher is a worker too: the workers cannot be
                # ready before the launcher runs, and it waits for them otherwise.
                "publishNotReadyAddresses": bool(job.spec.run_launcher_as_worker),
            },
        }

    def _config_map(self, job: MPIJob, running_workers: Sequence[str], domain: str) -> dict[str, Any]:
        slots = _slots(job)
        workers = job.replica_specs.get(WORKER)
        names = [f"{job.name}-worker-{i}" for i in range((workers.replicas or 0) if workers else 0)]
        first = [self.launcher_name(job)] if job.spec.run_launcher_as_worker else []
        hosts = [self.host(job, n, domain) for n in [*first, *names]]
        if job.spec.mpi_implementation == MPIImplementation.OPEN_MPI:
            hostfile = openmpi.hostfile(hosts, slots)
        else:
            hostfile = "".join(f"{host}:{slots}\n" for host in hosts)
        discover = "#!/bin/sh\n" + "".join(
            f"echo {self.host(job, n, domain)}\n" for n in [*first, *sorted(running_workers)]
        )
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": job.name + CONFIG_SUFFIX, "labels": {"app": job.name}},
            "data": {openmpi.HOSTFILE: hostfile, DISCOVER_HOSTS: discover},
        }

    def _ssh_secret(self, job: MPIJob, existing: Sequence[TypedObject], keys: KeyPairs) -> Child:
        name = job.name + SSH_SUFFIX
        found = next((o for o in existing if o.kind == "Secret" and o.name == name), None)
        if found is not None:
            return found  # a key pair is made once: the pods that mounted it must keep matching
        private, public = keys()
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "labels": {"app": job.name}},
            "type": "kubernetes.io/ssh-auth",
            "data": {openmpi.SSH_PRIVATE_KEY: _base64(private), openmpi.SSH_PUBLIC_KEY: _base64(public)},
        }

    def _launcher_template(self, job: MPIJob) -> dict[str, Any]:
        launcher = job.replica_specs[LAUNCHER]
        template = launcher.template.to_dict()
        meta, spec = template.setdefault("metadata", {}), template.setdefault("spec", {})
        pod_labels = meta.setdefault("labels", {})
        pod_labels |= {
            labels.OPERATOR_NAME: self.info.controller_name,
            labels.JOB_NAME: job.name,
            labels.JOB_ROLE: "launcher",
            # Ours: the mpi-operator sets no replica type; with it `yard logs` and the SDK's
            # replica_type="launcher" find the launcher's pods like any replica's.
            labels.REPLICA_TYPE: "launcher",
        }
        if job.spec.run_launcher_as_worker:
            pod_labels[labels.REPLICA_INDEX] = "0"
        self._place(job, self.launcher_name(job), spec)
        first = spec["containers"][0]
        first["env"] = [*(first.get("env") or []), *self._launcher_env(job)]
        self._mount_ssh(job, spec)
        spec["restartPolicy"] = launcher.restart_policy
        items = [openmpi.hostfile_item(), {"key": DISCOVER_HOSTS, "path": DISCOVER_HOSTS, "mode": 0o555}]
        spec.setdefault("volumes", []).append(
            {"name": CONFIG_VOLUME, "configMap": {"name": job.name + CONFIG_SUFFIX, "items": items}}
        )
        first.setdefault("volumeMounts", []).append({"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT})
        return template

    def _launcher_env(self, job: MPIJob) -> list[dict[str, str]]:
        slots = str(_slots(job))
        env = {ROLE_ENV: "launcher"}
        implementation = job.spec.mpi_implementation
        if implementation == MPIImplementation.OPEN_MPI:
            env |= openmpi.launcher_env(hostfile=_HOSTFILE_PATH, slots=_slots(job))
        elif implementation == MPIImplementation.INTEL:
            env |= {
                "I_MPI_HYDRA_HOST_FILE": _HOSTFILE_PATH,
                "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": openmpi.SSH_RETRIES,
                "I_MPI_PERHOST": slots,
            }
        elif implementation == MPIImplementation.MPICH:
            env |= {"HYDRA_HOST_FILE": _HOSTFILE_PATH, "HYDRA_LAUNCH_EXTRA_ARGS": openmpi.SSH_RETRIES}
        out = [{"name": k, "value": v} for k, v in env.items()]
        if not job.spec.run_launcher_as_worker:
            # A launcher that hosts no rank must not take the node's GPUs by accident.
            out += [
                {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
                {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
            ]
        return out

    def _place(self, job: MPIJob, hostname: str, spec: dict[str, Any]) -> None:
        """The pod's DNS name ``<hostname>.<job>`` under the job's Service, and that domain searched."""
        spec["hostname"] = hostname
        spec["subdomain"] = job.name
        if spec.get("hostNetwork"):
            spec["dnsPolicy"] = "ClusterFirstWithHostNet"
        dns = spec.setdefault("dnsConfig", {})
        dns["searches"] = [*(dns.get("searches") or []), f"{job.name}.{job.namespace}.svc.{_CLUSTER_LOCAL}"]

    def _mount_ssh(self, job: MPIJob, spec: dict[str, Any]) -> None:
        path = job.spec.ssh_auth_mount_path or ROOT_SSH_PATH
        mode = (
            0o600 if path == ROOT_SSH_PATH else None
        )  # sshd refuses keys others can read; elsewhere the image's user decides
        spec.setdefault("volumes", []).append(openmpi.ssh_volume(SSH_VOLUME, job.name + SSH_SUFFIX, default_mode=mode))
        first = spec["containers"][0]
        first.setdefault("volumeMounts", []).append({"name": SSH_VOLUME, "mountPath": path})
