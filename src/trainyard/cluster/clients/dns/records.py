"""What the cluster's DNS answers for a name: the records CoreDNS's ``kubernetes`` plugin serves.

Names under the cluster domain (``cluster.local`` unless told otherwise), as the Kubernetes DNS
specification defines them:

* ``<service>.<namespace>.svc.<domain>``: a Service with a cluster IP answers it; a headless
  Service (``clusterIP: None``) answers the addresses of the ready pods it selects (all of them
  with ``publishNotReadyAddresses``), which on a real cluster its EndpointSlices list;
* ``<hostname>.<service>.<namespace>.svc.<domain>`` (a pod's own name under a headless Service:
  an MPIJob's or a JobSet's workers) does **not** resolve here, on purpose: every pod shares the
  node's address, and MPI takes a host whose name resolves to a local address for this very
  machine (Open MPI 4 folded every worker of a hostfile into one host, "multiple definitions of
  the slot count"). Those names reach their pods through the node's launch agent
  (``node.podexec``), which resolves them itself, as ssh would through cluster DNS;
* ``<a-b-c-d>.<namespace>.pod.<domain>``: the address the name spells (CoreDNS's ``pods insecure``).

Other names under the domain do not exist (NXDOMAIN); names outside it are not ours: the server
forwards them (``server``). Only A records carry addresses: every pod here has an IPv4 address,
so an AAAA question about an existing name gets an empty answer (NOERROR), as CoreDNS gives.

Pure: the server hands in what its informers hold, as two lookups.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from trainyard.api.meta import Obj

DEFAULT_DOMAIN = "cluster.local"
TTL = 5
"""Seconds a resolver may keep an answer: CoreDNS's default for the kubernetes plugin (pods come and go)."""

ServiceLookup = Callable[[str, str], Obj | None]
"""(namespace, name) → the Service, if any."""
PodsIn = Callable[[str], Iterable[Obj]]
"""namespace → its pods."""


@dataclass(frozen=True)
class Answer:
    """What the name is: ``exists`` False is NXDOMAIN; otherwise its IPv4 addresses (maybe none)."""

    exists: bool
    addresses: tuple[str, ...] = ()


NO_SUCH_NAME = Answer(False)


def in_domain(name: str, domain: str = DEFAULT_DOMAIN) -> bool:
    """Whether ``name`` (any case, trailing dot or not) is the cluster domain or under it."""
    labels = _labels(name)
    own = _labels(domain)
    return labels[-len(own) :] == own


def _labels(name: str) -> list[str]:
    return [label for label in name.lower().rstrip(".").split(".") if label]


def lookup(name: str, services: ServiceLookup, pods_in: PodsIn, domain: str = DEFAULT_DOMAIN) -> Answer:
    """The records of ``name``, a name under ``domain`` (``in_domain``)."""
    labels = _labels(name)[: -len(_labels(domain))]
    if len(labels) == 3 and labels[2] == "pod":
        return _pod_address(labels[0])
    if len(labels) < 3 or labels[-1] != "svc":
        return NO_SUCH_NAME
    namespace, service_name = labels[-2], labels[-3]
    service = services(namespace, service_name)
    if service is None:
        return NO_SUCH_NAME
    if len(labels) == 3:
        return _service(service, pods_in(namespace))
    return NO_SUCH_NAME


def _pod_address(dashed: str) -> Answer:
    try:
        address = ipaddress.IPv4Address(dashed.replace("-", "."))
    except ValueError:
        return NO_SUCH_NAME
    return Answer(True, (str(address),))


def _headless(service: Obj) -> bool:
    return (service.get("spec") or {}).get("clusterIP") == "None"


def _service(service: Obj, pods: Iterable[Obj]) -> Answer:
    spec = service.get("spec") or {}
    if spec.get("type") == "ExternalName":
        return Answer(True)  # a CNAME upstream: not served here, the name exists without addresses
    if not _headless(service):
        ips = [ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip and _is_v4(ip)]
        return Answer(True, tuple(ips))
    return Answer(True, _addresses(_endpoints(service, pods)))


def _endpoints(service: Obj, pods: Iterable[Obj]) -> list[Obj]:
    """The pods a Service's endpoints would list: selected, with an address, ready unless it publishes all."""
    spec = service.get("spec") or {}
    selector: dict[str, str] = spec.get("selector") or {}
    if not selector:
        return []  # endpoints written by hand upstream: not kept here
    everyone = bool(spec.get("publishNotReadyAddresses"))
    found = []
    for pod in pods:
        pod_labels = (pod.get("metadata") or {}).get("labels") or {}
        if any(pod_labels.get(k) != v for k, v in selector.items()):
            continue
        status = pod.get("status") or {}
        if not status.get("podIP") or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        if everyone or _ready(status):
            found.append(pod)
    return found


def _ready(status: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _addresses(pods: Iterable[Obj]) -> tuple[str, ...]:
    # Several pods of the host network share the node's address: one record each address, in order.
    out: list[str] = []
    for pod in pods:
        ip = str((pod.get("status") or {}).get("podIP"))
        if _is_v4(ip) and ip not in out:
            out.append(ip)
    return tuple(out)


def _is_v4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True
