"""deploy/ against the real kubectl: kustomize renders the same objects as the all-in-one file, and
the kinds a plane serves (CRDs, Namespace, ServiceAccount, Service) are applied to it for real.

The rest (Deployment, RBAC, the webhook configuration, cert-manager's kinds) are kinds the embedded
plane does not serve, so kubectl cannot map them here; the test checks that they are exactly those,
and tests/unit/operator/test_deploy_manifests.py checks the Kubernetes ones against the API models.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from conftest import REPO, Kubectl, eventually

pytestmark = pytest.mark.e2e

DEPLOY = REPO / "deploy"
NOT_SERVED_HERE = {
    "apps/v1/Deployment",
    "rbac.authorization.k8s.io/v1/ClusterRole",
    "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
    "rbac.authorization.k8s.io/v1/Role",
    "rbac.authorization.k8s.io/v1/RoleBinding",
    "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration",
    "cert-manager.io/v1/Issuer",
    "cert-manager.io/v1/Certificate",
}


def key(doc: dict[str, Any]) -> tuple[str, str, str]:
    return (doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"])


def objects(text: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {key(d): d for d in yaml.safe_load_all(text) if d is not None}


def test_kustomize_renders_what_the_all_in_one_file_holds(kubectl: Kubectl) -> None:
    base = objects(kubectl("kustomize", str(DEPLOY / "base")))
    assert base == objects((DEPLOY / "trainyard.yaml").read_text())
    overlay = objects(kubectl("kustomize", str(DEPLOY / "cert-manager")))
    added = {k for k in overlay if k not in base}
    assert {k[0] for k in added} == {"Issuer", "Certificate"}
    (webhook,) = [d for k, d in overlay.items() if k[0] == "ValidatingWebhookConfiguration"]
    injected = webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert injected == "kubeflow/training-operator-serving-cert"
    assert {k: d for k, d in overlay.items() if k not in added and k[0] != "ValidatingWebhookConfiguration"} == {
        k: d for k, d in base.items() if k[0] != "ValidatingWebhookConfiguration"
    }


def test_the_kinds_a_plane_serves_apply_to_it_and_the_rest_are_the_known_others(kubectl: Kubectl) -> None:
    resources = json.loads(kubectl("get", "--raw", "/apis"))
    group_versions = {v["groupVersion"] for g in resources["groups"] for v in g["versions"]} | {"v1"}
    everything = [
        *yaml.safe_load_all((DEPLOY / "trainyard.yaml").read_text()),
        *yaml.safe_load_all((DEPLOY / "cert-manager" / "certificate.yaml").read_text()),
    ]
    here = [d for d in everything if d is not None and d["apiVersion"] in group_versions]
    elsewhere = {f"{d['apiVersion']}/{d['kind']}" for d in everything if d is not None and d not in here}
    assert elsewhere == NOT_SERVED_HERE
    assert {d["kind"] for d in here} == {"CustomResourceDefinition", "Namespace", "ServiceAccount", "Service"}
    body = yaml.safe_dump_all(here)
    kubectl("apply", "--dry-run=client", "-f", "-", input=body)  # server dry-run needs the namespace first
    applied = kubectl("apply", "-f", "-", input=body)
    assert "service/training-operator" in applied and "namespace/kubeflow" in applied
    try:
        service = kubectl.json("get", "service", "training-operator", "-n", "kubeflow")
        assert service["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
        assert {p["port"] for p in service["spec"]["ports"]} == {443, 8080, 10443}  # webhook, metrics, TrainJob status
        assert kubectl.json("get", "serviceaccount", "training-operator", "-n", "kubeflow")
        for crd in (d for d in here if d["kind"] == "CustomResourceDefinition"):
            stored = kubectl.json("get", "crd", crd["metadata"]["name"])
            assert stored["spec"]["versions"] == crd["spec"]["versions"]
            plural = crd["spec"]["names"]["plural"]
            eventually(lambda p=plural: kubectl.run("get", p, "-A").returncode == 0, what=f"{plural} served")
    finally:
        kubectl.run("delete", "namespace", "kubeflow", "--wait=false")
