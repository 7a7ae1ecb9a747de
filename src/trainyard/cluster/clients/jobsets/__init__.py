"""The JobSet controller of the embedded plane: kubernetes-sigs/jobset's, for ``jobset.x-k8s.io/v1alpha2``.

``decisions`` is the pure part (a JobSet, its child Jobs and the time in; a plan out);
``controller`` the I/O shell that watches JobSets and Jobs through the client and applies plans.
The API half (CRD, webhook defaults and validation, label keys) is ``trainyard.api.jobset``.
"""
