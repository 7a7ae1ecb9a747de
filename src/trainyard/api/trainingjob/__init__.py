"""The seed's ``TrainingJob`` (``ml.example.com/v1``): one high-level object per training run.

A TrainingJob names a model, a dataset, a worker count and its hyperparameters; trainyard's
TrainingJob controller compiles it into an owned ``kubeflow.org/v1`` job of the same name
(``frameworks.trainingjob``: PyTorchJob, TFJob or JAXJob by ``spec.framework``) and mirrors that
job's status into the seed's (state, progress, epoch, metrics, workers, checkpoint). The group is
the seed's own, so its manifests apply as written. The objects stay plain dicts (as the API
server stores them). The package's submodules hold the rest:

* ``schema``: the CRD (``crd()``), a structural schema of every field of the seed's API reference
  with its bounds and defaults, and the printer columns ``NAME STATE PROGRESS EPOCH AGE``;
* ``webhook``: ``default`` and ``validate`` (the rules a schema cannot say, with field paths).
"""

from __future__ import annotations

GROUP = "ml.example.com"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TrainingJob"
PLURAL = "trainingjobs"
SINGULAR = "trainingjob"
SHORT_NAMES = ("trj",)
"""Not ``tj``: kubectl users of Kubeflow Trainer read that as a TrainJob."""
CONTROLLER_NAME = "ml.example.com/trainingjob-controller"
"""The event source of the TrainingJob controller."""

JOB_LABEL = "training-job"
"""Every worker pod's label, so the seed's ``kubectl logs -l training-job=<name>`` finds them."""

# Frameworks and the kubeflow.org/v1 kind each compiles to.
PYTORCH = "pytorch"
TENSORFLOW = "tensorflow"
JAX = "jax"
FRAMEWORKS = (PYTORCH, TENSORFLOW, JAX)
FRAMEWORK_KINDS = {PYTORCH: "PyTorchJob", TENSORFLOW: "TFJob", JAX: "JAXJob"}

OPTIMIZERS = ("adam", "sgd", "adamw", "rmsprop")
BACKENDS = ("nccl", "gloo", "mpi")
RESTART_POLICIES = ("OnFailure", "Never", "Always", "ExitCode")
STORAGE_TYPES = ("pvc", "s3", "gcs", "nfs", "local")
LOCAL_STORAGE = ("pvc", "nfs", "local")
"""Checkpoint storage a pod reaches as a directory (a volume): the rest are object stores."""
MAX_WORKERS = 100
MAX_NAME = 54
"""Longest name: the owned job's pods are ``<name>-master-0`` / ``<name>-worker-99`` (63 at most)."""

# The seed's states, in its state machine's order.
PENDING = "Pending"
INITIALIZING = "Initializing"
RUNNING = "Running"
COMPLETED = "Completed"
FAILED = "Failed"
SUSPENDED = "Suspended"
STATES = (PENDING, INITIALIZING, RUNNING, COMPLETED, FAILED, SUSPENDED)

# Condition types (one per state the job passes, as the seed's ``conditions``).
CREATED = "Created"
"""The owned job exists."""
READY = "Ready"
"""Every worker runs."""
SUCCEEDED = "Succeeded"

# The pod env a TrainingJob's workers get (contract §5; README "TrainingJob").
ENV_MODEL = "MODEL_NAME"
ENV_DATASET = "DATASET_NAME"
HYPERPARAMETER_ENV = {
    "learningRate": "LEARNING_RATE",
    "batchSize": "BATCH_SIZE",
    "epochs": "EPOCHS",
    "optimizer": "OPTIMIZER",
    "warmupSteps": "WARMUP_STEPS",
    "gradientAccumulationSteps": "GRADIENT_ACCUMULATION_STEPS",
    "mixedPrecision": "MIXED_PRECISION",
}
ENV_HYPERPARAMETERS = "TRAINYARD_HYPERPARAMETERS"
ENV_NUM_WORKERS = "NUM_WORKERS"
ENV_GPUS_PER_WORKER = "GPUS_PER_WORKER"
ENV_BACKEND = "TRAINYARD_DIST_BACKEND"
ENV_CHECKPOINT_DIR = "TRAINYARD_CHECKPOINT_DIR"
ENV_CHECKPOINT_URI = "TRAINYARD_CHECKPOINT_URI"
ENV_CHECKPOINT_FREQUENCY = "TRAINYARD_CHECKPOINT_FREQUENCY"
ENV_CHECKPOINT_KEEP = "TRAINYARD_CHECKPOINT_KEEP"
ENV_RESUME_FROM = "TRAINYARD_RESUME_FROM"
ENV_METRICS_PORT = "TRAINYARD_METRICS_PORT"
ENV_TENSORBOARD = "TRAINYARD_TENSORBOARD"
ENV_MLFLOW = "MLFLOW_TRACKING_URI"
ENV_WANDB = "WANDB_PROJECT"

CHECKPOINT_MOUNT = "/checkpoints"
"""Where a checkpoint volume (pvc, nfs, local) is mounted in every worker."""

from trainyard.api.trainingjob.schema import crd  # noqa: E402
from trainyard.api.trainingjob.webhook import default, validate  # noqa: E402

__all__ = ["crd", "default", "validate"]
