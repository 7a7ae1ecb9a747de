"""Write the snapshots ``test_doctor_rules.py`` reads: ``sdk.doctor.gather`` of real jobs on a real plane.

Run by hand against a plane where the jobs of ``doctor_snapshots/jobs`` ran into their failures
(``yard up``, ``kubectl apply -f``, wait until each shows its failure), then::

    PYTHONPATH=src python tests/unit/sdk/doctor_snapshots/capture.py --home HOME NAME [NAME ...]

Each ``NAME.json`` holds what ``gather`` read (job, pods, events, logs, nodes, claims, Workload,
queue lines) and when; managedFields are dropped and repeated events kept once (the last), so the
files stay small (Normal events no rule reads are left out: ``NOISE``). Pods bound to nodes are
kept (their names, requests and phase) only with ``--node-pods``: the gang cases need them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from trainyard.client.resources import to_dict
from trainyard.cluster.paths import Layout
from trainyard.sdk import doctor, kinds

HERE = Path(__file__).parent
# Normal events no rule reads; left out to keep the files small.
NOISE = ("Scheduled", "ThreadsSet", "Started", "SuccessfulCreate", "SuccessfulDelete", "Created")


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items() if k != "managedFields"}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def _bound(pod: Any) -> Any:
    """What the free-resources reading needs of a pod bound to a node."""
    containers = [{"name": c["name"], "resources": c.get("resources") or {}} for c in pod["spec"]["containers"]]
    return {
        "metadata": {k: pod["metadata"][k] for k in ("name", "namespace")},
        "spec": {"nodeName": pod["spec"]["nodeName"], "containers": containers},
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", required=True)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--node-pods", action="store_true")
    parser.add_argument("--kind", default=kinds.default_kind().singular, help="the jobs' kind (a word yard takes)")
    parser.add_argument("names", nargs="+")
    args = parser.parse_args()
    from lightkube import Client, KubeConfig

    client = Client(KubeConfig.from_file(Layout(Path(args.home)).kubeconfig), namespace=args.namespace)
    kind = kinds.resolve(args.kind, kinds.builtin_kinds())[0]
    for name in args.names:
        job = to_dict(client.get(kind.resource, name, namespace=args.namespace))
        snap = doctor.gather(client, kind, job)
        events: dict[tuple[str, str, str], Any] = {}
        for e in snap.events:
            if e.get("type") == "Normal" and str(e.get("reason")).startswith(NOISE):
                continue
            events[((e.get("involvedObject") or {}).get("name", ""), e.get("reason", ""), e.get("message", ""))] = e
        body = {
            "kind": kind.kind,
            "now": snap.now.isoformat(),
            "job": snap.job,
            "pods": list(snap.pods),
            "events": list(events.values()),
            "logs": dict(snap.logs),
            "previous": dict(snap.previous),
            "nodes": list(snap.nodes),
            "node_pods": [_bound(p) for p in snap.node_pods] if args.node_pods else [],
            "claims": list(snap.claims),
            "workload": snap.workload,
            "queue_lines": [list(x) for x in snap.queue_lines],
        }
        (HERE / f"{name}.json").write_text(json.dumps(_clean(body), sort_keys=True) + "\n")
        print(f"{name}.json: {len(snap.pods)} pods, {len(events)} events")


if __name__ == "__main__":
    main()
