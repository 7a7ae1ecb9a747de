"""The operator's command line: upstream's flag spellings, values and refusals."""

from __future__ import annotations

from datetime import timedelta

import pytest
import typer

from trainyard.frameworks.network import NetworkMode
from trainyard.operator.flags import DEFAULT_LEASE_ID, go_bool, go_duration, go_style, parse
from trainyard.operator.leader import LeaderElectionConfig
from trainyard.operator.main import election_from, settings_from
from trainyard.operator.serving import parse_bind_address


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15s", 15.0), ("1m30s", 90.0), ("500ms", 0.5), ("2", 2.0), ("0.25", 0.25), ("1h", 3600.0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration(text) == seconds


@pytest.mark.parametrize("text", ["fifteen", "15x", "s", "1m30"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(typer.BadParameter, match="invalid duration"):
        go_duration(text)


@pytest.mark.parametrize(("text", "value"), [("true", True), ("T", True), ("1", True), ("false", False), ("0", False)])
def test_go_bools(text: str, value: bool) -> None:
    assert go_bool(text) is value


@pytest.mark.parametrize(
    ("text", "address"),
    [(":8080", ("0.0.0.0", 8080)), ("127.0.0.1:9", ("127.0.0.1", 9)), ("[::1]:8081", ("::1", 8081)), ("0", None)],
)
def test_bind_addresses(text: str, address: tuple[str, int] | None) -> None:
    assert parse_bind_address(text) == address


@pytest.mark.parametrize("text", ["8080", "localhost", ":http", ":70000"])
def test_bad_bind_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="invalid bind address"):
        parse_bind_address(text)


def test_upstream_defaults() -> None:
    options = parse([])
    settings = settings_from(options)
    assert settings.namespace == "*" and settings.workers == 1 and settings.kinds == ()
    assert settings.controller.network_mode is NetworkMode.CLUSTER_DNS
    assert settings.controller.gang_scheduler_name == "" and settings.controller.wait_for_master is not None
    assert (options.webhook.port, options.plugin_flags["pytorch_init_container_image"]) == (9443, "busybox:1.36")
    assert (options.metrics_bind_address, options.health_probe_bind_address) == (":8080", ":8081")
    assert election_from(options.election) is None
    assert options.election.leader_election_id == DEFAULT_LEASE_ID == "1ca428e5.training-operator.kubeflow.org"


def test_flags_become_settings() -> None:
    options = parse(
        [
            "--namespace", "team-a",
            "--enable-scheme", "PYTORCHJOB",
            "--enable-scheme", "pytorchjob",
            "--controller-threads", "4",
            "--gang-scheduler-name", "volcano",
            "--network-mode", "host",
            "--host-ports", "30000-30100",
            "--leader-elect=true",
            "--leader-election-namespace", "kubeflow",
            "--leader-election-identity", "me",
            "--leader-elect-lease-duration", "30s",
            "--leader-elect-renew-deadline", "20s",
            "--leader-elect-retry-period", "4s",
            "--pytorch-init-container-image", "",
            "--pending-timeout", "90s",
        ]
    )  # fmt: skip
    settings = settings_from(options)
    assert settings.namespace == "team-a" and settings.kinds == ("PyTorchJob",) and settings.workers == 4
    assert settings.controller.gang_scheduler_name == "volcano" and settings.host_ports == (30000, 30100)
    assert settings.controller.network_mode is NetworkMode.HOST
    assert settings.controller.wait_for_master is None
    assert settings.controller.pending_timeout == timedelta(seconds=90)
    assert election_from(options.election) == LeaderElectionConfig(
        namespace="kubeflow",
        name=DEFAULT_LEASE_ID,
        identity="me",
        lease_duration=30.0,
        renew_deadline=20.0,
        retry_period=4.0,
    )


def test_kubeflow_namespace_env_is_the_default_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEFLOW_NAMESPACE", "from-env")
    assert settings_from(parse([])).namespace == "from-env"


@pytest.mark.parametrize(
    ("flags", "elects"),
    [
        (["--leader-elect=false"], False),
        (["--leader-elect=true"], True),
        (["--leader-elect=F"], False),
        (["--leader-elect"], True),
        (["--leader-elect", "--namespace", "x"], True),
        (["--leader-elect", "false"], False),
        (["--leader-elect", "1"], True),
        (["--namespace", "x", "--leader-elect"], True),
    ],
    ids=["=false", "=true", "=F", "alone-last", "alone-then-a-flag", "value-after", "1-after", "alone-after-a-flag"],
)
def test_leader_elect_spellings_of_go_and_argparse(flags: list[str], elects: bool) -> None:
    assert parse(flags).election.leader_elect is elects


def test_go_style_gives_a_lone_boolean_its_value_and_leaves_the_rest() -> None:
    argv = ["--leader-elect", "--leader-elect-lease-duration", "30s", "--leader-elect"]
    assert go_style(argv) == ["--leader-elect=true", "--leader-elect-lease-duration", "30s", "--leader-elect=true"]
    assert go_style(["--leader-elect", "false", "--leader-elect=0"]) == ["--leader-elect", "false", "--leader-elect=0"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--leader-elect=maybe"], "invalid boolean value 'maybe'"),
        (["--leader-elect-lease-duration", "15x"], "invalid duration '15x'"),
        (["--pending-timeout", "soon"], "invalid duration 'soon'"),
        (["--network-mode", "bridge"], "bridge"),
        (["--zap-log-level", "trace"], "trace"),
        (["--controller-threads", "many"], "valid integer"),
    ],
)
def test_values_the_command_line_refuses(flags: list[str], message: str) -> None:
    with pytest.raises(typer.BadParameter, match=message):
        parse(flags)


def test_durations_become_seconds() -> None:
    options = parse(["--leader-elect-renew-deadline", "1m30s", "--leader-elect-retry-period", "500ms"])
    assert (options.election.leader_elect_renew_deadline, options.election.leader_elect_retry_period) == (90.0, 0.5)
    assert (options.election.leader_elect_lease_duration, options.pending_timeout) == (15.0, None)
    assert parse(["--pending-timeout=0"]).pending_timeout == 0.0


def test_default_identity_is_host_and_uuid() -> None:
    config = election_from(parse(["--leader-elect", "--leader-election-namespace", "x"]).election)
    assert config is not None and "_" in config.identity and len(config.identity.rsplit("_", 1)[1]) == 36


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--enable-scheme", "foojob"], "unknown"),
        (["--controller-threads", "0"], "at least 1"),
        (["--host-ports", "30000"], "LOW-HIGH"),
        (["--host-ports", "40000-30000"], "LOW-HIGH"),
    ],
)
def test_bad_settings(flags: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings_from(parse(flags))


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "message"),
    [
        (10.0, 10.0, 2.0, "lease duration must be greater than the renew deadline"),
        (15.0, 2.4, 2.0, "renew deadline must be greater than 1.2"),
        (15.0, 10.0, 0.0, "greater than"),
    ],
)
def test_election_timings_are_checked_as_client_go_does(lease: float, renew: float, retry: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LeaderElectionConfig("ns", "lease", "me", lease_duration=lease, renew_deadline=renew, retry_period=retry)


def test_host_ports_default_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two planes on one host (parallel test workers) each need a range of their own.
    monkeypatch.setenv("TRAINYARD_HOST_PORTS", "21000-21999")
    assert settings_from(parse([])).host_ports == (21000, 21999)
    monkeypatch.delenv("TRAINYARD_HOST_PORTS")
    assert settings_from(parse([])).host_ports == (20000, 32767)
    assert settings_from(parse(["--host-ports", "30000-30100"])).host_ports == (30000, 30100)
