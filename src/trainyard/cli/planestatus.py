"""``yard status``: what the running plane serves, and where its pods run."""

from __future__ import annotations

from typing import Any

from trainyard.cluster.paths import Layout


def cmd_status(layout: Layout, state: dict[str, Any] | None) -> int:
    """What runs where; ``state`` is the live plane's (``plane.running``), None when none runs."""
    if state is None:
        print(f"trainyard is not running (home {layout.home}); start it with `yard up`")
        return 3
    from lightkube import ALL_NS, Client, KubeConfig
    from lightkube.resources.core_v1 import Pod

    from trainyard.api.labels import JOB_NAME
    from trainyard.client.resources import to_dict
    from trainyard.sdk.kinds import builtin_kinds

    client = Client(KubeConfig.from_file(layout.kubeconfig), field_manager="yard")
    served = [k for k in builtin_kinds() if k.kind in state["kinds"]]
    jobs = [j for kind in served for j in client.list(kind.resource, namespace=ALL_NS)]
    pods = [to_dict(p) for p in client.list(Pod, namespace=ALL_NS, labels={JOB_NAME: None})]
    running_pods = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
    print(f"trainyard control plane: running (pid {state['pid']})")
    print(f"  API server   {state['url']}   kubectl: KUBECONFIG={layout.kubeconfig}")
    if state.get("secure"):
        print(f"  security     TLS (CA {layout.ca_cert}) and a bearer token ({layout.token_file})")
    else:
        print("  security     NONE: plain http, no authentication (`yard up --insecure`); any local user can use it")
    print(f"  store        {layout.database}")
    print(f"  dashboard    {state['url']}/dashboard/   (`yard dashboard`: a login link); history {layout.history}")
    nodes = state.get("nodes") or [
        {"name": state["node"], "capacity": state.get("capacity") or {}, "declared": state.get("declared") or []}
    ]
    if len(nodes) == 1:
        print(
            f"  node agent   node {state['node']!r}: {running_pods} training pod(s) running;"
            f" /workspace = {state['workspace']}"
        )
    else:
        print(f"  node agents  {len(nodes)} nodes: {running_pods} training pod(s) running")
        print(f"  workspace    /workspace = {state['workspace']}")
    by_node: dict[str, int] = {}
    for p in pods:
        if (p.get("status") or {}).get("phase") == "Running":
            node = (p.get("spec") or {}).get("nodeName") or ""
            by_node[node] = by_node.get(node, 0) + 1
    for node in nodes:
        resources = ", ".join(f"{k} {v}" for k, v in (node.get("capacity") or {}).items())
        simulated = f" (declared, simulated: {', '.join(node['declared'])})" if node.get("declared") else ""
        if len(nodes) == 1:
            print(f"  capacity     {resources}{simulated}")
        else:
            print(f"    {node['name']:<12} {by_node.get(node['name'], 0)} running; {resources}{simulated}")
    if state.get("operator", True):
        print(
            f"  operator     network mode {state['network']}; kinds {', '.join(state['kinds'])}; {len(jobs)} job(s);"
            f" metrics {state['url']}/metrics"
        )
    else:
        print(f"  operator     not in this process (`yard up --no-operator`: run `yard operator`); {len(jobs)} job(s)")
    dns = state.get("clusterDNS")
    if dns:
        print(f"  cluster DNS  {dns}:53 (cluster.local): pods resolve Service names through it")
    else:
        print("  cluster DNS  off: pods resolve names with this machine's resolv.conf (see the plane's log)")
    print(f"  log          {layout.log_file}")
    return 0
