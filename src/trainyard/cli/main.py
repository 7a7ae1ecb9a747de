"""The ``yard`` command: control-plane lifecycle and thin job commands. No business logic here."""

from __future__ import annotations

import argparse
import sys

from lightkube.core.exceptions import ApiError

from trainyard.cli import jobs, operator_cmd, plane


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="yard", description="Kubeflow-compatible training jobs on this machine.")
    top.add_argument("--home", default=None, help="state directory (default $TRAINYARD_HOME or ~/.trainyard)")
    top.add_argument("--kubeconfig", default=None, help="talk to this cluster instead of the local plane")
    top.add_argument("-n", "--namespace", default=None)
    sub = top.add_subparsers(dest="command", required=True)
    plane.add_parsers(sub)
    jobs.add_parsers(sub)
    operator_cmd.add_parsers(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ApiError as exc:
        status = exc.status
        print(
            f"Error from server ({getattr(status, 'reason', '')}): {getattr(status, 'message', exc)}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
