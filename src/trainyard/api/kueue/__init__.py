"""Kueue's API as the plane serves it (kueue.x-k8s.io v1beta1 and v1beta2): names, labels, words.

Kueue (kubernetes-sigs/kueue) queues jobs: a job labelled ``kueue.x-k8s.io/queue-name`` is
created suspended, gets a ``Workload`` (one pod set per replica type), and is unsuspended when a
``ClusterQueue`` reserves quota for the whole Workload. These constants are Kueue's own words
(``apis/kueue/v1beta2``, ``pkg/controller/constants``, ``pkg/workload``), read by ``crds`` (the
CRDs), ``workloads`` (a job's Workload), ``admission`` (the queueing decision) and the embedded
Kueue controller (``cluster.clients.kueue``).
"""

from __future__ import annotations

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta1", "v1beta2")
"""Served, in this order; stored version-free (the plane converts by ``apiVersion`` only, below)."""
STORAGE_VERSION = "v1beta2"

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
QUEUE_ANNOTATION = "kueue.x-k8s.io/queue-name"
"""The deprecated spelling Kueue still reads when the label is absent."""
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
CONTROLLER = "kueue.x-k8s.io/job-controller"
MANAGER = "kueue-manager"
"""The component name of Kueue's events (its manager's)."""

# Workload condition types
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
REQUEUED = "Requeued"
FINISHED = "Finished"
PODS_READY = "PodsReady"

# reasons
PENDING = "Pending"
INADMISSIBLE = "Inadmissible"
EVICTED_BY_PREEMPTION = "Preempted"
EVICTED_INACTIVE = "InactiveWorkload"
IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAIM = "InCohortReclamation"
SUCCEEDED = "Succeeded"
FAILED = "Failed"

# ClusterQueue spec words
STRICT_FIFO = "StrictFIFO"
BEST_EFFORT_FIFO = "BestEffortFIFO"
NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL = "LowerOrNewerEqualPriority"
ANY = "Any"

WORKLOAD_PRIORITY_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_SOURCE = "scheduling.k8s.io/priorityclass"
