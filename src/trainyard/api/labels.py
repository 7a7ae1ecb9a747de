"""Label and annotation keys: upstream's, so selectors written for Kubeflow keep working."""

OPERATOR_NAME = "training.kubeflow.org/operator-name"
JOB_NAME = "training.kubeflow.org/job-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
JOB_ROLE = "training.kubeflow.org/job-role"

# Our own: ports the operator allocated for a job in host network mode, as JSON
# {"<replica-type>-<index>/<port-name>": port}. Kept on the job so a restarted operator reuses them.
HOST_PORTS = "trainyard.dev/host-ports"

# Our own: marks a job's rendezvous host (a pod and, in cluster-dns mode, its Service), which is
# owned by the job but is no replica: the value is the rendezvous backend (``c10d``).
RENDEZVOUS = "trainyard.dev/rendezvous"

# Kubernetes' own: an Indexed Job's pods carry their completion index as this annotation and label.
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
