"""The container environment the node agent computes: kubelet precedence, downward API and key references."""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any

import pytest

from trainyard.cluster.clients.node.podenv import ConfigError, Node, Sources, container_env, parse_quantity, referenced

NODE = Node("box", "127.0.0.1", Decimal(8), Decimal(16 * 2**30))


def pod(container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u-1",
            "labels": {"app": "train"},
            "annotations": {"team": "ml"},
        },
        "spec": {"containers": [{"name": "c", **container}], **spec},
    }


def env_of(container: dict[str, Any], sources: Sources | None = None, **spec: Any) -> dict[str, str]:
    p = pod(container, **spec)
    return container_env(p, p["spec"]["containers"][0], {"BASE": "b"}, sources or Sources(), NODE)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_field_refs_cover_the_downward_api() -> None:
    paths = {
        "NAME": "metadata.name",
        "NS": "metadata.namespace",
        "UID": "metadata.uid",
        "APP": "metadata.labels['app']",
        "TEAM": "metadata.annotations['team']",
        "NONE": "metadata.labels['absent']",
        "NODE": "spec.nodeName",
        "SA": "spec.serviceAccountName",
        "IP": "status.podIP",
        "HOST": "status.hostIP",
    }
    env = env_of({"env": [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in paths.items()]})
    assert {k: env[k] for k in paths} == {
        "NAME": "p",
        "NS": "ns",
        "UID": "u-1",
        "APP": "train",
        "TEAM": "ml",
        "NONE": "",
        "NODE": "box",
        "SA": "default",
        "IP": "127.0.0.1",
        "HOST": "127.0.0.1",
    }


def test_key_refs_read_config_maps_and_decoded_secrets() -> None:
    sources = Sources({"cm": {"data": {"lr": "0.1"}}}, {"s": {"data": {"token": b64("hunter2")}}})
    env = env_of(
        {
            "env": [
                {"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "lr"}}},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
                {"name": "GONE", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "x", "optional": True}}},
                {"name": "ALSO", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "x", "optional": True}}},
            ]
        },
        sources,
    )
    assert (env["LR"], env["TOKEN"]) == ("0.1", "hunter2")
    assert "GONE" not in env and "ALSO" not in env


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"configMapKeyRef": {"name": "x", "key": "k"}}, 'configmap "x" not found'),
        ({"secretKeyRef": {"name": "x", "key": "k"}}, 'secret "x" not found'),
        ({"configMapKeyRef": {"name": "cm", "key": "k"}}, "couldn't find key k in ConfigMap ns/cm"),
        ({"secretKeyRef": {"name": "s", "key": "k"}}, "couldn't find key k in Secret ns/s"),
    ],
)
def test_missing_required_references_are_kubelet_config_errors(ref: dict[str, Any], message: str) -> None:
    sources = Sources({"cm": {"data": {}}, "x": None}, {"s": {"data": {}}, "x": None})
    with pytest.raises(ConfigError) as info:
        env_of({"env": [{"name": "V", "valueFrom": ref}]}, sources)
    assert str(info.value) == message


def test_env_from_applies_prefixes_in_order_and_env_wins_and_expands() -> None:
    sources = Sources({"a": {"data": {"X": "1", "Y": "from-a", "bad key": "skip"}}}, {"s": {"data": {"Y": b64("2")}}})
    env = env_of(
        {
            "envFrom": [
                {"configMapRef": {"name": "a"}},
                {"secretRef": {"name": "s"}, "prefix": "S_"},
                {"configMapRef": {"name": "missing", "optional": True}},
            ],
            "env": [{"name": "X", "value": "env-$(Y)-$(S_Y)-$$(Y)-$(UNSET)"}],
        },
        sources,
    )
    assert env["Y"] == "from-a" and env["S_Y"] == "2" and env["BASE"] == "b"
    assert env["X"] == "env-from-a-2-$(Y)-$(UNSET)"
    assert "bad key" not in env
    with pytest.raises(ConfigError, match='configmap "missing" not found'):
        env_of({"envFrom": [{"configMapRef": {"name": "missing"}}]}, Sources({"missing": None}))


def test_resource_field_refs_use_divisors_and_fall_back_to_the_node() -> None:
    resources = {"limits": {"cpu": "1500m", "memory": "1Gi"}, "requests": {"cpu": "250m"}}
    refs = {
        "CPU_LIMIT": {"resource": "limits.cpu"},
        "CPU_MILLI": {"resource": "requests.cpu", "divisor": "1m"},
        "MEM_MI": {"resource": "limits.memory", "divisor": "1Mi"},
        "MEM_REQ": {"resource": "requests.memory"},
    }
    env = env_of(
        {"resources": resources, "env": [{"name": k, "valueFrom": {"resourceFieldRef": v}} for k, v in refs.items()]}
    )
    # Requests default to limits, as the API server defaults them; CPU rounds up to whole cores.
    assert (env["CPU_LIMIT"], env["CPU_MILLI"], env["MEM_MI"], env["MEM_REQ"]) == ("2", "250", "1024", str(2**30))
    unlimited = env_of({"env": [{"name": "C", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}]})
    assert unlimited["C"] == "8"
    with pytest.raises(ConfigError, match="unsupported container resource"):
        env_of({"env": [{"name": "C", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}]})


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", Decimal("0.5")), ("2Gi", Decimal(2**31)), ("1e3", Decimal(1000)), ("3", Decimal(3)), ("1k", 1000)],
)
def test_quantities(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


def test_bad_quantity_is_rejected() -> None:
    with pytest.raises(ValueError):
        parse_quantity("lots")


def test_referenced_collects_env_env_from_and_volumes() -> None:
    p = pod(
        {
            "envFrom": [{"configMapRef": {"name": "a"}}, {"secretRef": {"name": "b"}}],
            "env": [{"name": "V", "valueFrom": {"secretKeyRef": {"name": "c", "key": "k"}}}],
        },
        volumes=[{"name": "v", "configMap": {"name": "d"}}, {"name": "w", "secret": {"secretName": "e"}}],
    )
    assert referenced(p) == ({"a", "d"}, {"b", "c", "e"})
