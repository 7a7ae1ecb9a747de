"""Per-job port allocation for the ``host`` network mode, where all replicas share one network.

Ports come from a range below Linux's ephemeral range (so outgoing connections do not take them
before a training process binds), are checked free by binding, and stay reserved while the job
that holds them may still run a replica, so two jobs never collide (upstream issues #1797, #2282);
a finished job gives them back (``controller.children.held_ports``), else finished jobs would
exhaust the range. A job that finds none free waits (``PortsExhausted``; its controller tells its
user once and requeues it) and is woken, first come first served, as ports come back: a sweep of
more jobs than the range holds runs in waves, as pods wait for a node's capacity.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass


class PortsExhausted(RuntimeError):
    """No free ports now. ``first``: the owner was not already waiting for ports (tell its user once)."""

    def __init__(self, message: str, *, first: bool) -> None:
        super().__init__(message)
        self.first = first


@dataclass
class _Waiter:
    count: int
    wake: Callable[[], None]


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
        # Held ports inside the range (jobs may hold others, recorded under an earlier range).
        self._held_in_range = 0
        # Owners that found no free ports, first come first woken as ports come back; ``_spare``
        # counts those given back and not yet promised to a woken waiter.
        self._waiting: dict[str, _Waiter] = {}
        self._spare = 0

    def hold(self, owner: str, ports: Iterable[int]) -> None:
        """Record ports an existing job already has (e.g. after an operator restart)."""
        held = self._held.setdefault(owner, set())
        for port in ports:
            if port not in held:
                held.add(port)
                self._holders[port] = self._holders.get(port, 0) + 1
                if self._holders[port] == 1 and self.low <= port <= self.high:
                    self._held_in_range += 1

    def release(self, owner: str) -> None:
        self._waiting.pop(owner, None)
        for port in self._held.pop(owner, ()):
            left = self._holders.pop(port) - 1
            if left:
                self._holders[port] = left
            else:
                self._spare += 1
                if self.low <= port <= self.high:
                    self._held_in_range -= 1
        while self._waiting and (first := next(iter(self._waiting.values()))).count <= self._spare:
            self._spare -= first.count
            del self._waiting[next(iter(self._waiting))]
            first.wake()

    def allocate(self, owner: str, count: int, *, wake: Callable[[], None] | None = None) -> list[int]:
        """``count`` free ports, held for ``owner``; else ``PortsExhausted``, and ``wake`` is called
        once ports come back (in the order owners found none)."""
        out: list[int] = []
        size = self.high - self.low + 1
        unheld = size - self._held_in_range
        # A range held but for a few ports: draws would mostly miss, the walk below finds them.
        # Held whole (thousands of jobs waiting, each rechecked): nothing to draw or walk.
        for _ in range(20 * count + 100 if unheld * 8 >= size else 0):
            if len(out) == count:
                break
            port = self._rng.randint(self.low, self.high)
            if port in self._holders or port in out or not self._free(port):
                continue
            out.append(port)
        if count <= unheld and len(out) < count:
            for port in self._unheld(out):
                if len(out) == count:
                    break
                if self._free(port):
                    out.append(port)
        if len(out) < count:
            first = owner not in self._waiting
            if wake is not None:
                self._waiting.setdefault(owner, _Waiter(count, wake))
            raise PortsExhausted(
                f"no {count} free host ports in {self.low}-{self.high}: jobs that may still run hold them; "
                "they come back as those jobs finish and their pods end (or widen the range: --host-ports)",
                first=first,
            )
        self._waiting.pop(owner, None)
        self.hold(owner, out)
        return out

    def _unheld(self, taken: list[int]) -> Iterable[int]:
        return (p for p in range(self.low, self.high + 1) if p not in self._holders and p not in taken)

    def _free(self, port: int) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((self.host, port))
            except OSError:
                return False
        return True
