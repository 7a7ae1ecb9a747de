"""PyTorchJob's operator flags: the wait-for-master init container (cluster mode only, reference §3.1).

Upstream's ``--pytorch-init-container-image`` and ``--pytorch-init-container-max-tries``, with
two differences: the container checks the master's TCP port, not its DNS name (complaint #7), and
an empty image turns the step off. The embedded plane never adds it (host network mode). The
plugin declares them (``PyTorch.add_operator_flags``); the operator adds every plugin's.
"""

from __future__ import annotations

import argparse

from trainyard.frameworks.network import WaitForMaster

DEFAULT = WaitForMaster()


def add_init_container_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pytorch-init-container-image",
        default=DEFAULT.image,
        help=f"image of the Worker init container that waits for the master's port; needs sh and nc "
        f"(default {DEFAULT.image}; empty: no init container)",
    )
    parser.add_argument(
        "--pytorch-init-container-max-tries",
        type=int,
        default=DEFAULT.max_tries,
        help=f"connection attempts, {DEFAULT.interval_seconds} s apart, before the init container fails "
        f"(default {DEFAULT.max_tries})",
    )


def wait_for_master(args: argparse.Namespace) -> WaitForMaster | None:
    """The ``ControllerSettings.wait_for_master`` the flags ask for."""
    if not args.pytorch_init_container_image:
        return None
    if args.pytorch_init_container_max_tries < 1:
        raise SystemExit("--pytorch-init-container-max-tries must be at least 1")
    return WaitForMaster(image=args.pytorch_init_container_image, max_tries=args.pytorch_init_container_max_tries)
