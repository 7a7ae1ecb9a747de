"""trainyard: Kubeflow-compatible training jobs on one machine or a real cluster."""
