"""ResourceQuota and LimitRange admission (``builtin.quota``), pure: usage, kube's messages, defaults."""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.builtin import quota

SEED_001 = {
    "requests.cpu": "8",
    "requests.memory": "16Gi",
    "limits.cpu": "12",
    "limits.memory": "24Gi",
    "count/tfjobs.kubeflow.org": "3",
    "count/pytorchjobs.kubeflow.org": "3",
}


def pod(name: str = "p", phase: str = "", **resources: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"containers": [{"name": "main", "resources": resources}]},
    }
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def rq(hard: dict[str, str], used: dict[str, str] | None = None, name: str = "q") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"hard": hard}, "status": {"hard": hard, "used": used or {}}}


def test_a_pod_counts_its_requests_limits_and_itself_until_it_ends() -> None:
    running = pod(requests={"cpu": "500m"}, limits={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"})
    counted = {k: quota.fmt(k, v) for k, v in quota.usage("core/pods", "", "pods", running).items()}
    assert counted == {
        "count/pods": "1",
        "pods": "1",
        "cpu": "500m",
        "requests.cpu": "500m",
        "memory": "1Gi",
        "requests.memory": "1Gi",
        "limits.cpu": "1",
        "limits.memory": "1Gi",
        "requests.nvidia.com/gpu": "1",
    }
    done = pod(phase="Succeeded", requests={"cpu": "1"})
    assert quota.usage("core/pods", "", "pods", done) == {"count/pods": 1}


def test_the_seed_quota_refuses_a_fourth_job_in_kube_apiservers_words() -> None:
    job = {"metadata": {"name": "j4", "namespace": "ns"}}
    full = rq(SEED_001, {"count/pytorchjobs.kubeflow.org": "3"})
    with pytest.raises(errors.ApiError) as refused:
        quota.charge([full], "kubeflow.org/pytorchjobs", "kubeflow.org", "pytorchjobs", job, "j4")
    assert refused.value.code == 403
    assert refused.value.message == (
        'pytorchjobs.kubeflow.org "j4" is forbidden: exceeded quota: q, requested: '
        "count/pytorchjobs.kubeflow.org=1, used: count/pytorchjobs.kubeflow.org=3, "
        "limited: count/pytorchjobs.kubeflow.org=3"
    )
    roomy = rq(SEED_001, {"count/pytorchjobs.kubeflow.org": "2"})
    [(name, used)] = quota.charge([roomy], "kubeflow.org/pytorchjobs", "kubeflow.org", "pytorchjobs", job, "j4")
    assert (name, used["count/pytorchjobs.kubeflow.org"]) == ("q", 3)


def test_a_cpu_quota_requires_every_container_to_say_its_cpu_and_names_only_what_is_exceeded() -> None:
    with pytest.raises(errors.ApiError) as refused:
        quota.charge([rq({"requests.cpu": "8", "limits.memory": "1Gi"})], "core/pods", "", "pods", pod(), "p")
    assert refused.value.message.endswith(
        "failed quota: q: must specify limits.memory for: main; requests.cpu for: main"
    )
    big = pod(requests={"cpu": "9"}, limits={"cpu": "9", "memory": "1Gi"})
    with pytest.raises(errors.ApiError) as exceeded:
        quota.charge(
            [rq({"requests.cpu": "8", "limits.memory": "2Gi"}, {"requests.cpu": "0"})],
            "core/pods",
            "",
            "pods",
            big,
            "p",
        )
    assert exceeded.value.message == (
        'pods "p" is forbidden: exceeded quota: q, requested: requests.cpu=9, used: requests.cpu=0, '
        "limited: requests.cpu=8"
    )


def test_hard_names_are_validated_as_kube_apiserver_does() -> None:
    problems = quota.hard_problems({"spec": {"hard": {"limit.cpu": "2", "count/foos.example.com": "1", "pods": "-1"}}})
    assert [(c[1], c[2]) for c in problems] == [
        ("spec.hard[limit.cpu]", 'Invalid value: "limit.cpu": must be a standard resource type or fully qualified'),
        ("spec.hard[limit.cpu]", 'Invalid value: "limit.cpu": must be a standard resource for quota'),
        ("spec.hard[pods]", 'Invalid value: "-1": must be greater than or equal to 0'),
    ]


def test_limit_ranges_default_requests_and_limits_and_refuse_what_is_out_of_bounds() -> None:
    ranges = [
        {
            "metadata": {"name": "lr"},
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "default": {"cpu": "500m"},
                        "defaultRequest": {"cpu": "250m"},
                        "max": {"cpu": "1"},
                    }
                ]
            },
        }
    ]
    bare = pod()
    quota.limit_defaults(bare, ranges)
    assert bare["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "500m"}, "requests": {"cpu": "250m"}}
    assert bare["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu request for container main; cpu limit for container main"
    )
    limited = pod(limits={"cpu": "2"})
    quota.limit_defaults(limited, ranges)
    assert limited["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2"}  # its own limit
    assert quota.limit_problems(limited, ranges) == ["maximum cpu usage per Container is 1, but limit is 2"]
    assert quota.limit_problems(bare, ranges) == []
