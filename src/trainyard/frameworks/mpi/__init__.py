"""MPIJob's framework plugin."""

from trainyard.frameworks.mpi.plugin import MPI

__all__ = ["MPI"]
