"""The embedded single-machine control plane, in four rooms and a few shared modules.

* ``storage``: the SQLite store, its change log and the watch hub (what etcd is to a cluster).
* ``apiserver``: the Kubernetes HTTP API over the store: routing, verbs, admission, schemas,
  patching, field ownership, tables, discovery, authentication.
* ``scheduler``: binds pending pods to nodes (kube-scheduler, coscheduling, Volcano's gangs).
* ``node``: this machine's kubelet: runs bound pods as supervised process groups.

The scheduler and the node reach the API server only through the Kubernetes client, as they would
on a real cluster; the API server knows neither of them. What stays at this level is shared by
rooms or composes them: ``plane`` (the API server as one object: store, registry, garbage
collector, listener), ``gc`` (ownerReference cascades, beside the API server), ``paths`` (the
layout under ``$TRAINYARD_HOME``), ``logs`` (the CRI log format the node writes and the API server
serves), ``qos`` (a pod's QoS class, stamped by the API server and enforced by the node) and
``quantity`` (the units the node declares and the scheduler counts in). ``trainyard.embedded``
starts the rooms side by side.
"""
