"""Library used inside training code. Stdlib only, so it imports anywhere a replica runs."""

from trainyard.runtime.checkpoints import CheckpointManager
from trainyard.runtime.env import TrainingEnv, global_rank
from trainyard.runtime.reporting import checkpoint_saved, configure, flush, report

__all__ = ["CheckpointManager", "TrainingEnv", "checkpoint_saved", "configure", "flush", "global_rank", "report"]
