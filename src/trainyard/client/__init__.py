"""The one Kubernetes client (lightkube) as trainyard uses it, the same way in the embedded plane
and on a real cluster: the operator, the node agent, the scheduler and the SDK reach the API only
through it.

``resources``: resource classes for our kinds and plain kinds, and the helpers every caller
shares; ``transport``: the ``Client`` and how its requests travel (in-process or over httpx);
``watches``: watch streams and watches that reconnect; ``events``: core/v1 Events.
"""
