"""A pod's ``/etc/resolv.conf`` and ``/etc/hosts``, as the kubelet writes them (pkg/kubelet/network/dns, kubelet_pods).

``resolv.conf`` follows the pod's ``dnsPolicy``:

* ``ClusterFirst`` (the default) and ``ClusterFirstWithHostNet``: the cluster's nameserver (the
  node's ``cluster_dns``), the search path ``<namespace>.svc.<domain> svc.<domain> <domain>``
  then the machine's, and ``options ndots:5``. A host-network pod with plain ``ClusterFirst``
  gets ``Default`` instead, as upstream (the operator's replicas say ``ClusterFirstWithHostNet``);
* ``Default``: the machine's resolv.conf;
* ``None``: only what ``dnsConfig`` says.

``dnsConfig`` is merged on top (nameservers and searches appended without duplicates, options by
name), and a node without cluster DNS serves ``ClusterFirst`` as ``Default``, as the kubelet does.

``/etc/hosts``: a pod of its own network gets the kubelet's managed file (localhost, its own
address under its hostname, and ``hostAliases``); a host-network pod the machine's file, with
its ``hostAliases`` appended.

Pure: the node hands in the machine's files as text; ``containerconfig`` writes the results into
the pod's directory and mounts them over the container's ``/etc`` files.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainyard.api.meta import Obj

NDOTS = "ndots:5"
MAX_SEARCHES = 32  # the kubelet's validation limit (MaxDNSSearchPaths)


@dataclass(frozen=True)
class NodeDns:
    """The node's DNS settings: the kubelet's ``--cluster-dns``/``--cluster-domain`` and ``--resolv-conf``."""

    cluster_dns: tuple[str, ...] = ()
    domain: str = "cluster.local"
    host_resolv: str = ""
    host_hosts: str = ""


@dataclass(frozen=True)
class Resolver:
    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()

    def text(self) -> str:
        lines = [f"nameserver {ns}" for ns in self.nameservers]
        if self.searches:
            lines.append("search " + " ".join(self.searches))
        if self.options:
            lines.append("options " + " ".join(self.options))
        return "\n".join(lines) + "\n"


def parse_resolv(text: str) -> Resolver:
    nameservers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split(";", 1)[0].split()
        if not fields:
            continue
        if fields[0] == "nameserver" and len(fields) > 1:
            nameservers.append(fields[1])
        elif fields[0] in ("search", "domain"):
            searches = fields[1:]  # the last one wins, as in glibc
        elif fields[0] == "options":
            options.extend(fields[1:])
    return Resolver(tuple(nameservers), tuple(searches), tuple(options))


def policy(pod: Obj, node: NodeDns) -> str:
    """The policy the pod's resolv.conf is made by: ``cluster``, ``host`` or ``none``."""
    spec = pod.get("spec") or {}
    wanted = spec.get("dnsPolicy") or "ClusterFirst"
    if wanted == "None":
        return "none"
    if wanted == "Default":
        return "host"
    if wanted == "ClusterFirst" and spec.get("hostNetwork"):
        return "host"
    return "cluster" if node.cluster_dns else "host"


def resolver(pod: Obj, node: NodeDns) -> Resolver:
    """What the pod's resolv.conf says."""
    host = parse_resolv(node.host_resolv)
    chosen = policy(pod, node)
    if chosen == "none":
        base = Resolver()
    elif chosen == "host":
        base = host
    else:
        namespace = (pod.get("metadata") or {}).get("namespace") or "default"
        domain = node.domain
        own = (f"{namespace}.svc.{domain}", f"svc.{domain}", domain)
        base = Resolver(node.cluster_dns, _unique((*own, *host.searches)), (NDOTS,))
    config = (pod.get("spec") or {}).get("dnsConfig") or {}
    options = _merge_options(base.options, [_option(o) for o in config.get("options") or [] if o.get("name")])
    return Resolver(
        _unique((*base.nameservers, *(config.get("nameservers") or []))),
        _unique((*base.searches, *(config.get("searches") or [])))[:MAX_SEARCHES],
        options,
    )


def _option(option: Obj) -> str:
    value = option.get("value")
    return f"{option['name']}:{value}" if value not in (None, "") else str(option["name"])


def _merge_options(base: tuple[str, ...], extra: list[str]) -> tuple[str, ...]:
    by_name = {o.split(":", 1)[0]: o for o in base}
    for option in extra:
        by_name[option.split(":", 1)[0]] = option
    return tuple(by_name.values())


def _unique(items: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in items if i))


_MANAGED = """# Kubernetes-managed hosts file.
127.0.0.1\tlocalhost
::1\tlocalhost ip6-localhost ip6-loopback
fe00::0\tip6-localnet
fe00::0\tip6-mcastprefix
fe00::1\tip6-allnodes
fe00::2\tip6-allrouters
"""


def hosts(pod: Obj, node: NodeDns, pod_ip: str) -> str:
    """What the pod's /etc/hosts says."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    if spec.get("hostNetwork"):
        text = "# Kubernetes-managed hosts file (host network).\n" + node.host_hosts
    else:
        hostname = str(spec.get("hostname") or meta.get("name") or "")
        subdomain = spec.get("subdomain")
        names = [hostname]
        if subdomain:
            names.insert(0, f"{hostname}.{subdomain}.{meta.get('namespace') or 'default'}.svc.{node.domain}")
        text = _MANAGED + f"{pod_ip}\t" + "\t".join(names) + "\n"
    aliases = spec.get("hostAliases") or []
    if aliases:
        if not text.endswith("\n"):
            text += "\n"
        text += "\n# Entries added by HostAliases.\n"
        text += "".join(f"{a.get('ip')}\t" + "\t".join(a.get("hostnames") or []) + "\n" for a in aliases if a.get("ip"))
    return text
