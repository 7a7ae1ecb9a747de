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
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000
OLDER_THRESHOLDS = (20, 10)


def settle() -> None:
    """Collect what startup left, freeze the rest, then collect less often; call once started."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
