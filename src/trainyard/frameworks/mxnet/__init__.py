"""MXJob's framework plugin."""

from trainyard.frameworks.mxnet.plugin import MXNet

__all__ = ["MXNet"]
