"""The TrainJob status server's pure half: what trainer pods get, and which request bodies are accepted."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from trainyard.controller.trainjob import TrainJobSettings, reconcile
from trainyard.frameworks.trainer import status
from trainyard.frameworks.trainer.build import Rendezvous, build

sys.path.insert(0, str(Path(__file__).parents[1] / "controller"))
from test_trainjob import node_container, observe, runtime, the_jobset, trainjob

NOW = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
SERVER = status.StatusServer("https://127.0.0.1:4443/", "-----BEGIN CERTIFICATE-----\nCA\n")
AUDIENCE = "trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status"


def test_trainer_containers_get_upstreams_env_token_volume_and_a_ca_config_map() -> None:
    built = build(trainjob(), runtime(), Rendezvous("h", 1), SERVER)
    pod = built.jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"] if "value" in e}
    assert env[status.URL_ENV] == f"https://127.0.0.1:4443/apis/{AUDIENCE}"
    assert env[status.CA_CERT_ENV] == "/var/run/secrets/kubeflow/trainer/ca.crt"
    assert env[status.TOKEN_ENV] == "/var/run/secrets/kubeflow/trainer/token"
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "kubeflow-trainer-token", "mountPath": "/var/run/secrets/kubeflow/trainer", "readOnly": True}
    ]
    (volume,) = pod["volumes"]
    sources = volume["projected"]["sources"]
    assert sources[0] == {"serviceAccountToken": {"audience": AUDIENCE, "expirationSeconds": 3600, "path": "token"}}
    assert sources[1] == {"configMap": {"name": "tj-tls-config", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    (cm,) = [c for c in built.companions if c["kind"] == "ConfigMap"]
    assert cm["metadata"]["name"] == "tj-tls-config" and cm["data"] == {"ca.crt": SERVER.ca_pem}
    # decorating twice (a rebuilt JobSet) changes nothing
    again = build(trainjob(), runtime(), Rendezvous("h", 1), SERVER)
    assert again.jobset == built.jobset


def test_without_a_status_server_nothing_is_injected_and_the_controller_passes_it_through() -> None:
    plain = build(trainjob(), runtime(), Rendezvous("h", 1))
    assert not any(c["kind"] == "ConfigMap" for c in plain.companions)
    assert status.URL_ENV not in str(plain.jobset)
    plan = reconcile(observe(trainjob(), runtime()), TrainJobSettings(status_server=SERVER))
    assert status.URL_ENV in str(node_container(the_jobset(plan)).get("env"))
    assert ("ConfigMap", "tj-tls-config") in {(o["kind"], o["metadata"]["name"]) for o in plan.apply}


def test_an_sdk_body_becomes_the_trainer_status_with_kubernetes_times() -> None:
    body = {
        "trainerStatus": {
            "lastUpdatedTime": "2026-11-26T12:00:01.123456+00:00",
            "progressPercentage": 42,
            "estimatedRemainingSeconds": 7,
            "metrics": [{"name": "loss", "value": "0.25"}],
        }
    }
    assert status.trainer_status(body, NOW) == {
        "progressPercentage": 42,
        "estimatedRemainingSeconds": 7,
        "metrics": [{"name": "loss", "value": "0.25"}],
        "lastUpdatedTime": "2026-11-26T12:00:01Z",
    }
    assert status.trainer_status({"trainerStatus": {}}, NOW) == {"lastUpdatedTime": "2026-11-26T12:00:00Z"}
    assert status.trainer_status({}, NOW) is None
    patch = status.merge_patch({"progressPercentage": 5, "lastUpdatedTime": "t"})
    assert patch == {
        "status": {
            "trainerStatus": {
                "progressPercentage": 5,
                "estimatedRemainingSeconds": None,
                "metrics": None,
                "lastUpdatedTime": "t",
            }
        }
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], "JSON object"),
        ({"other": 1}, "unknown field"),
        ({"trainerStatus": {"progressPercentage": 101}}, "progressPercentage"),
        ({"trainerStatus": {"progressPercentage": -1}}, "progressPercentage"),
        ({"trainerStatus": {"progressPercentage": 4.5}}, "progressPercentage"),
        ({"trainerStatus": {"progressPercentage": True}}, "progressPercentage"),
        ({"trainerStatus": {"estimatedRemainingSeconds": "3"}}, "estimatedRemainingSeconds"),
        ({"trainerStatus": {"metrics": [{"name": "loss", "value": 0.5}]}}, "metrics[0].value"),
        ({"trainerStatus": {"metrics": [{"name": "", "value": "1"}]}}, "metrics[0].name"),
        ({"trainerStatus": {"metrics": [{"name": "x" * 65, "value": "1"}]}}, "metrics[0].name"),
        ({"trainerStatus": {"metrics": [{"name": "a", "value": "1"}] * 257}}, "at most 256"),
        ({"trainerStatus": {"lastUpdatedTime": "yesterday"}}, "lastUpdatedTime"),
        ({"trainerStatus": {"progress": 3}}, "unknown field"),
    ],
)
def test_invalid_bodies_are_refused_naming_the_field(body: Any, field: str) -> None:
    with pytest.raises(status.InvalidStatus, match=field.replace("[", r"\[").replace("]", r"\]")):
        status.trainer_status(body, NOW)
