"""The ``kubeflow.org`` group: Training Operator v1's job kinds, one module each, as upstream groups them.

Kubeflow Trainer v2's ``trainer.kubeflow.org`` kinds will live beside it, in ``api/trainer/``.
"""
