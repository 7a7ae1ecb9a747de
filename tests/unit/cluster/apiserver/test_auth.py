"""Secure mode's credentials: made once, reused, and reissued only where they no longer fit."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

from cryptography import x509

from trainyard.cluster.paths import Layout
from trainyard.cluster.server.apiserver.auth import ensure, write_private


def sans(path: Path) -> list[str]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(n.value) for n in names]


def test_first_start_creates_a_ca_a_server_certificate_and_a_token(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    creds = ensure(layout, "127.0.0.1")
    assert creds.ca_pem == layout.ca_cert.read_bytes()
    assert creds.token == layout.token_file.read_text().strip()
    assert sans(layout.server_cert) == ["127.0.0.1", "localhost"]
    server = x509.load_pem_x509_certificate(layout.server_cert.read_bytes())
    server.verify_directly_issued_by(x509.load_pem_x509_certificate(creds.ca_pem))
    for private in (layout.ca_key, layout.server_key, layout.token_file):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private
    creds.server_context()  # the key matches the certificate, or ssl refuses to load them


def test_restart_reuses_everything(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    first = ensure(layout, "127.0.0.1")
    files = {p: p.read_bytes() for p in layout.pki.iterdir()}
    assert ensure(layout, "127.0.0.1") == first
    assert {p: p.read_bytes() for p in layout.pki.iterdir()} == files


def test_a_new_bind_address_reissues_only_the_server_certificate(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    first = ensure(layout, "127.0.0.1")
    second = ensure(layout, "192.0.2.7")
    assert second.ca_pem == first.ca_pem and second.token == first.token
    assert sans(layout.server_cert) == ["127.0.0.1", "localhost", "192.0.2.7"]
    cert = x509.load_pem_x509_certificate(layout.server_cert.read_bytes())
    ips = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address("192.0.2.7") in ips


def test_a_damaged_or_foreign_server_certificate_is_replaced(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    ensure(layout, "127.0.0.1")
    layout.server_cert.write_text("not a certificate")
    ensure(layout, "127.0.0.1").server_context()

    other = Layout(tmp_path / "other")
    ensure(other, "127.0.0.1")
    layout.server_cert.write_bytes(other.server_cert.read_bytes())
    layout.server_key.write_bytes(other.server_key.read_bytes())
    creds = ensure(layout, "127.0.0.1")
    cert = x509.load_pem_x509_certificate(layout.server_cert.read_bytes())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(creds.ca_pem))


def test_deleting_the_token_rotates_it_and_deleting_pki_rotates_all(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    first = ensure(layout, "127.0.0.1")
    layout.token_file.unlink()
    second = ensure(layout, "127.0.0.1")
    assert second.token != first.token and second.ca_pem == first.ca_pem
    for path in layout.pki.iterdir():
        path.unlink()
    third = ensure(layout, "127.0.0.1")
    assert third.token != second.token and third.ca_pem != second.ca_pem


def test_write_private_narrows_a_wider_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "kubeconfig"
    target.write_text("old")
    target.chmod(0o644)
    write_private(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["kubeconfig"]
