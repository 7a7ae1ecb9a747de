"""QoS classes and enforced limits, computed from pod specs as Kubernetes' ``GetPodQOS`` does."""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.cluster import qos


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(containers)]}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "resources": r} for i, r in enumerate(init)]
    return spec


FULL = {"limits": {"cpu": "1", "memory": "1Gi"}}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(pod({}), "BestEffort", id="nothing"),
        pytest.param(pod({"requests": {"nvidia.com/gpu": "1"}}), "BestEffort", id="only-non-qos-resources"),
        pytest.param(pod({"requests": {"cpu": "0"}}), "BestEffort", id="zero-request"),
        pytest.param(pod({"requests": {"cpu": "100m"}}), "Burstable", id="a-request"),
        pytest.param(pod({"limits": {"memory": "256Mi"}}), "Burstable", id="memory-limit-only"),
        pytest.param(pod(FULL), "Guaranteed", id="limits-default-the-requests"),
        pytest.param(pod({**FULL, "requests": {"cpu": "1000m", "memory": "1024Mi"}}), "Guaranteed", id="equal-units"),
        pytest.param(pod({**FULL, "requests": {"cpu": "500m"}}), "Burstable", id="request-below-limit"),
        pytest.param(pod(FULL, {}), "Burstable", id="one-container-unlimited"),
        pytest.param(pod(FULL, FULL), "Guaranteed", id="every-container-limited"),
        pytest.param(pod(FULL, init=({"requests": {"cpu": "1"}},)), "Burstable", id="init-container-counts"),
        pytest.param(pod({**FULL, "requests": {"cpu": "0"}}), "Burstable", id="explicit-zero-request-stays-zero"),
        pytest.param(pod({"limits": {"cpu": "bogus", "memory": "1Gi"}}), "Burstable", id="unparsable-is-ignored"),
        pytest.param("not a spec", "BestEffort", id="malformed-spec"),
    ],
)
def test_qos_class(spec: Any, expected: str) -> None:
    assert qos.qos_class(spec) == expected


@pytest.mark.parametrize(
    ("limits", "memory", "cpu"),
    [
        ({}, None, None),
        ({"memory": "64Mi", "cpu": "500m"}, 64 << 20, 500),
        ({"memory": "1G", "cpu": "2"}, 10**9, 2000),
        ({"memory": "1.5Ki", "cpu": "0.0001"}, 1536, 1),
        ({"memory": "0", "cpu": "0"}, None, None),
    ],
)
def test_enforced_limits(limits: dict[str, str], memory: int | None, cpu: int | None) -> None:
    container = {"name": "c", "resources": {"limits": limits}}
    assert qos.memory_limit(container) == memory
    assert qos.cpu_limit_millis(container) == cpu


@pytest.mark.parametrize(
    ("value", "text"), [(512, "512"), (64 << 20, "64Mi"), (3 << 29, "1.5Gi"), (1000 * 1024, "1000Ki")]
)
def test_format_bytes(value: int, text: str) -> None:
    assert qos.format_bytes(value) == text
