"""The controller kit: what every controller of trainyard is made of, written once.

A controller here is, as in controller-runtime: informers that only enqueue keys (``informer``:
list-then-watch caches, the owner index, ``key_of``, ``newer``); a work queue
(``queue``); workers that take a key, ask a pure function for a plan and apply it, and sort what
went wrong by one error taxonomy (``worker``); one applier of plans (``applier``: create, replace,
delete owned children, the status write with its resourceVersion precondition, events after it);
and one vocabulary for what a plan says (``plans``: events, requeues) and how conditions move
(``conditions``). The last two are pure, so that the pure halves of controllers speak them.
docs/architecture.md's "How to add a controller" walks through one.
"""
