"""Library used inside training code. Stdlib only, so it imports anywhere a replica runs.

``report()``/``checkpoint_saved()``/``log_params()`` (``reporting``) send progress, metrics and
params to whatever the environment names (the job's status, Trainer v2's status, MLflow);
``CheckpointManager`` (``checkpoints``) saves atomically on rank 0 and resumes where the operator
says; ``global_rank()``/``TrainingEnv`` (``env``) read the variables each kind injects.
"""

from trainyard.runtime.checkpoints import CheckpointManager
from trainyard.runtime.env import TrainingEnv, global_rank
from trainyard.runtime.reporting import checkpoint_saved, configure, flush, log_params, report

__all__ = [
    "CheckpointManager",
    "TrainingEnv",
    "checkpoint_saved",
    "configure",
    "flush",
    "global_rank",
    "log_params",
    "report",
]
