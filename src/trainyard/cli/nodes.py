"""``yard node``: cordon, uncordon and drain a Node as kubectl does, and the simulation verbs.

``stop`` and ``start`` set and remove the annotation ``trainyard.dev/power: "off"`` on the Node,
``preempt`` sets ``trainyard.dev/preemption-notice`` to the RFC 3339 UTC deadline of a spot
notice; the plane's node pool acts on them (the agent stops heartbeating; at the deadline its
pods get SIGTERM and the node goes), and the control plane reacts as a cluster's would. Each
verb says what will happen and what it waits for. An unknown node is kube's NotFound.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node, Pod

from trainyard.cli.common import api, handled
from trainyard.cli.nodedrain import Drain, pods_to_evict
from trainyard.cluster.clients.node import machines
from trainyard.cluster.clients.nodelifecycle.settings import parse_duration

POWER = machines.POWER_ANNOTATION
PREEMPTION_NOTICE = machines.NOTICE_ANNOTATION
REMOVAL_WAIT = 300.0
"""How long ``preempt --wait`` waits past the notice for the node to go before it says why it stopped."""
NODE_HELP = "the Node's name (kubectl get nodes)"


def say(line: str) -> None:
    print(line, flush=True)


def _node(client: Client, name: str) -> Node:
    return client.get(Node, name)  # NotFound: `nodes "NAME" not found`, as kubectl says it


def _annotate(client: Client, name: str, key: str, value: str | None) -> None:
    _node(client, name)
    client.patch(Node, name, {"metadata": {"annotations": {key: value}}})


def _deadline(moment: datetime) -> str:
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def register(app: typer.Typer) -> None:
    node_app = typer.Typer(
        help="Nodes: cordon, drain, and simulate a node's failure or a spot preemption.", no_args_is_help=True
    )
    app.add_typer(node_app, name="node")

    @node_app.command("cordon")
    @handled
    def cordon(node: Annotated[str, typer.Argument(help=NODE_HELP)]) -> None:
        """Mark the node unschedulable (node.kubernetes.io/unschedulable): running pods stay."""
        Drain(api(), say).cordon(node)

    @node_app.command("uncordon")
    @handled
    def uncordon(node: Annotated[str, typer.Argument(help=NODE_HELP)]) -> None:
        """Mark the node schedulable again."""
        client = api()
        current = _node(client, node)
        if not (current.spec is not None and current.spec.unschedulable):
            say(f"node/{node} already uncordoned")
            return
        client.patch(Node, node, {"spec": {"unschedulable": None}})
        say(f"node/{node} uncordoned")

    @node_app.command("drain")
    @handled
    def drain(
        node: Annotated[str, typer.Argument(help=NODE_HELP)],
        force: Annotated[bool, typer.Option(help="also evict pods that declare no controller")] = False,
        delete_emptydir_data: Annotated[
            bool, typer.Option("--delete-emptydir-data", help="also evict pods with emptyDir volumes (their data goes)")
        ] = False,
        grace_period: Annotated[int, typer.Option(help="seconds each pod gets to stop (negative: the pod's own)")] = -1,
        timeout: Annotated[
            str, typer.Option(metavar="DURATION", help="give up after this long (0: wait as long as it takes)")
        ] = "0s",
    ) -> None:
        """Cordon the node, then evict its pods through the eviction API, as kubectl drain: an eviction a
        PodDisruptionBudget refuses is retried every 5 s until the budget allows it or --timeout passes."""
        try:
            limit = parse_duration(timeout)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--timeout") from None
        drainer = Drain(api(), say, grace_period=grace_period, timeout=limit)
        drainer.cordon(node)
        chosen = pods_to_evict(drainer.pods_on(node), force=force, delete_emptydir_data=delete_emptydir_data)
        if chosen.warnings:
            say(f"Warning: {'; '.join(chosen.warnings)}")
        if chosen.errors:
            print(f"error: unable to drain node {node!r}: {'; '.join(chosen.errors)}", file=sys.stderr)
            raise typer.Exit(1)
        if chosen.evict:
            pending = ", ".join(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in chosen.evict)
            say(f"waiting until these pods are gone (evicted, then terminated): {pending}")
        left = drainer.evict_all(chosen.evict)
        if left:
            print(
                f"error: unable to drain node {node!r}: global timeout reached: {timeout}; still there: "
                f"{', '.join(left)} (a PodDisruptionBudget allows no disruption now: `kubectl get pdb -A`)",
                file=sys.stderr,
            )
            raise typer.Exit(1)
        say(f"node/{node} drained")

    @node_app.command("stop")
    @handled
    def stop(node: Annotated[str, typer.Argument(help=NODE_HELP)]) -> None:
        """Power the node off (simulated): its agent stops, heartbeats stop, the control plane notices."""
        _annotate(api(), node, POWER, "off")
        say(
            f"node/{node} powered off ({POWER}=off): its agent stops and its Lease is no longer renewed. After the "
            "plane's --node-monitor-grace-period (50s by default) the node controller marks it NotReady (Unknown) "
            "and taints it node.kubernetes.io/unreachable; its pods are evicted once their unreachable "
            f"tolerationSeconds (300s by default) pass. `yard node start {node}` powers it on again."
        )

    @node_app.command("start")
    @handled
    def start(node: Annotated[str, typer.Argument(help=NODE_HELP)]) -> None:
        """Power the node on again (simulated): its agent heartbeats and the node becomes Ready."""
        _annotate(api(), node, POWER, None)
        say(f"node/{node} powered on: its agent heartbeats again; the node controller removes the unreachable taints")

    @node_app.command("preempt")
    @handled
    def preempt(
        node: Annotated[str, typer.Argument(help=NODE_HELP)],
        notice: Annotated[str, typer.Option(metavar="DURATION", help="time between the notice and the end")] = "30s",
        wait: Annotated[bool, typer.Option("--wait", help="wait until the node is gone, showing progress")] = False,
    ) -> None:
        """Give the node a spot preemption notice: at its end its pods get SIGTERM and the node is removed."""
        try:
            seconds = parse_duration(notice)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--notice") from None
        client = api()
        deadline = datetime.now(UTC) + timedelta(seconds=seconds)
        _annotate(client, node, PREEMPTION_NOTICE, _deadline(deadline))
        say(
            f"node/{node} preemption notice until {_deadline(deadline)} (in {notice}): then its pods get SIGTERM "
            "(and their grace period), the node is removed, and PodGC deletes what is left of its pods."
        )
        if wait:
            _wait_gone(client, node, deadline)

    def _wait_gone(client: Client, node: str, deadline: datetime) -> None:
        """Poll until the Node is gone; a progress line when its pods change, else every 5 s."""
        shown: tuple[int, float] | None = None
        while True:
            try:
                client.get(Node, node)
            except ApiError as exc:
                if getattr(exc.status, "code", None) == 404:
                    say(f"node/{node} removed")
                    return
                raise
            pods = len(list(client.list(Pod, namespace="*", fields={"spec.nodeName": node})))
            remaining = (deadline - datetime.now(UTC)).total_seconds()
            if shown is None or shown[0] != pods or time.monotonic() - shown[1] >= 5:
                say(
                    f"node/{node}: notice ends in {remaining:.0f}s, {pods} pod(s) on it"
                    if remaining > 0
                    else f"node/{node}: notice over, waiting for the node to go ({pods} pod(s) on it)"
                )
                shown = (pods, time.monotonic())
            if remaining < -REMOVAL_WAIT:
                print(
                    f"error: node/{node} is still there {REMOVAL_WAIT:.0f}s after its notice ended: nothing acts on "
                    f"{PREEMPTION_NOTICE} (the plane's node pool does; a real cluster does not): delete it with "
                    "`kubectl delete node` or remove the annotation",
                    file=sys.stderr,
                )
                raise typer.Exit(1)
            time.sleep(1.0)
