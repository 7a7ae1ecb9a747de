"""``gctuning.settle``: what startup made is frozen out of every later collection, and young
collections run less often; cyclic garbage made after it is still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from trainyard import gctuning


@pytest.fixture
def collector() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.callbacks[:] = [cb for cb in gc.callbacks if not isinstance(cb, gctuning._FullCollections)]
    gc.unfreeze()
    gc.set_threshold(*before)


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


@pytest.mark.usefixtures("collector")
def test_startup_is_frozen_and_later_cycles_are_still_collected() -> None:
    gctuning.settle()
    assert gc.get_threshold() == (gctuning.YOUNG_THRESHOLD, *gctuning.OLDER_THRESHOLDS)
    assert gc.get_freeze_count() > 0

    later = Node()
    gone = weakref.ref(later)
    del later
    gc.collect()
    assert gone() is None


@pytest.mark.usefixtures("collector")
def test_full_collections_freeze_what_they_keep_and_walk_it_all_once_it_has_doubled() -> None:
    gctuning.settle()
    kept = Node()
    gc.collect()  # a full collection keeps it (it is alive) and freezes it
    frozen = gc.get_freeze_count()
    gone = weakref.ref(kept)
    del kept
    gc.collect()
    assert gone() is not None  # frozen: the next full collections do not walk it
    grown = [[] for _ in range(frozen + 1000)]  # the frozen heap more than doubles...
    gc.collect()
    gc.collect()
    assert gone() is None  # ...and the heap is walked whole again
    assert gc.get_freeze_count() >= len(grown)
