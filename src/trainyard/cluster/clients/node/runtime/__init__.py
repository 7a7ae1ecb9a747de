"""The container runtime of the local node: what containerd and its shims are to a kubelet.

``shim`` supervises one container run in a process of its own (forked by a small server that
imports only the standard library, ``mountns`` and ``trainyard.cluster.logs``), so containers
outlive the agent; ``shims`` is the agent's side: start, watch and adopt runs. ``mountns`` puts
a container in a private mount namespace with its volumes. For exec into pods (``node.podexec``):
``nsexec`` enters a running pod (hostname, mounts, cgroup) before ``exec``, ``rsh`` is the ssh
stand-in client, ``sshd`` the placeholder run where an image's sshd would be.
"""
