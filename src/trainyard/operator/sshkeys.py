"""SSH key pairs for the jobs that need them (an MPIJob's launcher and workers), as the mpi-operator makes them.

An ECDSA P-521 key: the private key PEM-encoded as ``EC PRIVATE KEY`` (SEC 1), the public key in
``authorized_keys`` form. The reconciler asks for one through ``Observed.key_pairs`` only when a
job's Secret does not exist yet.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


def key_pair() -> tuple[str, str]:
    """(private key PEM, public key line ending in a newline)."""
    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private.decode(), public.decode() + "\n"
