"""kube-controller-manager's disruption controller: the status of every PodDisruptionBudget.

``decisions`` is pure (a budget, the pods it selects, the scale of their controllers and the time
in; its status and events out); ``controller`` the I/O shell on the controller kit. The eviction
subresource (``server.apiserver.subresources``) reads what it writes.
"""
