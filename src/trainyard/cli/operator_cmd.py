"""``yard operator [FLAGS]``: run the operator as its own process, against the local plane or a cluster.

It becomes ``python -m trainyard.operator`` (same process), with defaults that fit where it
points: the local plane's kubeconfig, ``host`` network mode, the plane's gang scheduler,
endpoints on loopback and no client-side rate limit, or ``yard --kubeconfig``'s cluster with
upstream's defaults. FLAGS are the operator's own and win.
"""

from __future__ import annotations

import os
import sys

import typer

from trainyard.cli.common import GLOBALS, Globals
from trainyard.cli.plane import running


def register(app: typer.Typer) -> None:
    @app.command(
        "operator",
        help="Run the operator as its own process (`yard operator --help` lists its flags).",
        add_help_option=False,
        # every flag after `operator` is the operator's
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    )
    def operator(ctx: typer.Context) -> None:
        raise typer.Exit(cmd_operator(GLOBALS, list(ctx.args)))


def cmd_operator(options: Globals, flags: list[str]) -> int:
    """Become the operator with ``flags`` after the defaults that fit where ``options`` (``yard``'s) point."""
    if options.kubeconfig:
        defaults = ["--kubeconfig", options.kubeconfig]
    elif "-h" in flags or "--help" in flags:
        defaults = []
    else:
        layout = options.layout
        state = running(layout)
        if state is None:
            print(
                f"error: no control plane runs under {layout.home}; start one without its own operator with "
                "`yard up --no-operator`, or point at a cluster with `yard --kubeconfig FILE operator`",
                file=sys.stderr,
            )
            return 1
        if state.get("operator", True):
            print(
                "error: this control plane runs its own operator; restart it with `yard down && "
                "yard up --no-operator` to run the operator as its own process",
                file=sys.stderr,
            )
            return 1
        defaults = [
            "--kubeconfig",
            str(layout.kubeconfig),
            "--network-mode",
            "host",
            "--metrics-bind-address",
            "127.0.0.1:8080",
            "--health-probe-bind-address",
            "127.0.0.1:8081",
            # The plane's own operator would gang-schedule as `yard up --gang-scheduler-name` said.
            "--gang-scheduler-name",
            str(state.get("gangScheduler") or ""),
            # Not rate-limited, as the plane's own operator is not: it is the only controller client of a
            # local API server (upstream's --kube-api-qps 20 protects a shared kube-apiserver), and a
            # sweep of hundreds of jobs must not be throttled to 20 requests a second.
            "--kube-api-qps",
            "0",
        ]
    if options.namespace:
        defaults += ["--namespace", options.namespace]
    argv = [sys.executable, "-m", "trainyard.operator", *defaults, *flags]
    sys.stdout.flush()
    os.execv(sys.executable, argv)
    return 0  # not reached: the operator replaced this process
