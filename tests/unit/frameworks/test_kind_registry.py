"""A kind is a plugin: a throw-away kind registered in the two tables reaches every generic path.

``ToyJob`` is one API module's worth (types, defaults, rules, its ``KindInfo``) and ``Toy`` its
framework plugin, both defined here and registered for one test at a time (``api.kinds.KINDS``,
``frameworks.registry.PLUGINS``). No generic module changes for them: defaulting, admission, the
CRD, the operator's flags and metrics, the SDK's kind lookup and function jobs, and the CLI's
words all pick the kind up from the tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest
from pydantic import Field

from trainyard.api.common import ReplicaSpec, RunPolicy, TrainingJob
from trainyard.api.core import Container, EnvVar, RestartPolicy
from trainyard.api.crd import crd_for
from trainyard.api.defaults import apply_defaults
from trainyard.api.field_errors import ErrorType, FieldError
from trainyard.api.kindinfo import KindInfo, PrinterColumn
from trainyard.api.kinds import KINDS, framework_label, kind_for_plural
from trainyard.api.meta import K8sModel
from trainyard.api.validation import review_job
from trainyard.cli.get import complete_kind
from trainyard.controller.lifecycle import ttl_deletion
from trainyard.frameworks import registry
from trainyard.frameworks.base import EnvScope, RendezvousHost, ReplicaCounts, Verdict
from trainyard.frameworks.capabilities import OperatorFlag
from trainyard.frameworks.network import Network
from trainyard.operator.flags import parse
from trainyard.operator.main import settings_from
from trainyard.sdk import functions
from trainyard.sdk.kinds import builtin_kinds, kind_info, master_replica, resolve

# -- the API module -------------------------------------------------------------------------------


class ToyJobSpec(K8sModel):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    toy_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    speed: int | None = None


class ToyJob(TrainingJob):
    spec: ToyJobSpec = Field(default_factory=ToyJobSpec)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.toy_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


def default_toy(job: TrainingJob) -> None:
    assert isinstance(job, ToyJob)
    if job.spec.speed is None:
        job.spec.speed = 3


def validate_toy(job: TrainingJob) -> list[FieldError]:
    assert isinstance(job, ToyJob)
    if job.spec.speed is not None and job.spec.speed > 10:
        return [FieldError(ErrorType.FORBIDDEN, "spec.speed", "must be at most 10")]
    return []


def toy_warnings(spec: Mapping[str, Any]) -> list[str]:
    return ["spec.turbo is deprecated"] if "turbo" in spec else []


TOYJOB = KindInfo(
    kind="ToyJob",
    plural="toyjobs",
    singular="toyjob",
    short_names=("toy",),
    group="toys.trainyard.dev",
    version="v1alpha1",
    model=ToyJob,
    replica_specs_field="toyReplicaSpecs",
    replica_types=("Leader", "Follower"),
    default_container="toy",
    default_port_name="toy-port",
    default_port=4242,
    default_restart_policy=RestartPolicy.NEVER,
    controller_name="toyjob-controller",
    framework="toy",
    printer_columns=(PrinterColumn(name="Speed", type="integer", json_path=".spec.speed"),),
    categories=("trainyard",),
    set_defaults=default_toy,
    validate=validate_toy,
    warnings=toy_warnings,
)

# -- the framework plugin -------------------------------------------------------------------------


class BareToy:
    """The Framework contract only: no operator flags, no jobs from a function."""

    info = TOYJOB
    env_scope = EnvScope.EVERY_CONTAINER

    def env(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[EnvVar]:
        return []

    def init_containers(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[Container]:
        return []

    def is_master_role(self, job: TrainingJob, replica_type: str, index: int) -> bool:
        # the last Follower leads: nothing a generic rule could guess
        followers = job.replica_specs.get("Follower")
        return followers is not None and replica_type == "Follower" and index == (followers.replicas or 1) - 1

    def is_elastic(self, job: TrainingJob) -> bool:
        return False

    def rendezvous_host(self, job: TrainingJob) -> RendezvousHost | None:
        return None

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        return []


class Toy(BareToy):
    """With both optional capabilities (``frameworks.capabilities``)."""

    function_image = "toys:1"
    function_roles: Mapping[str, str] = {}

    operator_flags = (OperatorFlag("--toy-pending-minutes", int, None, help="minutes a toy may stay Pending"),)

    def controller_settings(self, values: Mapping[str, Any]) -> dict[str, Any]:
        minutes = values["toy_pending_minutes"]
        return {} if minutes is None else {"pending_timeout": timedelta(minutes=minutes)}

    def function_entrypoint(self, num_workers: int, num_procs_per_worker: int | str | None) -> str:
        return "python -u"

    def function_spec(
        self,
        template: dict[str, Any],
        num_workers: int,
        num_procs_per_worker: int | str | None,
        roles: Mapping[str, int],
    ) -> dict[str, Any]:
        return {
            "toyReplicaSpecs": {
                "Leader": {"replicas": 1, "template": template},
                "Follower": {"replicas": num_workers, "template": template},
            }
        }


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(KINDS, TOYJOB.kind, TOYJOB)
    monkeypatch.setitem(registry.PLUGINS, TOYJOB.kind, Toy())


def manifest(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": TOYJOB.api_version, "kind": "ToyJob", "metadata": {"name": "t"}, "spec": spec}


def replicas(image: str = "toys:1", **extra: Any) -> dict[str, Any]:
    return {"template": {"spec": {"containers": [{"name": "toy", "image": image}]}}, **extra}


def train() -> None:
    print("toy")


# -- the tests ------------------------------------------------------------------------------------


def test_every_kind_has_one_plugin_and_every_plugin_a_kind() -> None:
    assert set(KINDS) == set(registry.kinds())
    assert all(registry.plugin_for(kind).info is info for kind, info in KINDS.items())


def test_defaults_are_the_common_ones_then_the_kinds_own(toy: None) -> None:
    job = apply_defaults(ToyJob.model_validate(manifest({"toyReplicaSpecs": {"leader": replicas()}})), TOYJOB)
    leader = job.replica_specs["Leader"]
    assert (leader.replicas, leader.restart_policy) == (1, "Never")
    assert [(p.name, p.container_port) for p in leader.template.spec.containers[0].ports or []] == [("toy-port", 4242)]
    assert job.spec.speed == 3


def test_admission_has_the_common_rules_the_kinds_own_and_its_warnings(toy: None) -> None:
    body = manifest({"toyReplicaSpecs": {"Leader": replicas(image=""), "Boss": replicas()}, "speed": 11, "turbo": 1})
    review = review_job(body, TOYJOB)
    assert [(e.type, e.field) for e in review.errors] == [
        (ErrorType.REQUIRED, "spec.toyReplicaSpecs.Leader.template.spec.containers[0].image"),
        (ErrorType.NOT_SUPPORTED, "spec.toyReplicaSpecs.Boss"),
        (ErrorType.FORBIDDEN, "spec.speed"),
    ]
    assert review.warnings == ["spec.turbo is deprecated"]


def test_the_crd_names_the_kinds_group_and_columns(toy: None) -> None:
    crd = crd_for(TOYJOB)
    assert crd["metadata"]["name"] == "toyjobs.toys.trainyard.dev"
    assert crd["spec"]["names"]["categories"] == ["trainyard"]
    assert crd["spec"]["versions"][0]["additionalPrinterColumns"] == [
        {"name": "Speed", "type": "integer", "jsonPath": ".spec.speed"}
    ]
    assert kind_for_plural("toyjobs") is TOYJOB


def test_the_operator_takes_the_plugins_flags_and_labels_its_metrics(toy: None) -> None:
    settings = settings_from(parse(["--enable-scheme", "TOYJOB", "--toy-pending-minutes", "7"]))
    assert settings.kinds == ("ToyJob",)
    assert settings.controller.pending_timeout == timedelta(minutes=7)
    assert settings.controller.wait_for_master is not None  # PyTorch's flags are still there
    assert framework_label("ToyJob") == "toy"
    job = ToyJob.model_validate(manifest({}))
    assert ttl_deletion(job, registry.plugin_for("ToyJob")).events[0].reason == "SuccessfulDeleteJob"


def test_the_sdk_finds_the_kind_and_builds_function_jobs_through_its_plugin(toy: None) -> None:
    assert kind_info("toy") is TOYJOB
    job = functions.job_from_function(name="f", namespace="d", train_func=train, num_workers=2, kind="ToyJob")
    assert (job["apiVersion"], job["kind"]) == ("toys.trainyard.dev/v1alpha1", "ToyJob")
    follower = job["spec"]["toyReplicaSpecs"]["Follower"]
    assert follower["replicas"] == 2
    container = follower["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"]) == ("toy", "toys:1")
    assert 'exec python -u "$program_path/' in container["args"][0]
    assert master_replica(job, TOYJOB) == ("Follower", 1)


def test_a_kind_whose_plugin_cannot_run_a_function_is_refused_by_the_sdk(
    toy: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(registry.PLUGINS, TOYJOB.kind, BareToy())
    able = "PyTorchJobs or TFJobs or XGBoostJobs"
    with pytest.raises(ValueError, match=rf"^jobs from a function or an image are {able}, not ToyJob$"):
        functions.job_from_function(name="f", namespace="d", train_func=train, kind="ToyJob")
    assert registry.function_jobs("ToyJob") is None and registry.function_jobs("PyTorchJob") is not None


def test_the_cli_completes_and_resolves_the_kinds_words(toy: None) -> None:
    assert complete_kind("to") == ["toyjobs", "toy"]
    assert "toyjobs" in complete_kind("")
    toy_kind = resolve("toy", builtin_kinds())
    assert [(k.kind, k.api_version, k.default_container) for k in toy_kind] == [
        ("ToyJob", "toys.trainyard.dev/v1alpha1", "toy")
    ]
