"""The scheduler: kube-scheduler, scheduler-plugins' coscheduling and Volcano's gangs for the local plane.

``loop`` is the I/O shell: informer caches (``informer``), the queue of pending pods
(``queueing``), bindings, events and PodGroup status writes. ``placement`` decides where pods go
as a pure function (``filters``: whether and where one pod fits; ``snapshot``: what it reads of
pods and nodes), and ``podgroups`` holds the gang kinds the plane installs and how their
status follows their pods. Everything but ``loop`` and ``informer`` is pure.

Like kube-scheduler it talks to the API server only through the Kubernetes client: it imports
neither ``apiserver`` nor ``storage``, and never the node. ``trainyard.cluster.quantity`` gives
it the units that resources are counted in.
"""
