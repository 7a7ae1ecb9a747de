"""The ``yard`` command (typer): the plane's lifecycle and kubectl-like job commands. No business logic here."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from trainyard.cli import dashboard, doctor, envs, jobs, nodes, operator_cmd, plane, runs
from trainyard.cli.common import GLOBALS

app = typer.Typer(
    name="yard",
    help="Kubeflow-compatible training jobs on this machine (or any cluster a kubeconfig names).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def top(
    home: Annotated[str | None, typer.Option(help="state directory (default $TRAINYARD_HOME or ~/.trainyard)")] = None,
    kubeconfig: Annotated[str | None, typer.Option(help="talk to this cluster instead of the local plane")] = None,
    namespace: Annotated[
        str | None, typer.Option("-n", "--namespace", help="namespace (default: the kubeconfig's, or 'default')")
    ] = None,
) -> None:
    GLOBALS.home, GLOBALS.kubeconfig, GLOBALS.namespace = home, kubeconfig, namespace


plane.register(app)
jobs.register(app)
doctor.register(app)
dashboard.register(app)
runs.register(app)
operator_cmd.register(app)
envs.register(app)
nodes.register(app)


def main(argv: list[str] | None = None) -> int:
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name="yard")
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
