"""The plane's metrics APIs, served through the API server as aggregated groups (its APIServices).

* ``resource``: ``metrics.k8s.io/v1beta1``, metrics-server's: PodMetrics and NodeMetrics from what
  the nodes last measured (``node.resourcestats``), for ``kubectl top`` and Resource metrics.
* ``custom``: ``custom.metrics.k8s.io/v1beta2`` (a described object's metric: a job's reported
  training metrics) and ``external.metrics.k8s.io/v1beta1`` (Kueue's queue depth), as an adapter
  (prometheus-adapter, KEDA) serves them.

Each reads the cluster through the client and its informers, as those components do; the API
server routes their groups to them (``apiserver.aggregation``). The autoscaler reads them back
through the API, as kube-controller-manager reads them.
"""
