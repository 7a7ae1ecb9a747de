"""Secure mode (the default of ``yard up``): the plane's CA, server certificate and bearer token, and the check.

On first start a self-signed CA, a server certificate it signs and a random bearer token are
written under ``$TRAINYARD_HOME/pki``; later starts reuse them, so kubeconfigs handed out earlier
keep working. Only the server certificate is reissued (by the same CA) when it no longer covers
the served address or is near its end. Deleting ``pki/token`` rotates the token, deleting ``pki/``
rotates everything. Keys and the token are created mode 0600 from their first byte.

The check mirrors kube-apiserver with anonymous access limited to the health and version
endpoints (the ``system:public-info-viewer`` paths): a request without credentials reaches only
those, a request with a wrong token reaches nothing, and both get a 401 ``Status``.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from trainyard.cluster.paths import Layout
from trainyard.cluster.server.apiserver import errors

log = logging.getLogger(__name__)

ANONYMOUS_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version"})
CA_DAYS = 3650
SERVER_DAYS = 365
# A restart this close to the server certificate's end reissues it, so a long-lived plane is not cut off.
RENEW_BEFORE = timedelta(days=30)


@dataclass(frozen=True)
class Credentials:
    ca_pem: bytes
    cert_file: Path
    key_file: Path
    token: str

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        return context


def write_private(path: Path, data: bytes) -> None:
    """Write ``path`` so that it is never readable by others, not even for a moment, and never half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    # rename keeps the new file's mode; truncating an older, wider file in place would not
    tmp.replace(path)


def ensure(layout: Layout, host: str) -> Credentials:
    """Load this home's credentials, creating whatever is missing; the certificate covers ``host``."""
    layout.pki.mkdir(mode=0o700, parents=True, exist_ok=True)
    layout.pki.chmod(0o700)
    ca, ca_key = _load_ca(layout)
    if ca is None or ca_key is None:
        log.info("secure mode: creating a CA in %s", layout.pki)
        ca, ca_key = _new_ca()
        write_private(layout.ca_key, _key_pem(ca_key))
        write_private(layout.ca_cert, ca.public_bytes(serialization.Encoding.PEM))
        with contextlib.suppress(FileNotFoundError):
            layout.server_cert.unlink()
    if not _server_cert_fits(layout, ca, host):
        log.info("secure mode: issuing a server certificate for %s", ", ".join(_names(host)))
        key = ec.generate_private_key(ec.SECP256R1())
        write_private(layout.server_key, _key_pem(key))
        write_private(layout.server_cert, _issue(ca, ca_key, key, host).public_bytes(serialization.Encoding.PEM))
    try:
        token = layout.token_file.read_text().strip()
    except FileNotFoundError:
        token = ""
    if not token:
        log.info("secure mode: creating a bearer token in %s", layout.token_file)
        token = secrets.token_urlsafe(32)
        write_private(layout.token_file, token.encode() + b"\n")
    return Credentials(layout.ca_cert.read_bytes(), layout.server_cert, layout.server_key, token)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _load_ca(layout: Layout) -> tuple[x509.Certificate | None, ec.EllipticCurvePrivateKey | None]:
    try:
        ca = x509.load_pem_x509_certificate(layout.ca_cert.read_bytes())
        key = serialization.load_pem_private_key(layout.ca_key.read_bytes(), password=None)
    except (FileNotFoundError, ValueError):
        return None, None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != ca.public_key():
        return None, None
    if ca.not_valid_after_utc - RENEW_BEFORE < datetime.now(UTC):
        return None, None
    return ca, key


def _names(host: str) -> list[str]:
    return list(dict.fromkeys(["127.0.0.1", "localhost", host]))


def _alt_names(host: str) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for name in _names(host):
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            out.append(x509.DNSName(name))
    return out


def _server_cert_fits(layout: Layout, ca: x509.Certificate, host: str) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(layout.server_cert.read_bytes())
        key = serialization.load_pem_private_key(layout.server_key.read_bytes(), password=None)
        cert.verify_directly_issued_by(ca)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (FileNotFoundError, ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return False
    if key.public_key() != cert.public_key():
        return False
    if cert.not_valid_after_utc - RENEW_BEFORE < datetime.now(UTC):
        return False
    return all(name in sans for name in _alt_names(host))


def _new_ca() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    # a per-home serial in the name: two homes' CAs never look like the same issuer to a client
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"trainyard-ca@{secrets.token_hex(4)}")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _issue(
    ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, key: ec.EllipticCurvePrivateKey, host: str
) -> x509.Certificate:
    now = datetime.now(UTC)
    ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trainyard-apiserver")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(min(now + timedelta(days=SERVER_DAYS), ca.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(_alt_names(host)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


# -- the check ---------------------------------------------------------------------------------


def unauthorized() -> web.Response:
    # ``application/json`` without a charset, as every other Status: lightkube, for one, only reads a
    # Status from a response whose Content-Type is exactly that (else the caller gets a bare HTTP error).
    status = errors.ApiError(401, "Unauthorized", "Unauthorized").status()
    return web.Response(body=json.dumps(status).encode(), status=401, content_type="application/json")


def admits(header: str | None, path: str, expected: bytes) -> bool:
    """Whether a request with this ``Authorization`` header may reach ``path``, as kube-apiserver's
    bearer-token authenticator decides: the scheme is case-insensitive, the token exact."""
    if header is None:
        return (path.rstrip("/") or "/") in ANONYMOUS_PATHS
    scheme, _, given = header.strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(errors="replace"), expected)


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in prefixes)


def bearer_middleware(token: str, *, own_auth: tuple[str, ...] = ()) -> Middleware:
    """An aiohttp middleware that lets a request through only with ``Authorization: Bearer <token>``,
    but for the paths under ``own_auth``'s prefixes, whose applications authenticate their own."""
    expected = token.encode()

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if own_auth and _under(request.path, own_auth):
            return await handler(request)
        if not admits(request.headers.get("Authorization"), request.path, expected):
            return unauthorized()
        return await handler(request)

    return authenticate
