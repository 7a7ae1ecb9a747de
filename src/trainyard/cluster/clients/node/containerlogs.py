"""The kubelet's container log rotation settings: ``containerLogMaxSize`` and ``containerLogMaxFiles``.

``yard up --container-log-max-size QTY --container-log-max-files N`` sets them, through
``$TRAINYARD_CONTAINER_LOG_MAX_SIZE`` and ``$TRAINYARD_CONTAINER_LOG_MAX_FILES`` (which the plane
reads, so a script or test may set those instead); without either the kubelet's defaults hold,
10Mi and 5. Each container's shim rotates its log by them (``cluster.logs.LogWriter``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from trainyard.api.quantity import parse_quantity
from trainyard.cluster import logs

SIZE_ENV = "TRAINYARD_CONTAINER_LOG_MAX_SIZE"
FILES_ENV = "TRAINYARD_CONTAINER_LOG_MAX_FILES"
# Each setting named as the kubelet names it, with where it is set here (as kubelet's messages do).
_SIZE = f"containerLogMaxSize (yard up --container-log-max-size, ${SIZE_ENV})"
_FILES = f"containerLogMaxFiles (yard up --container-log-max-files, ${FILES_ENV})"


@dataclass(frozen=True)
class LogRotation:
    max_size: int = logs.DEFAULT_MAX_SIZE  # bytes
    max_files: int = logs.DEFAULT_MAX_FILES  # the current file and the rotated ones kept

    def __post_init__(self) -> None:
        if self.max_size <= 0:
            raise ValueError(f"{_SIZE} must be a positive number of bytes (e.g. 10Mi), not {self.max_size}")
        if self.max_files < 2:
            raise ValueError(f"{_FILES} must be greater than 1, not {self.max_files}")


def parse(size: str | None, files: str | None) -> LogRotation:
    """The settings from their text (None or "": the default); ValueError names the one that is wrong."""
    defaults = LogRotation()
    try:
        max_size = int(parse_quantity(size)) if size else defaults.max_size
    except ValueError:
        raise ValueError(f"{_SIZE} must be a quantity of bytes (e.g. 10Mi), not {size!r}") from None
    try:
        max_files = int(files) if files else defaults.max_files
    except ValueError:
        raise ValueError(f"{_FILES} must be a whole number, not {files!r}") from None
    return LogRotation(max_size, max_files)


def from_env(environ: Mapping[str, str] | None = None) -> LogRotation:
    env = os.environ if environ is None else environ
    return parse(env.get(SIZE_ENV), env.get(FILES_ENV))
