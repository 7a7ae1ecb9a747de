"""The connect subresources that reach a pod's port: port-forward (over SPDY or WebSocket) and proxy.

``upgrades`` turns an HTTP request into a byte pipe (SPDY/3.1 upgrade, or a WebSocket), ``spdy``
runs SPDY/3.1 sessions over such a pipe (``remotecommand`` runs exec and attach over them too),
``forwarding`` dials a pod's port and copies, ``portforward`` / ``portforward_channels`` speak
``pods/portforward``'s protocols, and ``proxying`` forwards HTTP for ``pods/proxy`` and
``services/proxy``. Nothing here reads the store: the API server hands in the objects it looked up.
"""
