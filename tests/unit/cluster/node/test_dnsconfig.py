"""A pod's resolv.conf and hosts, as the kubelet writes them (``node.dnsconfig``)."""

from __future__ import annotations

from typing import Any

from trainyard.cluster.clients.node import dnsconfig
from trainyard.cluster.clients.node.dnsconfig import NodeDns

HOST = "nameserver 10.255.255.53\nsearch corp.example\noptions edns0\n"
NODE = NodeDns(cluster_dns=("127.53.25.43",), host_resolv=HOST, host_hosts="127.0.0.1 localhost\n")


def pod(**spec: Any) -> Any:
    return {"metadata": {"name": "job-worker-0", "namespace": "team"}, "spec": spec}


def test_cluster_first_names_the_cluster_dns_and_its_search_path() -> None:
    text = dnsconfig.resolver(pod(), NODE).text()
    assert text == (
        "nameserver 127.53.25.43\n"
        "search team.svc.cluster.local svc.cluster.local cluster.local corp.example\n"
        "options ndots:5\n"
    )
    assert dnsconfig.resolver(pod(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet"), NODE).text() == text


def test_host_network_with_plain_cluster_first_and_default_get_the_machines() -> None:
    assert dnsconfig.policy(pod(hostNetwork=True, dnsPolicy="ClusterFirst"), NODE) == "host"
    assert dnsconfig.resolver(pod(dnsPolicy="Default"), NODE).text() == (
        "nameserver 10.255.255.53\nsearch corp.example\noptions edns0\n"
    )


def test_a_node_without_cluster_dns_serves_cluster_first_as_default() -> None:
    assert dnsconfig.policy(pod(), NodeDns(host_resolv=HOST)) == "host"


def test_dns_config_is_merged_and_none_takes_only_it() -> None:
    config = {
        "nameservers": ["1.1.1.1"],
        "searches": ["a.example"],
        "options": [{"name": "ndots", "value": "2"}, {"name": "rotate"}],
    }
    merged = dnsconfig.resolver(pod(dnsConfig=config), NODE)
    assert merged.nameservers == ("127.53.25.43", "1.1.1.1")
    assert merged.searches[-1] == "a.example"
    assert merged.options == ("ndots:2", "rotate")
    only = dnsconfig.resolver(pod(dnsPolicy="None", dnsConfig=config), NODE)
    assert only.text() == "nameserver 1.1.1.1\nsearch a.example\noptions ndots:2 rotate\n"


def test_hosts_of_a_pod_network_name_the_pod_and_its_aliases() -> None:
    text = dnsconfig.hosts(
        pod(hostname="w0", subdomain="job", hostAliases=[{"ip": "10.1.1.1", "hostnames": ["a", "b"]}]),
        NODE,
        "127.0.0.1",
    )
    assert text.startswith("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n")
    assert "127.0.0.1\tw0.job.team.svc.cluster.local\tw0\n" in text
    assert text.endswith("# Entries added by HostAliases.\n10.1.1.1\ta\tb\n")


def test_hosts_of_a_host_network_pod_are_the_machines() -> None:
    assert dnsconfig.hosts(pod(hostNetwork=True), NODE, "127.0.0.1") == (
        "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n"
    )
