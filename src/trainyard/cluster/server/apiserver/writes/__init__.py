"""The write path: what an object goes through between a decoded body and the store.

In the order ``objects`` runs them: ``decoding`` (what Go's decoding would refuse),
``shapes`` (JSON types of what the plane reads), ``defaulting`` (defaults and update rules of
built-ins), ``schema`` (CRD structural schemas: prune, defaults, validation, with ``formats``),
``admission`` (validation, the job webhook); ``patching`` turns a patch into the new object and
``fieldmanager`` keeps ``managedFields`` and does server-side apply; ``deletion`` marks what a
delete cannot remove yet. Pure: none reads or writes the store. May import ``apiserver``'s
``errors``, ``causes``, ``registry`` and ``builtin``.
"""
