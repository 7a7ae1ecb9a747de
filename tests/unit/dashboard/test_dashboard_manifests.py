"""deploy/dashboard/ is the generator's output, its objects match the official API models field for
field (``api_models``) and refer to each other, and its role's job rules follow the families' kinds.

What the role grants against what the dashboard asks for is tests/e2e/test_dashboard_rbac.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from api_models import strict_round_trip
from trainyard.dashboard import manifests, pages, views
from trainyard.dashboard.__main__ import DEFAULT_HISTORY, DEFAULT_PORT, DEFAULT_TOKEN_FILE

OUT = Path(__file__).resolve().parents[3] / "deploy" / "dashboard"
DOCS = [
    d
    for name in ("rbac.yaml", "history.yaml", "deployment.yaml", "service.yaml")
    for d in yaml.safe_load_all((OUT / name).read_text())
]


def by_kind(kind: str) -> dict[str, Any]:
    (found,) = [d for d in DOCS if d["kind"] == kind]
    return found


def test_committed_manifests_are_the_generators_output_in_plain_yaml() -> None:
    assert manifests.stale(OUT) == [], "regenerate: python -m trainyard.dashboard.manifests"
    # an alias (one list object shared by two rules) is valid YAML that some tools read wrong
    assert not [p.name for p in OUT.glob("*.yaml") if "&id" in p.read_text()]


@pytest.mark.parametrize("doc", DOCS, ids=[d["kind"] for d in DOCS])
def test_every_object_matches_the_kubernetes_api_models_field_for_field(doc: dict[str, Any]) -> None:
    assert strict_round_trip(doc) == doc


def test_the_objects_refer_to_each_other() -> None:
    deployment, service, claim = by_kind("Deployment"), by_kind("Service"), by_kind("PersistentVolumeClaim")
    account, binding = by_kind("ServiceAccount")["metadata"], by_kind("ClusterRoleBinding")
    pod = deployment["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == account["name"]
    (subject,) = binding["subjects"]
    assert subject == {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    assert binding["roleRef"]["name"] == by_kind("ClusterRole")["metadata"]["name"]
    labels = pod["metadata"]["labels"]
    assert all(labels[k] == v for k, v in deployment["spec"]["selector"]["matchLabels"].items())
    assert all(labels[k] == v for k, v in service["spec"]["selector"].items())
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": DEFAULT_PORT} and [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    assert mounts[str(DEFAULT_HISTORY.parent)]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert "secret" in mounts[str(DEFAULT_TOKEN_FILE.parent)]
    assert container["args"] == ["--port", str(DEFAULT_PORT), "--history", str(DEFAULT_HISTORY)]


def verbs_on(group: str, resource: str) -> set[str]:
    rules = manifests.rules()
    return {v for r in rules if group in r["apiGroups"] and resource in r["resources"] for v in r["verbs"]}


def test_every_job_kind_is_covered_and_only_kinds_that_serve_scale_get_scale() -> None:
    for kind in views.job_kinds():
        assert verbs_on(kind.group, kind.plural) == {"get", "list", "watch", "patch", "delete"}, kind.kind
    scales = {(g, r) for rule in manifests.rules() for g in rule["apiGroups"] for r in rule["resources"] if "/" in r}
    served = {(g, f"{p}/scale") for g, p in pages.scale_paths()}
    assert served and scales - {("", "pods/log")} == served
