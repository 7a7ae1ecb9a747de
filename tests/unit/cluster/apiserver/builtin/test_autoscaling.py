"""``autoscaling/v2`` HorizontalPodAutoscaler as the plane stores and prints it (kube-apiserver v1.32):
defaults, the spec validation in its words, and ``kubectl get hpa``'s columns."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from trainyard.cluster.server.apiserver import tables
from trainyard.cluster.server.apiserver.errors import ApiError
from trainyard.cluster.server.apiserver.registry import Registry
from trainyard.cluster.server.apiserver.writes import admission, defaulting, shapes

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
HPA = Registry().lookup("autoscaling", "v2", "horizontalpodautoscalers")
DEFAULT_CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}
CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}


def hpa(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "mnist", "namespace": "ns", "creationTimestamp": "2026-03-01T11:59:00Z"},
        "spec": {"scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist"}, **spec},
    }
    if status is not None:
        body["status"] = status
    return body


def test_served_as_a_namespaced_builtin_with_short_name_and_status() -> None:
    assert HPA is not None
    assert (HPA.kind, HPA.namespaced, HPA.short_names, HPA.categories) == (
        "HorizontalPodAutoscaler",
        True,
        ("hpa",),
        ("all",),
    )
    assert HPA.subresources == frozenset({"status"}) and not HPA.custom


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"maxReplicas": 3}, {"minReplicas": 1, "maxReplicas": 3, "metrics": [DEFAULT_CPU]}),
        (
            {"minReplicas": 2, "maxReplicas": 3, "metrics": [CPU]},
            {"minReplicas": 2, "maxReplicas": 3, "metrics": [CPU]},
        ),
        ({"maxReplicas": 3, "metrics": []}, {"minReplicas": 1, "maxReplicas": 3, "metrics": [DEFAULT_CPU]}),
        (
            {"maxReplicas": 3, "metrics": [CPU], "behavior": {"scaleDown": {"stabilizationWindowSeconds": 5}}},
            {
                "minReplicas": 1,
                "maxReplicas": 3,
                "metrics": [CPU],
                "behavior": {
                    "scaleUp": {
                        "stabilizationWindowSeconds": 0,
                        "selectPolicy": "Max",
                        "policies": [
                            {"type": "Pods", "value": 4, "periodSeconds": 15},
                            {"type": "Percent", "value": 100, "periodSeconds": 15},
                        ],
                    },
                    "scaleDown": {
                        "stabilizationWindowSeconds": 5,
                        "selectPolicy": "Max",
                        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
                    },
                },
            },
        ),
    ],
    ids=["server-defaults", "as-written", "empty-metrics", "behavior"],
)
def test_defaults(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    obj = hpa(spec)
    defaulting.on_write("autoscaling/horizontalpodautoscalers", obj)
    del obj["spec"]["scaleTargetRef"]
    assert obj["spec"] == expected


@pytest.mark.parametrize(
    ("spec", "causes"),
    [
        ({"minReplicas": 1, "maxReplicas": 2, "metrics": [CPU]}, []),
        (
            {"minReplicas": 0, "maxReplicas": 2},
            [("spec.minReplicas", "Invalid value: 0: must be greater than or equal to 1")],
        ),
        ({"maxReplicas": 0}, [("spec.maxReplicas", "Invalid value: 0: must be greater than 0")]),
        (
            {"minReplicas": 3, "maxReplicas": 2},
            [("spec.maxReplicas", "Invalid value: 2: must be greater than or equal to `minReplicas`")],
        ),
        (
            {"maxReplicas": 2, "scaleTargetRef": {"kind": "", "name": "a/b"}},
            [
                ("spec.scaleTargetRef.kind", "Required value"),
                ("spec.scaleTargetRef.name", "Invalid value: \"a/b\": may not contain '/'"),
            ],
        ),
        (
            {"maxReplicas": 2, "metrics": [{"type": "Magic"}, {"type": "Pods"}, {}]},
            [
                (
                    "spec.metrics[0].type",
                    'Unsupported value: "Magic": supported values: "ContainerResource", "External", "Object", '
                    '"Pods", "Resource"',
                ),
                ("spec.metrics[1].pods", "Required value: must populate information for the given metric source"),
                ("spec.metrics[2].type", "Required value: must specify a metric source type"),
            ],
        ),
        (
            {
                "maxReplicas": 2,
                "behavior": {
                    "scaleUp": {"stabilizationWindowSeconds": 4000, "selectPolicy": "Fast"},
                    "scaleDown": {"policies": [{"type": "Nodes", "value": 0, "periodSeconds": 2000}]},
                },
            },
            [
                (
                    "spec.behavior.scaleUp.stabilizationWindowSeconds",
                    "Invalid value: 4000: must be less than or equal to 3600",
                ),
                (
                    "spec.behavior.scaleUp.selectPolicy",
                    'Unsupported value: "Fast": supported values: "Disabled", "Max", "Min"',
                ),
                (
                    "spec.behavior.scaleDown.policies[0].type",
                    'Unsupported value: "Nodes": supported values: "Percent", "Pods"',
                ),
                ("spec.behavior.scaleDown.policies[0].value", "Invalid value: 0: must be greater than zero"),
                (
                    "spec.behavior.scaleDown.policies[0].periodSeconds",
                    "Invalid value: 2000: must be less than or equal to 1800",
                ),
            ],
        ),
    ],
    ids=["valid", "min-zero", "max-zero", "max-below-min", "target-ref", "metric-types", "behavior"],
)
def test_validation(spec: dict[str, Any], causes: list[tuple[str, str]]) -> None:
    assert HPA is not None
    body = hpa(spec)
    body["spec"].update(spec)
    found = admission.validate_builtin(HPA, body)
    assert [(field, message) for _, field, message in found] == causes


def test_a_wrongly_typed_field_is_a_bad_request() -> None:
    assert HPA is not None
    with pytest.raises(ApiError) as caught:
        shapes.check(HPA, hpa({"maxReplicas": "three"}))
    assert caught.value.code == 400 and "cannot be handled as a HorizontalPodAutoscaler" in caught.value.message


@pytest.mark.parametrize(
    ("spec", "status", "row"),
    [
        ({"minReplicas": 1, "maxReplicas": 4, "metrics": [CPU]}, None, ["1", 4, 0, "cpu: <unknown>/50%"]),
        (
            {"minReplicas": 2, "maxReplicas": 4, "metrics": [CPU]},
            {
                "currentReplicas": 3,
                "currentMetrics": [{"type": "Resource", "resource": {"current": {"averageUtilization": 61}}}],
            },
            ["2", 4, 3, "cpu: 61%/50%"],
        ),
        (
            {
                "maxReplicas": 4,
                "metrics": [
                    {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"averageValue": "10"}}},
                    {"type": "External", "external": {"metric": {"name": "q"}, "target": {"averageValue": "5"}}},
                    {"type": "Object", "object": {"metric": {"name": "r"}, "target": {"value": "7"}}},
                ],
            },
            None,
            ["<unset>", 4, 0, "<unknown>/10, <unknown>/5 (avg) + 1 more..."],
        ),
        ({"maxReplicas": 1}, None, ["<unset>", 1, 0, "<none>"]),
    ],
    ids=["resource", "with-status", "more", "no-metrics"],
)
def test_kubectl_get_columns(spec: dict[str, Any], status: dict[str, Any] | None, row: list[Any]) -> None:
    assert HPA is not None
    out = tables.table(HPA, [hpa(spec, status)], now=NOW, resource_version="1")

    assert [c["name"] for c in out["columnDefinitions"]] == [
        "Name",
        "Reference",
        "Targets",
        "MinPods",
        "MaxPods",
        "Replicas",
        "Age",
    ]
    min_pods, max_pods, replicas, targets = row
    assert out["rows"][0]["cells"] == ["mnist", "PyTorchJob/mnist", targets, min_pods, max_pods, replicas, "60s"]
