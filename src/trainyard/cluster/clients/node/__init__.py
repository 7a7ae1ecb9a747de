"""The local node: this machine's kubelet. Pods bound to it become supervised process groups.

``agent`` registers the Node, watches its pods and runs them (``runs`` is what it knows of each
pod and container run; ``containerconfig`` prepares a container's environment, volumes, mounts
and working directory). What a container needs comes from ``podenv`` (environment),
``volumes`` and ``persistentvolumes`` (volumes and claims), ``tokens`` (projected service-account
tokens, kept fresh), ``gpus`` (device assignment) and ``probes``; ``conditions``, ``podstatus``
and ``nodestatus`` shape and write what it reports, ``capacity`` measures the machine and
``backoff`` times restarts. The sub-room ``runtime`` is
the container runtime: shims that supervise each container in a process of its own.

Like a kubelet it talks to the API server only through the Kubernetes client: it imports neither
``apiserver`` nor ``storage``, and never the scheduler. The shim's fork server imports
``runtime.shim`` with the standard library alone (``python -I -S``), so the ``__init__``
modules on its way hold no code.
"""
