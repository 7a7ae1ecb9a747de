"""What the local node offers the scheduler: its capacity, detected from this machine or declared.

``detect`` reads the machine as a kubelet does: logical CPUs, total memory, NVIDIA GPUs counted
with ``nvidia-smi -L`` (0 when the tool is absent or finds none), the size of the filesystem
that holds the pods' directories as ``ephemeral-storage``, and the kubelet's default 110 pods.
``declare`` replaces CPUs, memory, GPUs or pods with what ``yard up --cpus/--memory/--gpus/
--max-pods`` says, to *simulate* a bigger (or smaller) node: the scheduler then admits pods
against the declared numbers, while the processes still share this machine's real CPUs, memory
and GPUs.

``pressure`` measures the node conditions a kubelet reports (memory and disk pressure at the
kubelet's default hard-eviction thresholds); ``machine_cpus`` the CPUs the node's processes
really share, whatever was declared. Callers: the ``yard up`` CLI (parsing), the
composition root and the node agent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path

from trainyard.cluster.quantity import CPU, EPHEMERAL_STORAGE, GPU, MEMORY, PODS, amount, format_amount

DEFAULT_MAX_PODS = 110  # the kubelet's --max-pods default
# The kubelet's default hard-eviction thresholds (memory.available<100Mi, nodefs.available<10%).
MEMORY_EVICTION_BYTES = 100 * 2**20
DISK_EVICTION_FRACTION = 0.10
NVIDIA_SMI_TIMEOUT = 10.0


@dataclass(frozen=True)
class Capacity:
    """The node's capacity (also its allocatable: nothing is reserved for system daemons here).

    ``cpu`` is in millicores and ``memory`` in bytes, the units the scheduler counts in; ``gpus``
    is the number of ``nvidia.com/gpu`` devices. ``declared`` names the resources ``yard up``
    declared rather than detected.
    """

    cpu: int
    memory: int
    gpus: int
    pods: int = DEFAULT_MAX_PODS
    declared: frozenset[str] = field(default_factory=frozenset)
    ephemeral_storage: int = 0  # bytes; 0: not reported

    def resources(self) -> dict[str, str]:
        """``status.capacity`` / ``status.allocatable`` of the Node, as quantities."""
        out = {
            CPU: format_amount(CPU, self.cpu),
            MEMORY: format_amount(MEMORY, self.memory),
            GPU: str(self.gpus),
            PODS: str(self.pods),
        }
        if self.ephemeral_storage:
            out[EPHEMERAL_STORAGE] = format_amount(MEMORY, self.ephemeral_storage)
        return out

    @property
    def simulated(self) -> bool:
        return bool(self.declared)


def count_gpus(nvidia_smi: str | None = None) -> int:
    """NVIDIA GPUs on this machine, as ``nvidia-smi -L`` lists them; 0 without the tool or a driver."""
    tool = nvidia_smi or shutil.which("nvidia-smi")
    if tool is None:
        return 0
    try:
        listing = subprocess.run(
            [tool, "-L"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return 0
    if listing.returncode != 0:
        return 0
    return sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))


def machine_cpus() -> int:
    """The CPUs this process may run on, and so every container it starts (its affinity)."""
    with contextlib.suppress(AttributeError, OSError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _total_memory() -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def detect(home: Path | None = None) -> Capacity:
    """This machine's capacity, as a kubelet would report it (storage: the filesystem of ``home``)."""
    try:
        storage = shutil.disk_usage(home or Path.cwd()).total
    except OSError:
        storage = 0
    return Capacity(
        cpu=(os.cpu_count() or 1) * 1000, memory=_total_memory(), gpus=count_gpus(), ephemeral_storage=storage
    )


def declare(
    base: Capacity,
    *,
    cpus: str | None = None,
    memory: str | None = None,
    gpus: int | None = None,
    pods: int | None = None,
) -> Capacity:
    """``base`` with the resources ``yard up`` declared; ValueError names a malformed or negative one."""
    declared = set(base.declared)
    out = base
    if cpus is not None:
        out = replace(out, cpu=_positive(CPU, cpus, "--cpus"))
        declared.add(CPU)
    if memory is not None:
        out = replace(out, memory=_positive(MEMORY, memory, "--memory"))
        declared.add(MEMORY)
    if gpus is not None:
        if gpus < 0:
            raise ValueError(f"--gpus must be 0 or more, not {gpus}")
        out = replace(out, gpus=gpus)
        declared.add(GPU)
    if pods is not None:
        if pods < 1:
            raise ValueError(f"--max-pods must be at least 1, not {pods}")
        out = replace(out, pods=pods)
        declared.add(PODS)
    return replace(out, declared=frozenset(declared))


def _positive(resource: str, text: str, flag: str) -> int:
    try:
        value = amount(resource, text)
    except ValueError as exc:
        example = "4 or 500m" if resource == CPU else "64Gi"
        raise ValueError(f"{flag} {text!r} is not a quantity (e.g. {example})") from exc
    if value <= 0:
        raise ValueError(f"{flag} must be more than 0, not {text!r}")
    return value


@dataclass(frozen=True)
class Pressure:
    memory: bool = False
    disk: bool = False
    pid: bool = False


def _available_memory() -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def pressure(home: Path) -> Pressure:
    """The node's pressure conditions at the kubelet's default eviction thresholds.

    Memory: less than 100Mi available on the machine; disk: less than 10% free on the filesystem
    of ``$TRAINYARD_HOME`` (pod logs and working directories). The kubelet sets no PID threshold
    by default, so PID pressure is never reported.
    """
    available = _available_memory()
    try:
        disk = shutil.disk_usage(home)
        low_disk = disk.free < disk.total * DISK_EVICTION_FRACTION
    except OSError:
        low_disk = False
    return Pressure(memory=available is not None and available < MEMORY_EVICTION_BYTES, disk=low_disk)
