"""Per-job port allocation for the ``host`` network mode, where all replicas share one network.

Ports come from a range below Linux's ephemeral range (so outgoing connections do not take them
before a training process binds), are checked free by binding, and stay reserved while the job
that holds them may still run a replica, so two jobs never collide (upstream issues #1797, #2282);
a finished job gives them back (``controller.children.held_ports``), else finished jobs would
exhaust the range.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterable


class PortsExhausted(RuntimeError):
    pass


class PortAllocator:
    def __init__(
        self,
        *,
        low: int = 20000,
        high: int = 32767,
        host: str = "127.0.0.1",
        rng: random.Random | None = None,
    ) -> None:
        self.low, self.high, self.host = low, high, host
        self._rng = rng or random.Random()
        self._held: dict[str, set[int]] = {}
        # How many owners hold each port (two may, after a restart: each job recorded its own),
        # so that a draw checks one port rather than gathering every job's.
        self._holders: dict[int, int] = {}

    def hold(self, owner: str, ports: Iterable[int]) -> None:
        """Record ports an existing job already has (e.g. after an operator restart)."""
        held = self._held.setdefault(owner, set())
        for port in ports:
            if port not in held:
                held.add(port)
                self._holders[port] = self._holders.get(port, 0) + 1

    def release(self, owner: str) -> None:
        for port in self._held.pop(owner, ()):
            left = self._holders.pop(port) - 1
            if left:
                self._holders[port] = left

    def allocate(self, owner: str, count: int) -> list[int]:
        out: list[int] = []
        for _ in range(20 * count + 100):
            if len(out) == count:
                break
            port = self._rng.randint(self.low, self.high)
            if port in self._holders or port in out or not self._free(port):
                continue
            out.append(port)
        if len(out) < count:
            raise PortsExhausted(
                f"could not find {count} free ports in {self.low}-{self.high}; delete finished jobs or widen the range"
            )
        self.hold(owner, out)
        return out

    def _free(self, port: int) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((self.host, port))
            except OSError:
                return False
        return True
