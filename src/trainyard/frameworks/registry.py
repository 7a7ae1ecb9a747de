"""Kind → plugin: the only place that knows which plugin handles which kind.

Each kind of ``api.kinds.KINDS`` has one plugin here; its optional capabilities
(``capabilities``) are found here too, so callers never ask a kind what it is.
"""

from __future__ import annotations

from trainyard.frameworks.base import Framework
from trainyard.frameworks.capabilities import FunctionJobs, OperatorFlags
from trainyard.frameworks.jax import JAX
from trainyard.frameworks.mpi import MPI
from trainyard.frameworks.mxnet import MXNet
from trainyard.frameworks.paddle import Paddle
from trainyard.frameworks.pytorch import PyTorch
from trainyard.frameworks.tensorflow import TensorFlow
from trainyard.frameworks.xgboost import XGBoost

PLUGINS: dict[str, Framework] = {
    plugin.info.kind: plugin for plugin in (PyTorch(), TensorFlow(), XGBoost(), Paddle(), JAX(), MXNet(), MPI())
}


def plugin_for(kind: str) -> Framework:
    try:
        return PLUGINS[kind]
    except KeyError:
        raise LookupError(f"no framework plugin for kind {kind!r}; known: {sorted(PLUGINS)}") from None


def kinds() -> tuple[str, ...]:
    return tuple(PLUGINS)


def operator_flags() -> list[OperatorFlags]:
    """The plugins that add flags to the operator's command line, in registration order."""
    return [plugin for plugin in PLUGINS.values() if isinstance(plugin, OperatorFlags)]


def function_jobs(kind: str) -> FunctionJobs | None:
    """The kind's plugin if it can run a Python function as a job, else None."""
    plugin = PLUGINS.get(kind)
    return plugin if isinstance(plugin, FunctionJobs) else None
