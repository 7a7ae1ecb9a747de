"""The Python SDK: ``TrainingClient`` for any cluster a kubeconfig names."""

from trainyard.sdk.client import JobFailedError, TrainingClient

__all__ = ["JobFailedError", "TrainingClient"]
