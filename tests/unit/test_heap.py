"""``heap.settle``: what startup made is frozen out of every later collection, and young
collections run less often; cyclic garbage made after it is still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from trainyard import heap


@pytest.fixture
def collector() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


@pytest.mark.usefixtures("collector")
def test_startup_is_frozen_and_later_cycles_are_still_collected() -> None:
    heap.settle()
    assert gc.get_threshold() == (heap.YOUNG_THRESHOLD, *heap.OLDER_THRESHOLDS)
    assert gc.get_freeze_count() > 0

    later = Node()
    gone = weakref.ref(later)
    del later
    gc.collect()
    assert gone() is None
