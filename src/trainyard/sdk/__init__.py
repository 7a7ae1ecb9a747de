"""The Python SDK: ``TrainingClient`` for any cluster a kubeconfig names, and its typed errors."""

from trainyard.sdk.client import TrainingClient
from trainyard.sdk.errors import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    ConnectError,
    ForbiddenError,
    InvalidError,
    JobFailedError,
    NotFoundError,
    TrainyardError,
    UnauthorizedError,
    WaitTimeoutError,
)

__all__ = [
    "AlreadyExistsError",
    "ApiError",
    "ConflictError",
    "ConnectError",
    "ForbiddenError",
    "InvalidError",
    "JobFailedError",
    "NotFoundError",
    "TrainingClient",
    "TrainyardError",
    "UnauthorizedError",
    "WaitTimeoutError",
]
