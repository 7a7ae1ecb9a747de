"""``yard up``'s node flags, read into the nodes the plane runs (``NodeSpec``s) and passed on to its process.

One node by default (``--node-name``, ``--cpus``, ... describe it); ``--nodes N`` makes N alike
(the same flags describe each); ``--nodes-file`` describes each node (``nodespec``). A bad
value raises ValueError naming the flag (or the file's field paths).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainyard.cluster.clients.node import capacity, gpus, nodespec, nodestatus
from trainyard.cluster.clients.node.nodespec import NodeSpec
from trainyard.cluster.paths import Layout


@dataclass(frozen=True)
class NodeFlags:
    """The node flags as given (None: not given)."""

    node_name: str | None = None
    cpus: str | None = None
    memory: str | None = None
    gpus: int | None = None
    max_pods: int | None = None
    taint: tuple[str, ...] = ()
    nodes: int | None = None
    nodes_file: Path | None = None
    node_lease_duration: int | None = None
    cluster_dns: str | None = None

    def argv(self) -> list[str]:
        """These flags, as they are passed on to the plane's own process."""
        out = []
        for flag, value in (
            ("--node-name", self.node_name),
            ("--cpus", self.cpus),
            ("--memory", self.memory),
            ("--gpus", self.gpus),
            ("--max-pods", self.max_pods),
            ("--nodes", self.nodes),
            ("--nodes-file", self.nodes_file.resolve() if self.nodes_file else None),
            ("--node-lease-duration", self.node_lease_duration),
            ("--cluster-dns", self.cluster_dns),
        ):
            if value is not None:
                out += [flag, str(value)]
        for taint in self.taint:
            out += ["--taint", taint]
        return out


def declared(layout: Layout, flags: NodeFlags) -> capacity.Capacity | None:
    """The capacity the flags declare (None: detect it all)."""
    gpu_count = flags.gpus
    if gpu_count is None and os.environ.get(gpus.ENV, "").strip():
        gpu_count = gpus.from_env()  # $TRAINYARD_GPUS: the same declaration, for scripts and tests
    if all(v is None for v in (flags.cpus, flags.memory, gpu_count, flags.max_pods)):
        return None
    detected = capacity.detect(layout.home)
    return capacity.declare(detected, cpus=flags.cpus, memory=flags.memory, gpus=gpu_count, pods=flags.max_pods)


def specs(layout: Layout, flags: NodeFlags) -> tuple[NodeSpec, ...]:
    """The nodes the flags ask for; ValueError says which flag (or which field of the file) is wrong."""
    if flags.node_lease_duration is not None and flags.node_lease_duration < 1:
        raise ValueError(f"--node-lease-duration must be at least 1 second, not {flags.node_lease_duration}")
    taints = [nodestatus.parse_taint(t) for t in flags.taint]
    if flags.nodes_file is not None:
        if flags.nodes is not None:
            raise ValueError("give --nodes or --nodes-file, not both (the file says how many nodes there are)")
        return nodespec.parse(_read(flags.nodes_file), capacity.detect(layout.home), str(flags.nodes_file))
    default_name = flags.node_name or ""  # "": the host's name, as the node agent picks it
    return nodespec.alike(flags.nodes or 1, flags.node_name, default_name, declared(layout, flags), taints)


def _read(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ValueError(f"--nodes-file {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"--nodes-file {path} is not YAML: {exc}") from exc
