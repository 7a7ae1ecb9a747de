"""Kubeflow Trainer v2's runtime plugins: how a TrainJob and its runtime become one JobSet."""
