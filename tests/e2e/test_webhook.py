"""The validating webhook over real HTTPS, as a kube-apiserver would call it.

``python -m trainyard.operator.webhook`` runs as its own process with a CA-signed certificate
generated here; requests go through the stdlib's TLS client trusting only that CA. A rotated
certificate is served without a restart; missing TLS files stop the process with a clear message.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from conftest import REPO, eventually

pytestmark = pytest.mark.e2e

PATH = "/validate-kubeflow-org-v1-pytorchjob"


@dataclass
class Authority:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def new(cls) -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webhook-test-ca")])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, directory: Path, serial: int) -> None:
        """Write ``tls.crt``/``tls.key`` for 127.0.0.1 and the in-cluster Service name."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "training-operator.kubeflow.svc")]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(serial)
            .not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("training-operator.kubeflow.svc"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        # Key first, then certificate: the order a Secret volume update may be seen in.
        (directory / "tls.key").write_bytes(key_pem)
        (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


@dataclass
class Webhook:
    process: subprocess.Popen[str]
    port: int
    client: ssl.SSLContext
    cert_dir: Path

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"https://127.0.0.1:{self.port}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, context=self.client, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def serial(self) -> int:
        with (
            socket.create_connection(("127.0.0.1", self.port), timeout=30) as raw,
            self.client.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number


def start(cert_dir: Path, *flags: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainyard.operator.webhook",
            "--webhook-server-port",
            "0",
            "--webhook-bind-address",
            "127.0.0.1",
            "--webhook-cert-dir",
            str(cert_dir),
            *flags,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    return process, process.stdout.readline()


@pytest.fixture(scope="module")
def authority() -> Authority:
    return Authority.new()


@pytest.fixture(scope="module")
def webhook(authority: Authority, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    cert_dir = tmp_path_factory.mktemp("serving-certs")
    authority.issue(cert_dir, serial=1001)
    process, line = start(cert_dir, "--webhook-cert-reload-seconds", "0.2")
    try:
        assert line.startswith("webhook listening on 127.0.0.1:"), line + (
            process.stderr.read() if process.stderr else ""
        )
        client = ssl.create_default_context(cadata=authority.pem().decode())
        yield Webhook(process, int(line.rsplit(":", 1)[1]), client, cert_dir)
    finally:
        process.terminate()
        process.wait(timeout=30)


def job(master_replicas: int = 1, **run_policy: Any) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "python:3.11"}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "mnist", "namespace": "team-a", "uid": "7e4f"},
        "spec": {
            "runPolicy": run_policy,
            "pytorchReplicaSpecs": {
                "Master": {"replicas": master_replicas, "template": {"spec": {"containers": [container]}}},
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}},
            },
        },
    }


def admission(operation: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "b9f2c1d0-0000-4000-8000-000000000001",
            "kind": {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"},
            "resource": {"group": "kubeflow.org", "version": "v1", "resource": "pytorchjobs"},
            "operation": operation,
            "name": "mnist",
            "namespace": "team-a",
            "object": obj,
            "oldObject": old,
        },
    }


def test_valid_job_is_allowed(webhook: Webhook) -> None:
    code, body = webhook.post(PATH, admission("CREATE", job()))

    assert code == 200
    assert body["response"] == {"uid": "b9f2c1d0-0000-4000-8000-000000000001", "allowed": True}


def test_invalid_job_is_denied_with_a_422_status_and_field_paths(webhook: Webhook) -> None:
    code, body = webhook.post(PATH, admission("CREATE", job(master_replicas=3, managedBy="someone")))

    assert code == 200
    response = body["response"]
    assert response["allowed"] is False
    status = response["status"]
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert {c["field"] for c in status["details"]["causes"]} == {
        "spec.pytorchReplicaSpecs.Master.replicas",
        "spec.runPolicy.managedBy",
    }
    assert status["message"].startswith('PyTorchJob.kubeflow.org "mnist" is invalid: [')


def test_managed_by_change_is_denied_on_update(webhook: Webhook) -> None:
    old = job(managedBy="kueue.x-k8s.io/multikueue")

    code, body = webhook.post(PATH, admission("UPDATE", job(managedBy="kubeflow.org/training-operator"), old))

    assert code == 200 and body["response"]["allowed"] is False
    (cause,) = body["response"]["status"]["details"]["causes"]
    assert cause["field"] == "spec.runPolicy.managedBy"
    assert cause["message"] == 'Invalid value: "kubeflow.org/training-operator": field is immutable'


def test_deprecated_field_is_allowed_with_a_warning(webhook: Webhook) -> None:
    body = job()
    body["spec"]["elasticPolicy"] = {"nProcPerNode": 4}

    code, out = webhook.post(PATH, admission("CREATE", body))

    assert code == 200 and out["response"]["allowed"] is True
    assert out["response"]["warnings"] == [
        "spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"
    ]


def test_unknown_path_is_404(webhook: Webhook) -> None:
    code, _ = webhook.post("/validate-kubeflow-org-v1-nosuchjob", admission("CREATE", job()))

    assert code == 404


def test_plain_http_gets_no_answer(webhook: Webhook) -> None:
    request = urllib.request.Request(f"http://127.0.0.1:{webhook.port}{PATH}", data=b"{}", method="POST")
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(request, timeout=30)


def test_untrusted_client_cannot_connect(webhook: Webhook) -> None:
    stranger = ssl.create_default_context(cadata=Authority.new().pem().decode())
    with (
        pytest.raises(ssl.SSLCertVerificationError),
        socket.create_connection(("127.0.0.1", webhook.port), timeout=30) as raw,
    ):
        stranger.wrap_socket(raw, server_hostname="127.0.0.1")


def test_rotated_certificate_is_served_without_a_restart(webhook: Webhook, authority: Authority) -> None:
    assert webhook.serial() == 1001

    authority.issue(webhook.cert_dir, serial=2002)

    eventually(lambda: webhook.serial() == 2002, timeout=60, what="the rotated certificate to be served")
    code, body = webhook.post(PATH, admission("CREATE", job()))
    assert code == 200 and body["response"]["allowed"] is True
    assert webhook.process.poll() is None


def test_missing_certificates_stop_the_process_with_the_reason(tmp_path: Path) -> None:
    process, line = start(tmp_path / "nowhere")
    _, err = process.communicate(timeout=60)

    assert process.returncode == 1 and line == ""
    assert f"webhook TLS material not found: {tmp_path / 'nowhere' / 'tls.crt'}" in err
    assert "--webhook-cert-dir" in err
