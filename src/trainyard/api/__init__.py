"""Typed resource models: the single source of truth for the schema. Imports nothing of ours."""

from trainyard.api.common import (
    CleanPodPolicy,
    ConditionType,
    JobCondition,
    JobStatus,
    ReplicaSpec,
    ReplicaStatus,
    RunPolicy,
    TrainingJob,
)
from trainyard.api.core import Container, EnvVar, Pod, PodPhase, RestartPolicy, Service
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kinds import KINDS
from trainyard.api.kubeflow import API_VERSION, GROUP, VERSION
from trainyard.api.kubeflow.pytorch import PYTORCHJOB, PyTorchJob
from trainyard.api.meta import ObjectMeta, OwnerReference, format_time, parse_time

__all__ = [
    "API_VERSION",
    "GROUP",
    "KINDS",
    "PYTORCHJOB",
    "VERSION",
    "CleanPodPolicy",
    "ConditionType",
    "Container",
    "EnvVar",
    "JobCondition",
    "JobStatus",
    "KindInfo",
    "ObjectMeta",
    "OwnerReference",
    "Pod",
    "PodPhase",
    "PyTorchJob",
    "ReplicaSpec",
    "ReplicaStatus",
    "RestartPolicy",
    "RunPolicy",
    "Service",
    "TrainingJob",
    "format_time",
    "parse_time",
]
