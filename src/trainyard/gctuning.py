"""The cyclic garbage collector of the long-running processes (``yard up``'s plane, the operator).

CPython's defaults suit short scripts: a young collection every 700 allocations, and a full one
each time the objects that outlived the young ones reach a quarter of the old. A server's heap
is mostly long-lived (imported code, informer caches, the store's index), and every full
collection walks all of it: on a 300-job sweep the plane ran one every ~2 s, each longer than the
last as its caches grew (0.10 s, then 0.18 s), about 0.9 s of the sweep's 12 s of CPU, a cost
per job that grows with the number of objects (measured with ``gc.callbacks``). Once a process
has started, ``settle`` freezes what startup made (never scanned again) and lets a young
collection wait for 20,000 allocations. Reference counting frees all acyclic garbage at once as
before; only reference cycles wait longer to be found.

No collection may hold the event loop for long, since every request waits behind it:

* a middle collection runs after every second young one, so it walks what two young ones left
  (at most tens of thousands of objects); after twenty, as before, it walked up to half a second's
  worth in a 3,000-job sweep;
* each full collection freezes what it kept, so the next walks only what outlived the young ones
  since, not the whole heap again (a 10,000-job plane holds millions of objects). Cycles among
  frozen objects are never found, so once the frozen heap has doubled since it was last walked
  whole, it is unfrozen and the next full collection walks all of it: each object is walked a
  bounded number of times, and a garbage cycle waits at most until the heap has doubled.
"""

from __future__ import annotations

import gc
from typing import Any

YOUNG_THRESHOLD = 20_000
OLDER_THRESHOLDS = (2, 10)


class _FullCollections:
    """Freezes what each full collection kept; every doubling of the frozen heap, one whole walk."""

    def __init__(self) -> None:
        self.walked = gc.get_freeze_count()  # frozen objects when the heap was last walked whole

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info["generation"] != 2:
            return
        whole = gc.get_freeze_count() == 0  # this collection walked everything
        gc.freeze()
        frozen = gc.get_freeze_count()
        if whole:
            self.walked = frozen
        elif frozen > 2 * self.walked:
            gc.unfreeze()  # the next full collection walks it all


def settle() -> None:
    """Collect what startup left, freeze the rest, then collect less often; call once started."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
    if not any(isinstance(cb, _FullCollections) for cb in gc.callbacks):
        gc.callbacks.append(_FullCollections())
