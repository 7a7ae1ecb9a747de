"""Library used inside training code. Stdlib only, so it imports anywhere a replica runs."""

from trainyard.runtime.env import TrainingEnv

__all__ = ["TrainingEnv"]
