"""kube-controller-manager's node controllers for the embedded plane: node lifecycle, taint eviction, PodGC.

``health`` and ``taints`` are pure (a Node, its Lease, its pods and the time in; what to write
out): when a Node stopped heartbeating (neither its Ready condition's heartbeat nor its Lease in
``kube-node-lease`` renewed within ``--node-monitor-grace-period``) its conditions go Unknown
and it gets the ``node.kubernetes.io/unreachable`` taints; ``taints`` says which pods a
NoExecute taint evicts and when. ``podgc`` decides which pods the pod garbage collector
force-deletes. ``lifecycle``, ``eviction`` and ``gc`` are their I/O shells on the controller kit;
``manager`` runs them on one Node informer, as kube-controller-manager's shared informers.
"""
