"""The connect subresources that take the connection over: port-forward today, over SPDY or WebSocket.

``upgrades`` turns an HTTP request into a byte pipe (SPDY/3.1 upgrade, or a WebSocket), ``spdy``
runs SPDY/3.1 sessions over such a pipe, ``forwarding`` dials a pod's port and copies, and
``portforward`` / ``portforward_channels`` speak ``pods/portforward``'s protocols. Nothing here
reads the store: the API server hands in the object it looked up.
"""
