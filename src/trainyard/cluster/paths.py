"""Where the plane keeps its state under ``$TRAINYARD_HOME``: one layout shared by every part."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

# What the plane creates under its home is its owner's alone (0700 directories, 0600 files).
PRIVATE_UMASK = 0o077
DEFAULT_PORT = 7450  # the API server's on 127.0.0.1 unless `yard up --port` says otherwise


def default_home() -> Path:
    return Path(os.environ.get("TRAINYARD_HOME") or Path.home() / ".trainyard")


class SharedHomeError(Exception):
    """The home is a directory other users share (``/tmp``), or someone else's: the plane will not live there."""


def make_private(home: Path) -> list[str]:
    """Create ``home`` mode 0700, or make an existing one and what is directly in it owner-only.

    Returns the names whose permissions were narrowed (a home left by an older trainyard, whose
    files were created world-readable). Everything deeper is out of others' reach once the home is 0700.
    """
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = home.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise SharedHomeError(f"{home} is not a directory")
    if info.st_uid != os.getuid():
        raise SharedHomeError(f"{home} belongs to uid {info.st_uid}, not to you (uid {os.getuid()})")
    if info.st_mode & stat.S_ISVTX:
        raise SharedHomeError(f"{home} is a shared directory (sticky bit set); choose a directory of your own")
    narrowed = []
    if stat.S_IMODE(info.st_mode) & 0o077:
        home.chmod(stat.S_IMODE(info.st_mode) & 0o700 | 0o700)
        narrowed.append(".")
    for entry in home.iterdir():
        st = entry.lstat()
        if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid() or not stat.S_IMODE(st.st_mode) & 0o077:
            continue
        entry.chmod(stat.S_IMODE(st.st_mode) & 0o700)
        narrowed.append(entry.name)
    return narrowed


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
    def environments_file(self) -> Path:
        """Image → local Python environment (``cluster.environments``), written by ``yard env``."""
        return self.home / "environments.yaml"

    @property
    def environments_dir(self) -> Path:
        """Where ``yard env create`` puts an environment unless told a path."""
        return self.home / "envs"

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
        """How ``yard up`` last served: ``{"secure": true}``, or plain http with ``"insecureOptIn": true``."""
        return self.home / "yard.json"

    @property
    def pki(self) -> Path:
        """Secure mode's CA, server certificate and bearer token (see ``apiserver.auth``)."""
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
        """The state file of a container's current run, kept by its shim (``node.runtime.shim``)."""
        return self.pod_dir(namespace, name, uid) / "state" / f"{container}.json"
