"""``yard up``'s node-failure flags, as kube-controller-manager's and kube-apiserver's of the same names.

Each reaches the plane through its environment (as the restart back-off does), where the node
lifecycle controller (``--node-monitor-grace-period``) and the DefaultTolerationSeconds admission
plugin (``--default-{not-ready,unreachable}-toleration-seconds``) read it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from trainyard.cli import envflags
from trainyard.cluster.clients.nodelifecycle import settings
from trainyard.cluster.server.apiserver import tolerationflags

PANEL = "Node failure (as kube-controller-manager and kube-apiserver)"
FAILURE_ENVS = (settings.GRACE_ENV, tolerationflags.NOT_READY_ENV, tolerationflags.UNREACHABLE_ENV)

GracePeriod = Annotated[
    str | None,
    typer.Option(
        metavar="DURATION",
        help="a node whose heartbeats (its Lease, its Ready condition) stop for this long goes Unknown and gets the "
        "node.kubernetes.io/unreachable taints, as kube-controller-manager's flag (50s, 1m, or seconds; default 50s)",
        rich_help_panel=PANEL,
    ),
]
NotReadySeconds = Annotated[
    int | None,
    typer.Option(
        metavar="SECONDS",
        help="how long a new pod that does not say stays on a node tainted node.kubernetes.io/not-ready:NoExecute, "
        "as kube-apiserver's flag (default 300)",
        rich_help_panel=PANEL,
    ),
]
UnreachableSeconds = Annotated[
    int | None,
    typer.Option(
        metavar="SECONDS",
        help="how long a new pod that does not say stays on a node tainted node.kubernetes.io/unreachable:NoExecute, "
        "as kube-apiserver's flag (default 300)",
        rich_help_panel=PANEL,
    ),
]


FLAGS = dict(
    zip(
        FAILURE_ENVS,
        (
            "--node-monitor-grace-period",
            "--default-not-ready-toleration-seconds",
            "--default-unreachable-toleration-seconds",
        ),
        strict=True,
    )
)


def check_env() -> None:
    """Raise ValueError naming the flag (and its variable) whose value the plane would refuse."""
    envflags.check(FLAGS, settings.from_env, tolerationflags.from_env)
