"""Framework callback classes built on first use, so importing ``trainyard.runtime`` imports no framework."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def class_getattr(module: str, base: str, build: Callable[[type], type], owner: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving ``ProgressCallback``: ``build(<module>.<base>)``, made once."""
    built: dict[str, type] = {}

    def __getattr__(name: str) -> Any:
        if name != "ProgressCallback":
            raise AttributeError(f"module {owner!r} has no attribute {name!r}")
        if name not in built:
            found: Any = importlib.import_module(module)
            for part in base.split("."):
                found = getattr(found, part)
            built[name] = build(found)
        return built[name]

    return __getattr__
