"""PyTorchJob's framework plugin: torchrun wiring and success rules (``plugin``), its operator flags (``flags``)."""

from trainyard.frameworks.pytorch.plugin import PyTorch

__all__ = ["PyTorch"]
