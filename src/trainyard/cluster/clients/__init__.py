"""The embedded cluster's clients of the API server, as kube-scheduler, the kubelet and
kube-controller-manager are: the node agent (``node``), the scheduler (``scheduler``) and the
built-in Job and JobSet controllers (``jobs``, ``jobsets``, on the controller kit). They reach the
server only through the Kubernetes API."""
