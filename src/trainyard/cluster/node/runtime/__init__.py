"""The container runtime of the local node: what containerd and its shims are to a kubelet.

``shim`` supervises one container run in a process of its own (forked by a small server that
imports only the standard library, ``mountns`` and ``trainyard.cluster.logs``), so containers
outlive the agent; ``shims`` is the agent's side: start, watch and adopt runs. ``mountns`` puts
a container in a private mount namespace with its volumes.
"""
