"""The Kubernetes API server of the embedded plane: what a client of the HTTP API can observe.

``server`` routes HTTP requests and renders responses (``streams`` keeps watches and followed
logs open); ``objects`` decides what create, update, patch, apply and delete mean; ``registry``
is the table of served resources that ``discovery`` publishes; ``tables`` prints for ``kubectl
get``; ``auth`` is secure mode; ``errors`` and ``causes`` word every failure as kube-apiserver
does; ``connect`` refuses the streaming subresources. Two sub-rooms: ``requests`` (what a
request carries: bodies, protobuf, list options, selectors, JSONPath) and ``writes`` (what a
write goes through before it is stored: decoding checks, shapes, defaults, CRD schemas,
admission, patches, field ownership), with ``builtin`` holding the built-in kinds that carry
rules of their own (HPA, Lease, PriorityClass, ResourceQuota, LimitRange); ``quotas`` is the
write path's ResourceQuota bookkeeping (admission of creates, ``status.used`` kept current).

It stores through ``trainyard.cluster.server.storage`` and may import the shared modules of
``trainyard.cluster``; it never imports the scheduler or the node, which are its clients.
"""
