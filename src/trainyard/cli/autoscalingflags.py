"""``yard up``'s metrics and autoscaling flags, as metrics-server's and kube-controller-manager's.

Each reaches the plane through its environment (as the node-failure flags do): the nodes'
measurement interval (``--metric-resolution``) and the horizontal pod autoscaler's
``--horizontal-pod-autoscaler-sync-period`` and ``--horizontal-pod-autoscaler-downscale-stabilization``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from trainyard.cli import envflags
from trainyard.cluster.clients.autoscaler import settings
from trainyard.cluster.clients.node import resourcestats

PANEL = "Metrics and autoscaling (as metrics-server and kube-controller-manager)"
ENVS = (resourcestats.RESOLUTION_ENV, settings.SYNC_ENV, settings.DOWNSCALE_ENV)
FLAGS = dict(
    zip(
        ENVS,
        (
            "--metric-resolution",
            "--horizontal-pod-autoscaler-sync-period",
            "--horizontal-pod-autoscaler-downscale-stabilization",
        ),
        strict=True,
    )
)

Resolution = Annotated[
    str | None,
    typer.Option(
        metavar="SECONDS",
        help="how often each node measures its containers' CPU and memory for `kubectl top` and the autoscaler, "
        "as metrics-server's flag (default 15)",
        rich_help_panel=PANEL,
    ),
]
SyncPeriod = Annotated[
    str | None,
    typer.Option(
        metavar="DURATION",
        help="how often each HorizontalPodAutoscaler is synced (15s, 1m, or seconds; default 15s)",
        rich_help_panel=PANEL,
    ),
]
Downscale = Annotated[
    str | None,
    typer.Option(
        metavar="DURATION",
        help="how long an HPA without behavior.scaleDown.stabilizationWindowSeconds keeps the highest recent "
        "recommendation before scaling down (default 5m)",
        rich_help_panel=PANEL,
    ),
]


def check_env() -> None:
    """Raise ValueError naming the flag (and its variable) whose value the plane would refuse."""
    envflags.check(FLAGS, resourcestats.resolution_from_env, settings.from_env)
