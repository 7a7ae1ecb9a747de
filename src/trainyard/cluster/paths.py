"""Where the plane keeps its state under ``$TRAINYARD_HOME``: one layout shared by every part."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def default_home() -> Path:
    return Path(os.environ.get("TRAINYARD_HOME") or Path.home() / ".trainyard")


@dataclass(frozen=True)
class Layout:
    home: Path

    @property
    def database(self) -> Path:
        return self.home / "store.db"

    @property
    def kubeconfig(self) -> Path:
        return self.home / "kubeconfig"

    @property
    def pid_file(self) -> Path:
        return self.home / "yard.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "yard.log"

    @property
    def state_file(self) -> Path:
        """What the running plane serves (URL, pid), for ``yard status``."""
        return self.home / "plane.json"

    def pod_dir(self, namespace: str, name: str, uid: str) -> Path:
        return self.home / "pods" / f"{namespace}_{name}_{uid}"

    def container_log(self, namespace: str, name: str, uid: str, container: str, *, previous: bool = False) -> Path:
        suffix = ".previous.log" if previous else ".log"
        return self.pod_dir(namespace, name, uid) / "logs" / f"{container}{suffix}"
