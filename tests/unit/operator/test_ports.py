"""Host-network port allocation: what jobs hold is never given out again until every holder lets go."""

from __future__ import annotations

import random
import socket

import pytest

from trainyard.operator.ports import PortAllocator, PortsExhausted


def _free_range(size: int) -> tuple[int, int]:
    """``size`` consecutive ports on 127.0.0.1 that bind now (the allocator checks by binding too)."""
    for low in range(24000, 32000, size):
        held = []
        try:
            for port in range(low, low + size):
                s = socket.socket()
                s.bind(("127.0.0.1", port))
                held.append(s)
            return low, low + size - 1
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise AssertionError("no free range of ports")


def test_held_ports_are_not_given_out_until_every_holder_releases_them() -> None:
    low, high = _free_range(4)
    ports = PortAllocator(low=low, high=high, rng=random.Random(7))
    ports.hold("ns/a", [low, low + 1])
    ports.hold("ns/b", [low + 1])  # after a restart two jobs may have recorded the same port
    assert set(ports.allocate("ns/c", 2)) == {low + 2, low + 3}
    with pytest.raises(PortsExhausted):
        ports.allocate("ns/d", 1)
    ports.release("ns/a")
    assert ports.allocate("ns/d", 1) == [low]  # low + 1 is still b's
    ports.release("ns/b")
    ports.release("ns/b")  # twice is harmless
    assert ports.allocate("ns/e", 1) == [low + 1]


def test_holding_a_port_twice_for_one_job_counts_once() -> None:
    low, high = _free_range(2)
    ports = PortAllocator(low=low, high=high, rng=random.Random(1))
    ports.hold("ns/a", [low])
    ports.hold("ns/a", [low])  # every pass re-records the job's ports
    ports.release("ns/a")
    assert sorted(ports.allocate("ns/b", 2)) == [low, high]


def test_the_last_free_port_of_a_range_is_found() -> None:
    low, high = _free_range(64)
    ports = PortAllocator(low=low, high=high, rng=random.Random(3))
    ports.hold("ns/a", [p for p in range(low, high + 1) if p != low + 41])
    assert ports.allocate("ns/b", 1) == [low + 41]  # random draws alone would likely miss it


def test_owners_that_found_no_ports_are_woken_in_order_as_ports_come_back() -> None:
    low, high = _free_range(4)
    ports = PortAllocator(low=low, high=high, rng=random.Random(5))
    ports.hold("ns/a", [low, low + 1])
    ports.hold("ns/b", [low + 2, low + 3])
    woken: list[str] = []
    for owner, count in (("ns/c", 2), ("ns/d", 1), ("ns/e", 1)):
        with pytest.raises(PortsExhausted) as told:
            ports.allocate(owner, count, wake=lambda owner=owner: woken.append(owner))
        assert told.value.first
    with pytest.raises(PortsExhausted) as again:
        ports.allocate("ns/c", 2, wake=lambda: woken.append("ns/c"))
    assert not again.value.first  # its user was told already
    ports.release("ns/a")
    assert woken == ["ns/c"]  # two ports back: the first waiter's two
    assert len(ports.allocate("ns/c", 2)) == 2
    ports.release("ns/b")
    assert woken == ["ns/c", "ns/d", "ns/e"]
    ports.release("ns/e")  # a waiter that goes away is forgotten
    ports.release("ns/c")
    assert woken == ["ns/c", "ns/d", "ns/e"]


def test_ports_held_outside_the_range_leave_its_own_free() -> None:
    # After a restart with another --host-ports, jobs still record ports of the earlier range.
    low, high = _free_range(2)
    ports = PortAllocator(low=low, high=high, rng=random.Random(3))
    ports.hold("ns/old", [low - 10, low - 9, low - 8])
    assert sorted(ports.allocate("ns/new", 2)) == [low, high]
    with pytest.raises(PortsExhausted):
        ports.allocate("ns/next", 1)
    ports.release("ns/new")
    assert ports.allocate("ns/next", 1) in ([low], [high])
