"""TFJob's framework plugin."""

from trainyard.frameworks.tensorflow.plugin import TensorFlow

__all__ = ["TensorFlow"]
