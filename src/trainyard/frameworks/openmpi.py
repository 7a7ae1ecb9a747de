"""Open MPI's launcher wiring, written once for the MPIJob (``frameworks.mpi``) and Trainer v2's MPI
policy (``frameworks.trainer.policies``): what the launcher's ``mpirun`` is told, the hostfile it
reads and the SSH key pair's volume that the launcher and the workers mount.

The launcher env names each setting under Open MPI 4's names (``OMPI_MCA_orte_*``, the only ones
the mpi-operator and Trainer v2 set) and under Open MPI 5's (``PRTE_MCA_*``): an Open MPI 5
``mpirun`` ignores the ``orte`` ones and would start every rank in the launcher itself (measured
with 5.0.11: the hostfile is not read). Both versions ignore the other's.

Where the two upstreams differ (the hostfile's path, the key files' modes, the volume's name),
the callers pass their own; this module knows no kind.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

HOSTFILE = "hostfile"
"""The hostfile's key in its ConfigMap and its file name where the launcher mounts it."""
SSH_PRIVATE_KEY = "ssh-privatekey"
SSH_PUBLIC_KEY = "ssh-publickey"
"""The keys of a ``kubernetes.io/ssh-auth`` Secret (the public one is ours: that type names only the private)."""
SSH_RETRIES = "-o ConnectionAttempts=10"
"""What the launcher's ``ssh`` is given: workers whose sshd is still starting are tried again."""

# The public key is also ``authorized_keys``: every pod holds the one pair, so each accepts the others.
_KEY_FILES = ((SSH_PRIVATE_KEY, "id_rsa"), (SSH_PUBLIC_KEY, "id_rsa.pub"), (SSH_PUBLIC_KEY, "authorized_keys"))


def launcher_env(*, hostfile: str, slots: int, ssh_args: str = SSH_RETRIES) -> dict[str, str]:
    """The launcher's env: the hostfile at ``hostfile``, its hosts kept by their fully qualified
    names (Open MPI would cut them to the first label, which resolves only inside the job's DNS
    search list), ``slots`` per host, ``ssh_args`` for every ``ssh`` to a worker."""
    return {
        "OMPI_MCA_orte_default_hostfile": hostfile,
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": str(slots),
        "OMPI_MCA_plm_rsh_args": ssh_args,
        "PRTE_MCA_prte_default_hostfile": hostfile,
        "PRTE_MCA_prte_keep_fqdn_hostnames": "true",
        "PRTE_MCA_plm_ssh_args": ssh_args,
    }


def hostfile(hosts: Iterable[str], slots: int) -> str:
    """An Open MPI hostfile: one ``<host> slots=<n>`` line per host, in the order given."""
    return "".join(f"{host} slots={slots}\n" for host in hosts)


def hostfile_item() -> dict[str, Any]:
    """The ConfigMap volume item that mounts the hostfile, read-only for everyone."""
    return {"key": HOSTFILE, "path": HOSTFILE, "mode": 0o444}


def ssh_volume(
    name: str, secret: str, *, default_mode: int | None = None, key_modes: tuple[int, int] | None = None
) -> dict[str, Any]:
    """The volume of the key pair's Secret ``secret``: ``id_rsa``, ``id_rsa.pub``, ``authorized_keys``.

    ``default_mode`` and ``key_modes`` (the private key's file mode, the public key's) are left
    out when None: the Secret volume's defaults apply.
    """
    items: list[dict[str, Any]] = []
    for key, path in _KEY_FILES:
        item: dict[str, Any] = {"key": key, "path": path}
        if key_modes is not None:
            item["mode"] = key_modes[0] if key == SSH_PRIVATE_KEY else key_modes[1]
        items.append(item)
    source: dict[str, Any] = {"secretName": secret, "items": items}
    if default_mode is not None:
        source["defaultMode"] = default_mode
    return {"name": name, "secret": source}
