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

    @property
    def settings_file(self) -> Path:
        """How ``yard up`` was last asked to serve (secure or not), so a plain ``yard up`` keeps it."""
        return self.home / "yard.json"

    @property
    def pki(self) -> Path:
        """Secure mode's CA, server certificate and bearer token (see ``cluster.auth``)."""
        return self.home / "pki"

    @property
    def ca_cert(self) -> Path:
        return self.pki / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.pki / "ca.key"

    @property
    def server_cert(self) -> Path:
        return self.pki / "server.crt"

    @property
    def server_key(self) -> Path:
        return self.pki / "server.key"

    @property
    def token_file(self) -> Path:
        return self.pki / "token"

    @property
    def storage(self) -> Path:
        """The local-path provisioner's root: one directory per provisioned PersistentVolume."""
        return self.home / "storage"

    def pod_dir(self, namespace: str, name: str, uid: str) -> Path:
        return self.home / "pods" / f"{namespace}_{name}_{uid}"

    def container_log(self, namespace: str, name: str, uid: str, container: str, *, previous: bool = False) -> Path:
        suffix = ".previous.log" if previous else ".log"
        return self.pod_dir(namespace, name, uid) / "logs" / f"{container}{suffix}"

    def container_state(self, namespace: str, name: str, uid: str, container: str) -> Path:
        """The state file of a container's current run, kept by its shim (``cluster.shim``)."""
        return self.pod_dir(namespace, name, uid) / "state" / f"{container}.json"
