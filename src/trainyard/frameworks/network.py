"""How replicas find each other: the one setting that differs between a cluster and one machine.

``cluster-dns``: replicas are addressed by their headless-Service DNS name and the ports their
containers declare, as upstream. ``host``: every replica shares the node's network namespace, so
each listening port is allocated per job by the operator and addresses are the node's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class NetworkMode(StrEnum):
    CLUSTER_DNS = "cluster-dns"
    HOST = "host"


def replica_name(job: str, replica_type: str, index: int) -> str:
    """Pod and Service name of one replica: ``<job>-<type>-<index>``, as upstream."""
    return f"{job}-{replica_type.lower()}-{index}".replace("/", "-")


def port_key(replica_type: str, index: int, port_name: str) -> str:
    return f"{replica_type.lower()}-{index}/{port_name}"


@dataclass(frozen=True)
class Network:
    mode: NetworkMode
    host_ports: Mapping[str, int] = field(default_factory=dict)
    node_address: str = "127.0.0.1"

    def address(self, job: str, replica_type: str, index: int) -> str:
        if self.mode is NetworkMode.HOST:
            return self.node_address
        return replica_name(job, replica_type, index)

    def port(self, replica_type: str, index: int, port_name: str, declared: int) -> int:
        """The port a replica listens on; in host mode, the one allocated for it (or ``declared``)."""
        if self.mode is NetworkMode.HOST:
            return self.host_ports.get(port_key(replica_type, index, port_name), declared)
        return declared
