"""trainyard: Kubeflow-compatible training jobs on one machine or a real cluster."""

from typing import Any

__all__ = ["TrainingClient"]


def __getattr__(name: str) -> Any:
    # Lazy: the pure layers and the in-pod runtime import this package without pulling in the SDK's client.
    if name == "TrainingClient":
        from trainyard.sdk.client import TrainingClient

        return TrainingClient
    raise AttributeError(f"module 'trainyard' has no attribute {name!r}")
