"""The operator as its own process: ``yard operator`` / ``python -m trainyard.operator`` against a
``yard up --no-operator`` plane, its upstream flags, probes and ``/metrics``, and two replicas
electing one leader through a Lease (failover on SIGKILL; a frozen leader fences itself).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_process import Api, OperatorProcess, condition, sample, sleeper_job

from conftest import REPO, Kubectl, Plane, eventually, free_port, own_plane

pytestmark = pytest.mark.e2e

CREATED = "training_operator_jobs_created_total"
SUCCESSFUL = "training_operator_jobs_successful_total"
RECONCILES = "controller_runtime_reconcile_total"
LEADER = "leader_election_master_status"
LEASE = "trainyard-e2e-lease"
# Short timings (client-go's ratios) so that failover takes seconds.
FAST_ELECTION = (
    "--leader-elect",
    "--leader-election-namespace",
    "default",
    "--leader-election-id",
    LEASE,
    "--leader-elect-lease-duration",
    "3s",
    "--leader-elect-renew-deadline",
    "2s",
    "--leader-elect-retry-period",
    "500ms",
)


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-no-operator", "--no-operator")


@pytest.fixture(scope="module")
def bare_kubectl(bare: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(bare, tmp_path_factory.mktemp("kube-cache-bare"))


def new_namespace(api: Api) -> str:
    name = f"op-{uuid.uuid4().hex[:6]}"
    api.ensure_namespace(name)
    return name


def run_job(api: Api, namespace: str, name: str) -> dict[str, Any]:
    api.create_job(namespace, sleeper_job(name, workers=1, seconds=[0.3, 0.3]))

    def done() -> dict[str, Any] | None:
        job = next((j for j in api.jobs(namespace) if j["metadata"]["name"] == name), None)
        return job if job is not None and condition(job, "Succeeded") else None

    return eventually(done, timeout=120, what=f"{namespace}/{name} to succeed")


def counted(operator: OperatorProcess, name: str, namespace: str) -> float | None:
    return sample(operator.scrape(), name, framework="pytorch", job_namespace=namespace)


def reconciles(operator: OperatorProcess) -> float:
    text = operator.scrape()
    return sum(
        sample(text, RECONCILES, controller="pytorchjob-controller", result=result) or 0.0
        for result in ("success", "error", "requeue_after")
    )


def test_no_operator_plane_leaves_jobs_alone_until_an_operator_runs(bare: Plane, tmp_path: Path) -> None:
    status = bare.yard("status").stdout
    assert "not in this process" in status and "yard operator" in status
    api = Api(bare)
    ns = new_namespace(api)
    api.create_job(ns, sleeper_job("waits", workers=0, seconds=[0.2, 0.2]))
    assert not api.pods(ns)

    operator = OperatorProcess(bare, tmp_path / "operator.log").start()
    try:
        eventually(lambda: condition(api.jobs(ns)[0], "Succeeded"), timeout=120, what="the job to succeed")
        assert eventually(lambda: operator.probe("/healthz") == 200 and operator.probe("/readyz") == 200)
    finally:
        assert operator.stop() == 0, (tmp_path / "operator.log").read_text()


def test_yard_operator_serves_metrics_counted_once_per_job(bare: Plane, tmp_path: Path) -> None:
    api = Api(bare)
    ns = new_namespace(api)
    metrics, probes = free_port(), free_port()
    log = tmp_path / "yard-operator.log"
    argv = [sys.executable, "-m", "trainyard.cli.main", "--home", str(bare.home), "operator"]
    flags = ["--metrics-bind-address", f"127.0.0.1:{metrics}", "--health-probe-bind-address", f"127.0.0.1:{probes}"]
    flags += ["--kube-api-qps", "50", "--kube-api-burst", "100"]  # client-go's flags, through `yard operator`
    with log.open("ab") as out:
        yard = subprocess.Popen([*argv, *flags], stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    # The same scraping helpers, pointed at the ports `yard operator` was given.
    first = OperatorProcess(bare, log)
    first.metrics_port, first.probes_port = metrics, probes
    try:
        run_job(api, ns, "once")
        assert eventually(lambda: counted(first, SUCCESSFUL, ns) == 1.0, what="successful_total 1")
        assert counted(first, CREATED, ns) == 1.0
        assert first.probe("/readyz") == 200
        text = first.scrape()
        assert sample(text, "workqueue_depth", name="pytorchjob-controller") is not None
        assert "controller_runtime_reconcile_time_seconds_bucket" in text
        assert reconciles(first) >= 2
        # Its API client is metered (requests by code) and rate-limited (each request's wait for a token).
        assert 'rest_client_requests_total{code="200"' in text
        assert "rest_client_rate_limiter_duration_seconds_count" in text
    finally:
        yard.send_signal(signal.SIGTERM)
        assert yard.wait(timeout=60) == 0, log.read_text()

    # A restarted operator reconciles the finished job again but does not count it created again
    # (upstream's Create predicate does, on every restart).
    again = OperatorProcess(bare, tmp_path / "again.log").start()
    try:
        eventually(lambda: reconciles(again) >= 1, what="the restarted operator to reconcile the finished job")
        # OperatorProcess passes --kube-api-qps 0, as `yard operator` does for a local plane: no limiter, no waits
        assert "rest_client_rate_limiter_duration_seconds_count" not in again.scrape()
        assert counted(again, CREATED, ns) is None
        assert counted(again, SUCCESSFUL, ns) is None
        run_job(api, ns, "second")
        assert eventually(lambda: counted(again, CREATED, ns) == 1.0, what="created_total 1 for the new job")
        assert eventually(lambda: counted(again, SUCCESSFUL, ns) == 1.0, what="successful_total 1")
    finally:
        again.stop()


def test_yard_operator_refuses_a_plane_with_its_own_operator(plane: Plane) -> None:
    result = plane.yard("operator", check=False)
    assert result.returncode == 1
    assert "runs its own operator" in result.stderr and "--no-operator" in result.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--enable-scheme", "nosuchjob"], "--enable-scheme nosuchjob: unknown"),
        (["--leader-elect", "--leader-elect-renew-deadline", "20s"], "greater than the renew deadline"),
        (["--metrics-bind-address", "localhost"], "invalid bind address 'localhost'"),
        (["--controller-threads", "0"], "--controller-threads must be at least 1"),
    ],
)
def test_bad_flags_are_usage_errors(bare: Plane, flags: list[str], message: str) -> None:
    argv = [sys.executable, "-m", "trainyard.operator", "--kubeconfig", str(bare.kubeconfig), *flags]
    result = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and message in result.stderr, result.stderr


def holder(kubectl: Kubectl) -> str:
    """The lease's holder, ``""`` while nobody has created it yet."""
    result = kubectl.run("get", "lease", LEASE, "-n", "default", "-o", "jsonpath={.spec.holderIdentity}")
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
        return ""
    return result.stdout


def test_two_replicas_elect_one_leader_and_fail_over(bare: Plane, bare_kubectl: Kubectl, tmp_path: Path) -> None:
    api = Api(bare)
    ns = new_namespace(api)
    replicas = {
        name: OperatorProcess(bare, tmp_path / f"{name}.log", *FAST_ELECTION, "--leader-election-identity", name)
        for name in ("replica-a", "replica-b")
    }
    for replica in replicas.values():
        replica.start()
    try:
        leader_name = eventually(lambda: holder(bare_kubectl) in replicas and holder(bare_kubectl), what="a leader")
        leader = replicas[leader_name]
        standby_name = next(n for n in replicas if n != leader_name)
        standby = replicas[standby_name]
        assert eventually(lambda: sample(leader.scrape(), LEADER, name=LEASE) == 1.0)
        assert eventually(lambda: sample(standby.scrape(), LEADER, name=LEASE) == 0.0)
        table = bare_kubectl("get", "leases", "-n", "default")
        assert any(line.split()[:2] == [LEASE, leader_name] for line in table.splitlines()), table

        run_job(api, ns, "under-first-leader")
        assert reconciles(standby) == 0, "a standby must not reconcile"
        assert standby.probe("/readyz") == 200  # a standby is ready, it only does not lead

        transitions = bare_kubectl.json("get", "lease", LEASE, "-n", "default")["spec"].get("leaseTransitions", 0)
        leader.kill()
        eventually(lambda: holder(bare_kubectl) == standby_name, timeout=60, what="the standby to take over")
        lease = bare_kubectl.json("get", "lease", LEASE, "-n", "default")
        assert lease["spec"]["leaseTransitions"] == transitions + 1
        assert eventually(lambda: sample(standby.scrape(), LEADER, name=LEASE) == 1.0)
        run_job(api, ns, "under-second-leader")

        # A leader frozen past its lease is replaced; when it wakes up it fences itself and
        # stops reconciling instead of fighting the new leader.
        leader.start()
        eventually(lambda: sample(leader.scrape(), LEADER, name=LEASE) == 0.0, what="the restarted replica as standby")
        standby.signal(signal.SIGSTOP)
        try:
            eventually(lambda: holder(bare_kubectl) == leader_name, timeout=60, what="failover from a frozen leader")
        finally:
            standby.signal(signal.SIGCONT)
        eventually(
            lambda: sample(standby.scrape(), LEADER, name=LEASE) == 0.0, what="the woken replica to know it lost"
        )
        before = reconciles(standby)
        run_job(api, ns, "after-fencing")
        assert reconciles(standby) == before, "a replica that lost the lease must stop reconciling"
        assert holder(bare_kubectl) == leader_name
    finally:
        for replica in replicas.values():
            replica.kill()


def test_clean_stop_releases_the_lease(bare: Plane, bare_kubectl: Kubectl, tmp_path: Path) -> None:
    flags = [*FAST_ELECTION, "--leader-elect-lease-duration", "30s", "--leader-elect-renew-deadline", "20s"]
    first = OperatorProcess(bare, tmp_path / "first.log", *flags, "--leader-election-identity", "first").start()
    try:
        eventually(lambda: holder(bare_kubectl) == "first", timeout=60, what="the first replica to lead")
        assert first.stop() == 0
        lease = bare_kubectl.json("get", "lease", LEASE, "-n", "default")
        assert lease["spec"].get("holderIdentity", "") == "" and lease["spec"]["leaseDurationSeconds"] == 1
        # A released lease is taken at once, not after the 30 s lease duration.
        second = OperatorProcess(bare, tmp_path / "second.log", *flags, "--leader-election-identity", "second")
        second.start()
        try:
            eventually(lambda: holder(bare_kubectl) == "second", timeout=15, what="the second replica to lead")
        finally:
            second.kill()
    finally:
        first.kill()


def api_requests(text: str) -> float:
    """``rest_client_requests_total`` summed over its codes, hosts and methods."""
    lines = (line for line in text.splitlines() if line.startswith("rest_client_requests_total{"))
    return sum(float(line.rpartition(" ")[2]) for line in lines)


def test_embedded_plane_serves_the_operator_metrics(plane: Plane, kubectl: Kubectl) -> None:
    api = Api(plane)
    ns = new_namespace(api)
    before = api_requests(kubectl("get", "--raw", "/metrics"))
    run_job(api, ns, "metered")

    def scraped() -> str | None:
        text = kubectl("get", "--raw", "/metrics")
        return text if sample(text, SUCCESSFUL, framework="pytorch", job_namespace=ns) == 1.0 else None

    text = eventually(scraped, what="successful_total 1 on the plane's /metrics")
    assert sample(text, CREATED, framework="pytorch", job_namespace=ns) == 1.0
    # The in-process operator's own client, metered as client-go's (its startup lists and watches
    # counted before the job) and not rate-limited (no waits recorded).
    assert before > 0 and api_requests(text) > before
    assert 'rest_client_requests_total{code="201",host="127.0.0.1:' in text
    assert "rest_client_rate_limiter_duration_seconds_count" not in text
