"""Kind → plugin: the only place that knows which plugin handles which kind."""

from __future__ import annotations

from trainyard.frameworks.base import Framework
from trainyard.frameworks.pytorch.plugin import PyTorch

_PLUGINS: dict[str, Framework] = {plugin.info.kind: plugin for plugin in (PyTorch(),)}


def plugin_for(kind: str) -> Framework:
    try:
        return _PLUGINS[kind]
    except KeyError:
        raise LookupError(f"no framework plugin for kind {kind!r}; known: {sorted(_PLUGINS)}") from None


def kinds() -> tuple[str, ...]:
    return tuple(_PLUGINS)
