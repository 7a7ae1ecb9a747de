"""How many threads a container's math libraries start on this node: its CPU share, as variables.

Left alone, OpenMP, MKL and OpenBLAS start one thread per core of the machine in every process;
two replicas on one node then run twice as many busy threads as there are cores (torchrun avoids
it for the workers it starts by setting ``OMP_NUM_THREADS=1``). So the local node gives each
container the thread count of its CPU share, unless the container sets it:

* its ``resources.limits.cpu``, else its ``resources.requests.cpu``, rounded up to whole cores;
* else the node's cores divided among the pods running on it, rounded down: the pods bound to the
  node whose phase is not ``Succeeded`` or ``Failed``, this one included. Bound, not started: a
  gang's pods are bound together and start at about the same time, so a replica counts the
  others before their processes exist;
* divided among the processes a launcher in the container starts, each with thread pools of its
  own: torchrun's ``PET_NPROC_PER_NODE`` (its ``--nproc-per-node``), when it is a number.
  ``auto`` and ``gpu`` do not divide: ``auto`` is the default an operator sets on torch replicas
  whether or not they run torchrun (a plain ``python train.py`` is one process);
* at least 1.

The variables: ``OMP_NUM_THREADS`` (OpenMP; torch's intra-op pool reads it), ``MKL_NUM_THREADS``
and ``OPENBLAS_NUM_THREADS`` (numpy's and scipy's BLAS), ``TF_NUM_INTRAOP_THREADS`` (TensorFlow's
intra-op pool). ``TF_NUM_INTEROP_THREADS`` is left alone: inter-op threads mostly wait for the ops
they schedule, and too few of them can deadlock TensorFlow's collective ops. A variable the
container sets (``env`` or ``envFrom``) is never changed; MKL and OpenBLAS read
``OMP_NUM_THREADS`` when their own is unset, so a container that sets ``OMP_NUM_THREADS`` gets
neither of theirs from the node either.

Pure: ``decide`` returns the plan, ``containerconfig`` applies it to the container's environment
and the agent records ``event`` on the pod (``kubectl describe pod`` shows the container's env
from the spec, not what the node added).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from trainyard.api.meta import Obj
from trainyard.cluster.qos import cpu_limit_millis, cpu_request_millis
from trainyard.cluster.quantity import CPU, format_amount

OMP = "OMP_NUM_THREADS"
# Libraries that fall back on OMP_NUM_THREADS when their own variable is unset.
FOLLOW_OMP = ("MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
TF_INTRA = "TF_NUM_INTRAOP_THREADS"
VARIABLES = (OMP, *FOLLOW_OMP, TF_INTRA)
# torchrun's --nproc-per-node, as the operators set it for every replica that runs torchrun.
LAUNCHER_PROCESSES = "PET_NPROC_PER_NODE"
REASON = "ThreadsSet"
# The BoundPods index of the pods that are not done (``active``): all of them share the node's cores.
ACTIVE = "active"
TERMINAL = ("Succeeded", "Failed")


def active(pod: Obj) -> list[str]:
    """An indexer: a pod bound to the node is ``ACTIVE`` until its phase is terminal."""
    return [] if (pod.get("status") or {}).get("phase") in TERMINAL else [ACTIVE]


def pods_running(active_pods: Iterable[Obj], uid: str) -> int:
    """How many pods share the node's cores: the active ones, the pod ``uid`` among them."""
    return len({(p.get("metadata") or {}).get("uid") for p in active_pods} | {uid})


def node_cores(capacity_millis: int, machine: int) -> int:
    """The node's whole cores; a declared capacity beyond this machine's CPUs runs on those CPUs."""
    return max(1, min(capacity_millis // 1000, machine))


@dataclass(frozen=True)
class Threads:
    """What the node sets: ``env`` (empty when the container set it all), ``count`` and why."""

    count: int
    because: str
    env: dict[str, str] = field(default_factory=dict)
    own: tuple[str, ...] = ()  # the variables above that the container sets itself

    def event(self, container: str) -> str | None:
        """The ``ThreadsSet`` event's message; None when the node set nothing."""
        if not self.env:
            return None
        first, *rest = self.env
        others = f" (and {', '.join(rest)})" if rest else ""
        message = f"Set {first}={self.count}{others} in container {container}: {self.because}"
        if self.own:
            message += f"; {', '.join(self.own)} {'is' if len(self.own) == 1 else 'are'} the container's own"
        return message


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _share(container: Obj, cores: int, pods: int) -> tuple[int, str]:
    """Whole cores of the container's CPU share, and the words that say where they come from."""
    for kind, millis in (("limit", cpu_limit_millis(container)), ("request", cpu_request_millis(container))):
        if millis is not None:
            rounded = ", rounded up" if millis % 1000 else ""
            alone = "" if kind == "limit" else " (no limit)"
            return -(-millis // 1000), f"its cpu {kind} {format_amount(CPU, millis)}{alone}{rounded}"
    return (
        max(1, cores // pods),
        f"no cpu limit or request, the node's {_plural(cores, 'core')} among its {_plural(pods, 'pod')}",
    )


def decide(container: Obj, env: Mapping[str, str], *, cores: int, pods: int) -> Threads:
    """The thread variables for ``container`` whose environment (``env``, the node's own
    additions aside) is as given, on a node of ``cores`` cores running ``pods`` pods, this one included."""
    count, because = _share(container, cores, pods)
    launched = (env.get(LAUNCHER_PROCESSES) or "").strip()
    if launched.isdigit() and int(launched) > 1:
        count //= int(launched)
        because += f", divided among the {launched} processes of {LAUNCHER_PROCESSES}"
    count = max(1, count)
    own = tuple(name for name in VARIABLES if name in env)
    skipped = set(own) | (set(FOLLOW_OMP) if OMP in env else set())
    wanted = {name: str(count) for name in VARIABLES if name not in skipped}
    return Threads(count, because, wanted, own)
