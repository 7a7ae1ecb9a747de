"""TrainingJob (seed 004) compiled to an owned ``kubeflow.org/v1`` job: ``build`` is pure."""

from trainyard.frameworks.trainingjob.build import STANDIN_COMMAND, STANDIN_IMAGE, build, job_kind, worker_env

__all__ = ["STANDIN_COMMAND", "STANDIN_IMAGE", "build", "job_kind", "worker_env"]
