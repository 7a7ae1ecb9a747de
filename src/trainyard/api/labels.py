"""Label and annotation keys: upstream's, so selectors written for Kubeflow keep working; and how a
LabelSelector matches labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` match a LabelSelector (``matchLabels`` and ``matchExpressions``), as
    apimachinery's: an empty selector matches everything."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
