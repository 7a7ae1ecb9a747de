"""The operator's one path for owned children of any kind: which lightkube resource a kind is written
through, the RBAC that follows from declared kinds.
"""

from __future__ import annotations

import pytest
from lightkube.generic_resource import GenericNamespacedResource
from lightkube.resources.autoscaling_v2 import HorizontalPodAutoscaler
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.resources.rbac_authorization_v1 import RoleBinding

from trainyard.frameworks.base import ChildKind
from trainyard.operator import manifests, rbac
from trainyard.operator.controller import CHILD_VERBS, resource

CONFIG_MAP = ChildKind("v1", "ConfigMap", "configmaps", purpose="an MPIJob's hostfile")
HPA = ChildKind("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers")


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (ChildKind("v1", "Pod", "pods"), Pod),
        (CONFIG_MAP, ConfigMap),
        (ChildKind("batch/v1", "Job", "jobs"), Job),
        (ChildKind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings"), RoleBinding),
        (HPA, HorizontalPodAutoscaler),
    ],
    ids=["core", "configmap", "batch", "rbac", "autoscaling"],
)
def test_kubernetes_kinds_are_written_through_lightkubes_own_classes(kind: ChildKind, expected: type) -> None:
    assert resource(kind) is expected


def test_a_crd_kind_is_a_generic_resource_at_its_plural() -> None:
    group = resource(ChildKind("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups"))

    assert issubclass(group, GenericNamespacedResource)
    info = group._api_info
    assert (info.resource.group, info.resource.version, info.plural) == ("scheduling.x-k8s.io", "v1alpha1", "podgroups")


def test_rbac_for_owned_kinds_follows_the_declared_kinds() -> None:
    rules = rbac.child_rules([CONFIG_MAP, HPA, CONFIG_MAP])

    assert [r.manifest() for r in rules] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": list(CHILD_VERBS)},
        {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": list(CHILD_VERBS)},
    ]
    # The HPA rule of deploy/ is the PyTorch plugin's declaration.
    granted = {(r.group, r.resources) for r in manifests.cluster_rules()}
    assert ("autoscaling", ("horizontalpodautoscalers",)) in granted
