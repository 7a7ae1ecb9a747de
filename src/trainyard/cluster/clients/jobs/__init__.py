"""The Job controller of the embedded plane: kube-controller-manager's, for ``batch/v1`` Jobs.

``decisions`` is the pure part (a Job, its pods and the time in; a plan out); ``controller`` the
I/O shell that watches Jobs and pods through the client, as the scheduler does, and applies plans.
"""
