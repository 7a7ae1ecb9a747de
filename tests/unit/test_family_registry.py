"""A job family is a registration: a throw-away family registered in the two tables reaches every generic path.

``BakeJob`` is one API module's worth of family (its kind, CRD, seed object, ``JobView`` and
metrics reader: one ``api.families.FAMILIES`` row) and a trivial reconciler with its RBAC (one
``operator.families.OPERATOR_FAMILIES`` row), both defined here and registered for one test at a
time. No generic module changes for it: the plane's CRD install, the SDK's kinds and views, the
CLI's words and columns, the operator's metrics, flags, manager and RBAC all read the tables.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from prometheus_client.parser import text_string_to_metric_families

from trainyard.api import families
from trainyard.api.family import Family, FamilyKind, Seed
from trainyard.api.jobshapes import JobSample, number
from trainyard.api.jobview import JobView, job_age, status_of
from trainyard.cli.get import complete_kind
from trainyard.cli.tables import job_columns, job_headers, job_row
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.plane import ApiPlane
from trainyard.embedded import kubeconfig
from trainyard.frameworks.base import ChildKind
from trainyard.operator import families as operator_families
from trainyard.operator import manifests
from trainyard.operator.families import OperatorFamily, Running, Wiring
from trainyard.operator.flags import parse
from trainyard.operator.main import settings_from
from trainyard.operator.manager import Operator
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.rbac import Rule
from trainyard.sdk.jobstate import state
from trainyard.sdk.kinds import builtin_kinds, resolve

Obj = dict[str, Any]
GROUP = "toy.example.com"
NOW = datetime(2026, 1, 1, tzinfo=UTC)

# -- the API half: kind, CRD, seed, view, metrics reader ----------------------------------------------

BAKEJOB = FamilyKind(
    kind="BakeJob", plural="bakejobs", singular="bakejob", group=GROUP, version="v1", short_names=("bj",)
)


def bakejob_crd() -> Obj:
    names = {"kind": "BakeJob", "listKind": "BakeJobList", "plural": "bakejobs", "singular": "bakejob"}
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    version = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"bakejobs.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced", "names": names, "versions": [version]},
    }


def oven(job: Obj) -> str:
    return str((job.get("spec") or {}).get("oven", "-"))


VIEW = JobView(
    family="BakeJob (toy.example.com)",
    state=lambda job: str(status_of(job).get("phase") or "Proofing"),
    succeeded="Baked",
    pod_labels=lambda name: {f"{GROUP}/bakejob": name},
    summary=oven,
    wanted=lambda job: [],
    columns=(("OVEN", oven), ("AGE", job_age)),
)


def sample(job: Obj) -> JobSample:
    status = status_of(job)
    return JobSample(state=str(status.get("phase") or "Pending"), progress=number(status.get("done")), workers=1)


TOY = Family(
    name="bakejobs",
    kinds=lambda: (BAKEJOB,),
    crds=lambda: [bakejob_crd()],
    view=VIEW,
    sample=sample,
    seeds=lambda: [Seed("", "v1", "namespaces", "", "bakery", {"metadata": {"name": "bakery"}})],
)

# -- the operator half: a trivial reconciler, its RBAC ------------------------------------------------


class Baker:
    """Reconciles nothing; records that the manager started it with the shared wiring."""

    def __init__(self, wiring: Wiring) -> None:
        self.wiring = wiring
        self.ran = False

    async def run(self) -> None:
        self.ran = True


BAKERS: list[Baker] = []


def bakers(wiring: Wiring, kinds: tuple[str, ...]) -> list[Running]:
    baker = Baker(wiring)
    BAKERS.append(baker)
    return [Running(kind, run=baker.run) for kind in kinds]


TOY_OPERATOR = OperatorFamily(
    name="bakejobs",
    controllers=bakers,
    rules=lambda: [Rule(GROUP, ("bakejobs",), ("list", "watch"), "the BakeJobs' informer")],
    child_kinds=lambda: [ChildKind("v1", "ConfigMap", "configmaps", purpose="a BakeJob's recipe")],
)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(families.FAMILIES, TOY.name, TOY)
    monkeypatch.setitem(operator_families.OPERATOR_FAMILIES, TOY_OPERATOR.name, TOY_OPERATOR)
    BAKERS.clear()


def bakejob(phase: str | None = None, **status: Any) -> Obj:
    meta = {"name": "rye", "namespace": "ml", "uid": "uid-rye", "creationTimestamp": "2026-01-01T00:00:00Z"}
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "BakeJob",
        "metadata": meta,
        "spec": {"oven": "stone"},
        "status": {**({"phase": phase} if phase else {}), **status},
    }


def test_the_plane_installs_its_crd_and_seeds(toy: None, tmp_path: Path) -> None:
    plane = ApiPlane(Layout(tmp_path), port=0)
    try:
        plane.bootstrap()
        crd_rt = plane.registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        ns_rt = plane.registry.lookup("", "v1", "namespaces")
        assert crd_rt is not None and ns_rt is not None
        assert plane.objects.get(crd_rt, "", f"bakejobs.{GROUP}")["spec"]["group"] == GROUP
        assert plane.registry.lookup(GROUP, "v1", "bakejobs") is not None
        assert plane.objects.get(ns_rt, "", "bakery")["metadata"]["name"] == "bakery"
        plane.bootstrap()  # a second start finds both and leaves them
    finally:
        plane.store.close()


def test_the_sdk_and_cli_name_and_read_its_jobs(toy: None) -> None:
    (kind,) = resolve("bj", builtin_kinds())
    assert (kind.kind, kind.api_version, kind.view) == ("BakeJob", f"{GROUP}/v1", VIEW)
    assert kind in resolve("jobs", builtin_kinds())
    assert "bakejobs" in complete_kind("bake") and "bj" in complete_kind("b")
    job = bakejob("Rising")
    assert state(job, kind.view) == "Rising" and kind.view.outcome(job) is None
    columns = job_columns([kind], wide=False)
    assert job_headers(columns, wide=False, all_ns=False, show_kind=False) == ["NAME", "STATE", "OVEN", "AGE"]
    row = job_row(job, kind, columns, wide=False, all_ns=False, show_kind=False)
    assert [str(cell) for cell in row[:3]] == ["rye", "Rising", "stone"]


def test_the_operators_metrics_read_its_jobs(toy: None) -> None:
    metrics = OperatorMetrics(clock=lambda: NOW)
    metrics.observe_job(bakejob("Rising", done="45"), NOW)
    samples = {
        (s.name, s.labels.get("kind"), s.labels.get("state")): s.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for s in family.samples
    }
    assert samples[("trainingjob_total", None, "Rising")] == 1
    assert samples[("trainingjob_progress_percent", "BakeJob", None)] == 45
    assert samples[("trainingjob_allocated_workers", "BakeJob", None)] == 1


def test_rbac_generation_grants_what_its_controller_and_jobs_ask(toy: None) -> None:
    (role,) = [doc for doc in manifests.rbac() if doc["kind"] == "ClusterRole"]
    assert {"apiGroups": [GROUP], "resources": ["bakejobs"], "verbs": ["list", "watch"]} in role["rules"]
    configmaps = next(r for r in role["rules"] if r["resources"] == ["configmaps"])
    assert configmaps["verbs"]  # the owned kind's rule, merged with the replica-spec kinds' own
    assert f"crds/{GROUP}_bakejobs.yaml" in manifests.render()


def test_the_operator_accepts_its_kind_and_runs_its_controller(toy: None) -> None:
    settings = settings_from(parse(["--enable-scheme", "bakejob"]))
    assert tuple(settings.kinds) == ("BakeJob",)
    client = AsyncClient(KubeConfig.from_dict(kubeconfig("http://127.0.0.1:1")))  # never connected to
    operator = Operator(client, settings)
    assert [c.kind for c in operator.controllers] == ["BakeJob"]
    asyncio.run(operator.run())
    (baker,) = BAKERS
    assert baker.ran and baker.wiring.metrics is operator.metrics


def test_unregistered_it_is_gone() -> None:
    assert "BakeJob" not in families.job_kinds()
    assert not resolve("jobs", [k for k in builtin_kinds() if k.kind == "BakeJob"])
    assert families.sample(bakejob("Rising")) is None
    assert not any(GROUP in r["apiGroups"] for d in manifests.rbac() if d["kind"] == "ClusterRole" for r in d["rules"])
    with pytest.raises(ValueError, match="unknown"):
        settings_from(parse(["--enable-scheme", "bakejob"]))
