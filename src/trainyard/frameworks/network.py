"""How replicas find each other: the one setting that differs between a cluster and one machine.

``cluster-dns``: replicas are addressed by their headless-Service DNS name and the ports their
containers declare, as upstream. ``host``: every replica shares the node's network namespace, so
each listening port is allocated per job by the operator and addresses are the node's.

In ``cluster-dns`` mode a replica may also have to wait for another to listen before it starts
(upstream's ``init-pytorch`` init container, reference §3.1): ``WaitForMaster`` configures that
step and ``wait_container`` builds it. It checks the TCP port, not DNS (a resolving name says
nothing about a listening master, complaint #7), from a configurable image, or is disabled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from trainyard.api.core import Container


class NetworkMode(StrEnum):
    CLUSTER_DNS = "cluster-dns"
    HOST = "host"


def replica_name(job: str, replica_type: str, index: int) -> str:
    """Pod and Service name of one replica: ``<job>-<type>-<index>``, as upstream."""
    return f"{job}-{replica_type.lower()}-{index}".replace("/", "-")


def port_key(replica_type: str, index: int, port_name: str) -> str:
    return f"{replica_type.lower()}-{index}/{port_name}"


def rendezvous_name(job: str) -> str:
    """Pod and Service name of a job's rendezvous host: ``<job>-rdzv`` (no replica is named so)."""
    return f"{job}-rdzv".replace("/", "-")


RENDEZVOUS_PORT_KEY = "rdzv/c10d"
"""Host mode: the key of the port allocated for a job's rendezvous host."""


@dataclass(frozen=True)
class WaitForMaster:
    """The wait-for-master init container of cluster mode; ``image`` needs ``sh`` and ``nc -z``."""

    image: str = "busybox:1.36"
    max_tries: int = 100
    interval_seconds: int = 2


# $1 host, $2 port, $3 tries, $4 seconds between tries: passed as arguments, never spliced in.
WAIT_SCRIPT = (
    'tries=0; until nc -z -w 2 "$1" "$2"; do '
    'tries=$((tries + 1)); if [ "$tries" -ge "$3" ]; then '
    'echo "$1:$2 is still not accepting connections after $3 tries; giving up" >&2; exit 1; fi; '
    'echo "waiting for $1:$2 to accept connections ($tries/$3)"; sleep "$4"; done; '
    'echo "$1:$2 accepts connections"'
)


def wait_container(name: str, wait: WaitForMaster, host: str, port: int) -> Container:
    """An init container that ends once ``host:port`` accepts a TCP connection (or fails after the tries)."""
    return Container.model_validate(
        {
            "name": name,
            "image": wait.image,
            "imagePullPolicy": "IfNotPresent",
            "command": [
                "sh",
                "-c",
                WAIT_SCRIPT,
                "wait-for-master",
                host,
                str(port),
                str(wait.max_tries),
                str(wait.interval_seconds),
            ],
            # upstream's init container resources, so quota and LimitRange behave the same
            "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}, "requests": {"cpu": "50m", "memory": "10Mi"}},
        }
    )


@dataclass(frozen=True)
class Network:
    mode: NetworkMode
    host_ports: Mapping[str, int] = field(default_factory=dict)
    node_address: str = "127.0.0.1"
    wait_for_master: WaitForMaster | None = None
    """Cluster mode only: how replicas wait for the master to listen (None: they do not)."""
    cluster_domain: str = ""
    """Cluster mode: a domain fully qualified names end in after ``.svc`` (upstream's operator env
    ``CUSTOM_CLUSTER_DOMAIN``); empty: ``<name>.<namespace>.svc`` resolves as is."""

    def address(self, job: str, replica_type: str, index: int) -> str:
        if self.mode is NetworkMode.HOST:
            return self.node_address
        return replica_name(job, replica_type, index)

    def rendezvous_address(self, job: str) -> str:
        """Where a job's rendezvous host answers: the node in host mode, its Service's name otherwise."""
        if self.mode is NetworkMode.HOST:
            return self.node_address
        return rendezvous_name(job)

    def rendezvous_port(self, declared: int) -> int | None:
        """The rendezvous host's port; in host mode the allocated one (None until allocated)."""
        if self.mode is NetworkMode.HOST:
            return self.host_ports.get(RENDEZVOUS_PORT_KEY)
        return declared

    def port(self, replica_type: str, index: int, port_name: str, declared: int) -> int:
        """The port a replica listens on; in host mode, the one allocated for it (or ``declared``)."""
        if self.mode is NetworkMode.HOST:
            return self.host_ports.get(port_key(replica_type, index, port_name), declared)
        return declared
