"""deploy/ is the generator's output, its objects agree with each other and with the operator's flags,
and the Kubernetes kinds among them match the official API models field for field.

The models are those of the official ``kubernetes`` client (generated from the Kubernetes OpenAPI
spec): a manifest that loses a field on a round trip through them has a field Kubernetes does not
define (a typo), and one without a required field does not load. The embedded plane does not serve
apps/v1, RBAC or admissionregistration, so this is the schema check those kinds get here
(tests/e2e/test_deploy_kubectl.py applies the kinds the plane serves).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from api_models import strict_round_trip
from trainyard.api import katib, trainer
from trainyard.api.kinds import KINDS
from trainyard.operator import flags as operator_flags
from trainyard.operator import main as operator_main
from trainyard.operator import manifests

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"


def docs(path: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / path).read_text()) if d is not None]


def by_kind(kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs("trainyard.yaml") if d["kind"] == kind]
    return found


def test_committed_manifests_are_the_generators_output() -> None:
    assert manifests.stale(DEPLOY) == [], "regenerate: python -m trainyard.operator.manifests"
    cmd = [sys.executable, "-m", "trainyard.operator.manifests", "--check", "--out", str(DEPLOY)]
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=120).returncode == 0


def test_check_names_a_stale_and_a_stray_file(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    shutil.copytree(DEPLOY, out)
    (out / "base" / "service.yaml").write_text("# edited by hand\n")
    (out / "extra.yaml").write_text("kind: Stray\n")
    cmd = [sys.executable, "-m", "trainyard.operator.manifests", "--check", "--out", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "base/service.yaml: differs" in result.stderr
    assert "extra.yaml: not generated" in result.stderr
    written = subprocess.run([*cmd[:-3], "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert "base/service.yaml" in written.stdout
    assert manifests.stale(out) == ["extra.yaml: not generated (remove it)"]


def test_every_yaml_file_parses_into_objects_with_a_kind() -> None:
    for path in DEPLOY.rglob("*.yaml"):
        loaded = docs(str(path.relative_to(DEPLOY)))
        assert loaded, path
        if path.name != "kustomization.yaml":
            assert all(d.get("apiVersion") and d.get("kind") and d["metadata"].get("name") for d in loaded), path


def test_a_crd_for_every_kind_the_api_defines() -> None:
    crds = {d["metadata"]["name"]: d for d in docs("trainyard.yaml") if d["kind"] == "CustomResourceDefinition"}
    trainer_crds = {c["metadata"]["name"] for c in trainer.crds()}
    katib_crds = {c["metadata"]["name"] for c in katib.crds()}
    v1 = {info.crd_name for info in KINDS.values()}
    others = {"trainingjobs.ml.example.com", "optimizationjobs.trainer.kubeflow.org"}
    assert set(crds) == v1 | trainer_crds | katib_crds | others
    for info in KINDS.values():
        version = crds[info.crd_name]["spec"]["versions"][0]
        assert version["subresources"]["status"] == {}
        if info.scale is not None:
            assert version["subresources"]["scale"]["specReplicasPath"] == info.scale.spec_replicas


def test_the_deployments_flags_are_the_operators_and_its_ports_match_them() -> None:
    pod = by_kind("Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "trainyard.operator"]
    options = operator_flags.parse(container["args"])
    assert options.election.leader_elect is True
    settings = operator_main.settings_from(options)
    assert settings.controller.network_mode.value == "cluster-dns"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == int(options.metrics_bind_address.rpartition(":")[2])
    assert ports["health"] == int(options.health_probe_bind_address.rpartition(":")[2])
    assert ports["webhook-server"] == options.webhook.port
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    (mount,) = container["volumeMounts"]
    assert Path(mount["mountPath"]) == options.webhook.cert_dir
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert by_kind("Deployment")["spec"]["replicas"] == 2


def test_the_objects_reference_each_other() -> None:
    deployment, service, webhook = by_kind("Deployment"), by_kind("Service"), by_kind("ValidatingWebhookConfiguration")
    pod = deployment["spec"]["template"]
    namespace = by_kind("Namespace")["metadata"]["name"]
    account = by_kind("ServiceAccount")["metadata"]
    assert pod["spec"]["serviceAccountName"] == account["name"] and account["namespace"] == namespace
    for binding in (by_kind("ClusterRoleBinding"), by_kind("RoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["name"], "namespace": namespace}]
    assert by_kind("RoleBinding")["roleRef"]["name"] == by_kind("Role")["metadata"]["name"]
    assert by_kind("ClusterRoleBinding")["roleRef"]["name"] == by_kind("ClusterRole")["metadata"]["name"]
    labels = pod["metadata"]["labels"]
    assert all(labels[k] == v for k, v in service["spec"]["selector"].items())
    assert all(labels[k] == v for k, v in deployment["spec"]["selector"]["matchLabels"].items())
    container_ports = {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
    service_ports = {p["port"]: p["targetPort"] for p in service["spec"]["ports"]}
    assert set(service_ports.values()) <= container_ports
    assert service["metadata"]["annotations"]["prometheus.io/port"] == "8080" and service_ports[8080] == "metrics"
    for hook in webhook["webhooks"]:
        ref = hook["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"]) == (service["metadata"]["name"], namespace)
        assert service_ports[ref["port"]] == "webhook-server"
    assert {h["rules"][0]["resources"][0] for h in webhook["webhooks"]} == {i.plural for i in KINDS.values()}


def test_the_cert_manager_option_issues_the_secret_the_pods_mount() -> None:
    issuer, certificate = docs("cert-manager/certificate.yaml")
    pod = by_kind("Deployment")["spec"]["template"]["spec"]
    service = by_kind("Service")["metadata"]
    assert certificate["spec"]["secretName"] == pod["volumes"][0]["secret"]["secretName"]
    assert certificate["spec"]["issuerRef"]["name"] == issuer["metadata"]["name"]
    assert f"{service['name']}.{service['namespace']}.svc" in certificate["spec"]["dnsNames"]
    injected = manifests.CA_INJECTION["cert-manager.io/inject-ca-from"]
    assert injected == f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"


BUILTIN = [d for d in docs("trainyard.yaml") if not d["apiVersion"].startswith("kubeflow.org")]


@pytest.mark.parametrize("doc", BUILTIN, ids=[f"{d['kind']}/{d['metadata']['name']}" for d in BUILTIN])
def test_builtin_kinds_match_the_kubernetes_api_models_field_for_field(doc: dict[str, Any]) -> None:
    assert strict_round_trip(doc) == doc


def test_the_model_check_catches_a_typo_and_a_missing_required_field() -> None:
    deployment = by_kind("Deployment")
    typo = yaml.safe_load(yaml.safe_dump(deployment))
    container = typo["spec"]["template"]["spec"]["containers"][0]
    container["livenessProb"] = container.pop("livenessProbe")
    assert strict_round_trip(typo) != typo
    missing = yaml.safe_load(yaml.safe_dump(deployment))
    del missing["spec"]["selector"]
    with pytest.raises(Exception, match="selector"):
        strict_round_trip(missing)
