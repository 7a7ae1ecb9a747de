"""JAXJob's framework plugin."""

from trainyard.frameworks.jax.plugin import JAX

__all__ = ["JAX"]
