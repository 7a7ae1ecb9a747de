"""PyTorchJob's operator flags: the wait-for-master init container (cluster mode only, reference §3.1).

Upstream's ``--pytorch-init-container-image`` and ``--pytorch-init-container-max-tries``, with
two differences: the container checks the master's TCP port, not its DNS name (complaint #7), and
an empty image turns the step off. The embedded plane never adds it (host network mode). The
plugin declares them (``PyTorch.operator_flags``); the operator adds every plugin's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainyard.frameworks.capabilities import OperatorFlag
from trainyard.frameworks.network import WaitForMaster

DEFAULT = WaitForMaster()

IMAGE = OperatorFlag(
    "--pytorch-init-container-image",
    str,
    DEFAULT.image,
    help=f"image of the Worker init container that waits for the master's port; needs sh and nc "
    f"(default {DEFAULT.image}; empty: no init container)",
)
MAX_TRIES = OperatorFlag(
    "--pytorch-init-container-max-tries",
    int,
    DEFAULT.max_tries,
    help=f"connection attempts, {DEFAULT.interval_seconds} s apart, before the init container fails "
    f"(default {DEFAULT.max_tries})",
)
INIT_CONTAINER_FLAGS = (IMAGE, MAX_TRIES)


def wait_for_master(values: Mapping[str, Any]) -> WaitForMaster | None:
    """The ``ControllerSettings.wait_for_master`` the flags' ``values`` (by ``OperatorFlag.dest``) ask for."""
    image, max_tries = values[IMAGE.dest], values[MAX_TRIES.dest]
    if not image:
        return None
    if max_tries < 1:
        raise SystemExit(f"{MAX_TRIES.name} must be at least 1")
    return WaitForMaster(image=image, max_tries=max_tries)
