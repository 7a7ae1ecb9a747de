"""The embedded single-machine control plane: API server, store, garbage collector, node agent."""
