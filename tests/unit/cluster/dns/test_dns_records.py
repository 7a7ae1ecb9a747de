"""The cluster DNS's records (``dns.records``) and its server over real UDP and TCP sockets (``dns.server``)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import dns.message
import dns.query
import dns.rcode
import pytest

from trainyard.cluster.clients.dns import records
from trainyard.cluster.clients.dns.server import ClusterDns, address_for, host_nameservers
from trainyard.kit.informer import Informer


def service(name: str, ns: str = "default", *, headless: bool = True, selector: dict[str, str] | None = None) -> Any:
    spec: dict[str, Any] = {"clusterIP": "None" if headless else "10.0.0.7", "selector": selector or {"app": name}}
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": "1"}, "spec": spec}


def pod(
    name: str, ns: str = "default", *, labels: dict[str, str], ready: bool = True, ip: str = "127.0.0.1", **spec: str
) -> Any:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "metadata": {"name": name, "namespace": ns, "labels": labels, "resourceVersion": "1"},
        "spec": dict(spec),
        "status": {"phase": "Running", "podIP": ip, "conditions": conditions},
    }


SERVICES = {
    ("default", "job-master-0"): service("job-master-0"),
    ("default", "job"): service("job", selector={"job": "j"}),
    ("default", "api"): service("api", headless=False),
}
PODS = {
    "default": [
        pod("job-master-0", labels={"app": "job-master-0", "job": "j"}, ip="127.0.0.2"),
        pod("job-worker-0", labels={"job": "j"}, hostname="w0", subdomain="job", ip="127.0.0.3"),
        pod("job-worker-1", labels={"job": "j"}, ready=False, hostname="w1", subdomain="job", ip="127.0.0.4"),
    ]
}


def look(name: str) -> records.Answer:
    return records.lookup(name, lambda ns, n: SERVICES.get((ns, n)), lambda ns: PODS.get(ns, []))


def test_a_headless_service_answers_its_ready_pods() -> None:
    assert look("job-master-0.default.svc.cluster.local.") == records.Answer(True, ("127.0.0.2",))
    assert look("JOB.default.svc.cluster.local") == records.Answer(True, ("127.0.0.2", "127.0.0.3"))


def test_a_service_with_a_cluster_ip_answers_it() -> None:
    assert look("api.default.svc.cluster.local") == records.Answer(True, ("10.0.0.7",))


def test_a_pods_own_name_under_its_subdomain_does_not_resolve() -> None:
    # Every pod has the node's address: MPI would take each such host for this machine.
    assert look("w0.job.default.svc.cluster.local") == records.NO_SUCH_NAME
    assert look("job.default.svc.cluster.local").exists  # the Service itself does


def test_what_does_not_exist_is_nxdomain() -> None:
    for name in ("nope.default.svc.cluster.local", "job-master-0.other.svc.cluster.local", "default.svc.cluster.local"):
        assert look(name) == records.NO_SUCH_NAME, name


def test_pod_names_spell_their_address() -> None:
    assert look("10-1-2-3.default.pod.cluster.local") == records.Answer(True, ("10.1.2.3",))
    assert look("x-1-2-3.default.pod.cluster.local") == records.NO_SUCH_NAME


def test_the_domain_is_recognised_in_any_case() -> None:
    assert records.in_domain("A.B.svc.Cluster.Local.")
    assert not records.in_domain("pypi.org")
    assert not records.in_domain("local")


def test_each_plane_port_has_its_own_address() -> None:
    assert address_for(6443) == "127.53.25.43"
    assert address_for(46101) != address_for(46102)
    assert host_nameservers("# x\nnameserver 10.0.0.1\nsearch a\nnameserver ::1\n") == ["10.0.0.1", "::1"]


def _informer(objects: list[Any]) -> Informer:
    informer = Informer(None, object)  # type: ignore[arg-type]  # fed by hand: no client reads
    for obj in objects:
        informer.mutated(obj)
    return informer


def _free_udp_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(60)
def test_the_server_answers_over_udp_and_tcp() -> None:
    async def scenario() -> None:
        address = "127.53.0.1"
        server = ClusterDns(address, _informer(list(SERVICES.values())), _informer(PODS["default"]), upstream=[])
        server.port = _free_udp_port(address)
        await server.start()
        try:
            query = dns.message.make_query("job.default.svc.cluster.local", "A")
            udp = await asyncio.to_thread(dns.query.udp, query, address, timeout=5, port=server.port)
            assert sorted(r.to_text() for r in udp.answer[0]) == ["127.0.0.2", "127.0.0.3"]
            tcp = await asyncio.to_thread(dns.query.tcp, query, address, timeout=5, port=server.port)
            assert tcp.answer == udp.answer
            missing = dns.message.make_query("nope.default.svc.cluster.local", "A")
            answer = await asyncio.to_thread(dns.query.udp, missing, address, timeout=5, port=server.port)
            assert answer.rcode() == dns.rcode.NXDOMAIN
            # Outside the domain: with no nameserver to forward to, SERVFAIL (a resolver tries its next one).
            other = dns.message.make_query("pypi.org", "A")
            answer = await asyncio.to_thread(dns.query.udp, other, address, timeout=5, port=server.port)
            assert answer.rcode() == dns.rcode.SERVFAIL
        finally:
            await server.close()

    asyncio.run(scenario())
