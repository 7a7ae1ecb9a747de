"""Kubeflow Trainer v2 ``trainer.kubeflow.org/v1alpha1``: TrainJob, its runtimes, OptimizationJob.

Names, label keys, condition types and reasons as upstream's ``pkg/apis/trainer/v1alpha1`` and
``pkg/constants`` spell them, so manifests, selectors and the official ``kubeflow`` SDK (0.5.0)
written for Kubeflow Trainer keep working. The objects stay plain dicts (as the API server stores
them). The package's submodules hold the rest:

* ``schema``: the three CRDs (``crds()``), structural schemas with upstream's field names and
  trainyard's ``status.state`` (one of ``STATES``) behind the STATE column;
* ``webhook``: ``default`` and ``validate`` of TrainJobs, ``validate_runtime`` of both runtime
  kinds, and ``runtime_problems`` (the checks that need the referenced runtime);
* ``catalog``: the five ClusterTrainingRuntimes trainyard ships (``runtimes()``);
* ``optimizationjob``: the OptimizationJob's CRD, defaults and validation (upstream's CEL rules).
"""

from __future__ import annotations

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

TRAINJOB = "TrainJob"
TRAINJOBS = "trainjobs"
TRAINING_RUNTIME = "TrainingRuntime"
TRAINING_RUNTIMES = "trainingruntimes"
CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
CLUSTER_TRAINING_RUNTIMES = "clustertrainingruntimes"

CONTROLLER_NAME = "trainer.kubeflow.org/trainjob-controller"
"""``spec.managedBy``'s value for (and the event source of) this controller."""
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
MANAGED_BY = (CONTROLLER_NAME, MULTIKUEUE)

# Labels (pkg/constants).
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
SUPPORT_LABEL = "trainer.kubeflow.org/support"

# Replicated Job / step names and the trainer's container.
NODE = "node"
LAUNCHER = "launcher"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
ANCESTOR_TRAINER = "trainer"
DATASET_MOUNT_PATH = "/workspace/dataset"
MODEL_MOUNT_PATH = "/workspace/model"
CONTAINER_TRAINER_PORT = 29500

# Conditions (upstream sets only these three: the SDK computes "Running" only when none is present).
SUSPENDED = "Suspended"
COMPLETE = "Complete"
FAILED = "Failed"
SUSPENDED_REASON = "Suspended"
RESUMED_REASON = "Resumed"
RUNTIME_NOT_SUPPORTED_REASON = "TrainingRuntimeNotSupported"
DEADLINE_EXCEEDED_REASON = "DeadlineExceeded"
SUSPENDED_MESSAGE = "TrainJob is suspended"
RESUMED_MESSAGE = "TrainJob is resumed"
DEADLINE_EXCEEDED_MESSAGE = "TrainJob exceeded its active deadline"

# trainyard's own status field behind the STATE column (kubeflow/trainer#2713): conditions cannot
# carry Pending and Running without hiding "Running" from the official SDK.
STATES = ("Pending", "Running", "Suspended", "Complete", "Failed")

# Env names the runtimes inject (reserved: a trainer may not set them).
TORCH_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
XGBOOST_ENV = ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER")
JAX_ENV = ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS")
MPI_ENV = (
    "OMPI_MCA_orte_default_hostfile",
    "OMPI_MCA_plm_rsh_args",
    "OMPI_MCA_orte_keep_fqdn_hostnames",
    "OMPI_MCA_orte_set_default_slots",
)
MPI_HOSTFILE_SUFFIX = "-mpi-hostfile"
MPI_SSH_SECRET_SUFFIX = "-mpi-ssh-auth"
MPI_HOSTFILE_DIR = "/etc/mpi"

# OptimizationJob (optimizationjob_types.go, KEP-3562). Upstream ships the type and no controller: the
# label, annotation and index below are trainyard's, the env prefix and the reasons are the KEP's.
OPTIMIZATIONJOB = "OptimizationJob"
OPTIMIZATIONJOBS = "optimizationjobs"
OPTIMIZATIONJOB_CONTROLLER = "trainer.kubeflow.org/optimizationjob-controller"
"""The event source of the OptimizationJob controller."""
OPTIMIZATIONJOB_LABEL = "trainer.kubeflow.org/optimizationjob"
"""Every trial TrainJob's label: the name of the OptimizationJob that made it."""
TRIAL_INDEX_LABEL = "trainer.kubeflow.org/trial-index"
"""A trial TrainJob's place in its OptimizationJob's history (0, 1, ...); its name ends with it."""
PARAMETERS_ANNOTATION = "trainer.kubeflow.org/parameters"
"""A trial TrainJob's raw parameter assignment, JSON ``[{"name": ..., "value": ...}]`` (the KEP's §8.2)."""
OPT_ENV_PREFIX = "KUBEFLOW_TRAINER_OPT_"
"""Each parameter reaches the trainer as ``KUBEFLOW_TRAINER_OPT_<NAME>`` (upper-cased, non-alphanumerics ``_``)."""
CREATED = "Created"
CREATED_REASON = "Created"
MAX_TRIALS_REACHED_REASON = "MaxTrialsReached"
SEARCH_SPACE_EXHAUSTED_REASON = "SearchSpaceExhausted"
ALL_TRIALS_FAILED_REASON = "AllTrialsFailed"
TRAINJOBS_CREATION_FAILED_REASON = "TrainJobsCreationFailed"
# trainyard's ``status.state`` of an OptimizationJob (the official SDK's OptimizationJob statuses) and
# of each of its ``status.trials``.
OPTIMIZATION_STATES = ("Created", "Running", "Complete", "Failed")
TRIAL_STATES = ("Running", "Complete", "Failed")

TRAINER_PUBLIC_CONFIGMAP = "kubeflow-trainer-public"
"""The ConfigMap (in ``kubeflow-system``) the SDK reads ``kubeflow_trainer_version`` from."""
SYSTEM_NAMESPACE = "kubeflow-system"
TRAINER_VERSION = "v2.3.0"
"""The upstream release whose API and behaviour trainyard's TrainJob follows."""

# The CRDs, the webhook and the shipped runtimes live in submodules (which import the names above).
from trainyard.api.trainer.catalog import DEFAULT_RUNTIME, SHIPPED_ANNOTATION, runtimes  # noqa: E402
from trainyard.api.trainer.schema import crds  # noqa: E402
from trainyard.api.trainer.webhook import default, runtime_problems, validate, validate_runtime  # noqa: E402

__all__ = [
    "DEFAULT_RUNTIME",
    "SHIPPED_ANNOTATION",
    "crds",
    "default",
    "runtime_problems",
    "runtimes",
    "validate",
    "validate_runtime",
]
