"""``yard up`` is secure by default: HTTPS with the plane's own CA and a bearer token, driven by real clients.

A real plane runs in a temporary home; kubectl, the ``yard`` CLI (through the SDK) and raw
``urllib`` requests talk to it. The plane's own operator and node agent must get through the
same check, which the job that runs to completion proves. Another local user (a real one, made
with ``useradd`` when the tests run as root) gets 401 and can read nothing under the home.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import Kubectl, Plane, eventually, free_port, start_plane

pytestmark = pytest.mark.e2e

JOB = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: secure-ok
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: pytorch
              image: python:3.11
              command: ["python3", "-c", "print('ok')"]
"""


@pytest.fixture(scope="module")
def secure_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    plane = start_plane(tmp_path_factory.mktemp("secure-home"), secure=True)
    try:
        yield plane
    finally:
        plane.down()


@pytest.fixture(scope="module")
def kube_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("secure-kube-cache")


@pytest.fixture(scope="module")
def skubectl(secure_plane: Plane, kube_cache: Path) -> Kubectl:
    return Kubectl(secure_plane, kube_cache)


def pki(plane: Plane) -> Path:
    return plane.home / "pki"


def token_of(plane: Plane) -> str:
    return (pki(plane) / "token").read_text().strip()


def request(
    plane: Plane, path: str, *, token: str | None = None, scheme: str = "Bearer", host: str = "127.0.0.1"
) -> tuple[int, str, Any]:
    """(status, content type, body) of a GET that trusts only the plane's CA."""
    context = ssl.create_default_context(cafile=pki(plane) / "ca.crt")
    req = urllib.request.Request(f"https://{host}:{plane.port}{path}")
    if token is not None:
        req.add_header("Authorization", f"{scheme} {token}")
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as response:
            body = response.read()
            return response.status, response.headers.get("Content-Type", ""), body
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_kubeconfig_and_private_files_are_0600_and_carry_ca_and_token(secure_plane: Plane) -> None:
    config = yaml.safe_load(secure_plane.kubeconfig.read_text())
    assert mode(secure_plane.kubeconfig) == 0o600
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == f"https://127.0.0.1:{secure_plane.port}"
    ca = base64.b64decode(cluster["certificate-authority-data"])
    assert ca.startswith(b"-----BEGIN CERTIFICATE-----")
    assert ca == (pki(secure_plane) / "ca.crt").read_bytes()
    token = config["users"][0]["user"]["token"]
    assert len(token) >= 32 and token == token_of(secure_plane)

    assert mode(pki(secure_plane)) == 0o700
    for private in ("ca.key", "server.key", "token"):
        assert mode(pki(secure_plane) / private) == 0o600, private
    state = json.loads((secure_plane.home / "plane.json").read_text())
    assert state["url"] == secure_plane.url and state["secure"] is True


def test_server_certificate_covers_loopback_ip_and_localhost(secure_plane: Plane) -> None:
    for host in ("127.0.0.1", "localhost"):
        code, _, body = request(secure_plane, "/version", host=host)
        assert code == 200 and json.loads(body)["major"] == "1", host


def test_kubectl_and_yard_run_a_job_over_tls(secure_plane: Plane, skubectl: Kubectl) -> None:
    skubectl("get", "pods")
    assert "pytorchjob.kubeflow.org/secure-ok created" in skubectl("apply", "-f", "-", input=JOB)

    def state() -> str:
        return skubectl("get", "pytorchjob", "secure-ok", "-o", "jsonpath={.status.conditions[-1:].type}")

    final = eventually(lambda: state() in ("Succeeded", "Failed") and state(), timeout=180, what="the job to end")
    assert final == "Succeeded", skubectl("describe", "pytorchjob", "secure-ok")
    assert skubectl("logs", "secure-ok-master-0") == "ok\n"

    listing = secure_plane.yard("get", "pytorchjobs").stdout
    assert any(line.split()[:2] == ["secure-ok", "Succeeded"] for line in listing.splitlines()), listing
    assert secure_plane.yard("logs", "secure-ok-master-0").stdout == "ok\n"
    assert "API server   https://" in secure_plane.yard("status").stdout

    assert 'pytorchjob.kubeflow.org "secure-ok" deleted' in skubectl("delete", "pytorchjob", "secure-ok")
    eventually(
        lambda: not skubectl.json("get", "pods", "-l", "training.kubeflow.org/job-name=secure-ok")["items"],
        timeout=60,
        what="the job's pods to be collected",
    )


def assert_unauthorized(reply: tuple[int, str, Any]) -> None:
    code, content_type, body = reply
    assert code == 401, (code, body)
    assert content_type.startswith("application/json")
    assert json.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_requests_without_the_right_token_get_401_status(secure_plane: Plane) -> None:
    pods = "/api/v1/namespaces/default/pods"
    assert_unauthorized(request(secure_plane, pods))
    assert_unauthorized(request(secure_plane, f"{pods}?watch=true&timeoutSeconds=1"))
    assert_unauthorized(request(secure_plane, pods, token="not-" + token_of(secure_plane)))
    assert_unauthorized(request(secure_plane, pods, token=""))
    assert_unauthorized(request(secure_plane, pods, token=token_of(secure_plane), scheme="Basic"))
    assert request(secure_plane, pods, token=token_of(secure_plane))[0] == 200
    # the scheme is case-insensitive, as kube-apiserver's bearer-token authenticator has it
    assert request(secure_plane, pods, token=token_of(secure_plane), scheme="bearer")[0] == 200

    # system:public-info-viewer: health and version are readable anonymously ...
    for path in ("/healthz", "/livez", "/readyz", "/version", "/version/"):
        assert request(secure_plane, path)[0] == 200, path
    # ... but a presented credential that is wrong is refused everywhere
    assert_unauthorized(request(secure_plane, "/healthz", token="wrong"))
    assert_unauthorized(request(secure_plane, "/api"))
    assert_unauthorized(request(secure_plane, "/openapi/v3"))


def test_kubectl_with_a_wrong_token_must_log_in(secure_plane: Plane, kube_cache: Path, tmp_path: Path) -> None:
    config = yaml.safe_load(secure_plane.kubeconfig.read_text())
    config["users"][0]["user"]["token"] = "stale-token"
    stale = tmp_path / "stale-kubeconfig"
    stale.write_text(yaml.safe_dump(config))
    good = Kubectl(secure_plane, kube_cache)
    good("get", "pods")  # a warm discovery cache, as a user whose token was rotated has
    bad = Kubectl(secure_plane, kube_cache)
    bad.env["KUBECONFIG"] = str(stale)
    result = bad.run("get", "pods")
    assert result.returncode == 1
    assert "error: You must be logged in to the server (Unauthorized)" in result.stderr


def test_plain_http_to_the_tls_port_fails(secure_plane: Plane) -> None:
    with pytest.raises((OSError, http.client.HTTPException)):
        urllib.request.urlopen(f"http://127.0.0.1:{secure_plane.port}/version", timeout=30).close()
    with pytest.raises(urllib.error.URLError) as refused:
        urllib.request.urlopen(f"https://127.0.0.1:{secure_plane.port}/version", timeout=30).close()
    # the system trust store does not vouch for the plane's own CA
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError), refused.value


def _listeners(port: int) -> list[str]:
    """Local addresses (hex, as the kernel prints them) of TCP sockets listening on ``port``."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, _, hex_port = fields[1].rpartition(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:
                out.append(address)
    return out


def _other_addresses() -> list[str]:
    """This machine's own IPv4 addresses outside 127.0.0.0/8, from the kernel's routing tables."""
    found: list[str] = []
    last = ""
    for line in Path("/proc/net/fib_trie").read_text().splitlines():
        text = line.strip()
        if text.startswith("|--"):
            last = text.split()[1]
        elif text == "/32 host LOCAL" and not last.startswith("127.") and last not in found:
            found.append(last)
    return found


@pytest.mark.parametrize("which", ["secure_plane", "insecure_plane"])
def test_the_api_server_listens_on_loopback_only(which: str, request: pytest.FixtureRequest) -> None:
    served: Plane = request.getfixturevalue(which)
    assert _listeners(served.port) == ["0100007F"], "one listener, on 127.0.0.1"
    for address in _other_addresses():
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((address, served.port), timeout=10).close()


def test_restarts_keep_secure_mode_and_credentials_until_they_are_deleted(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    plane = start_plane(tmp_path_factory.mktemp("secure-restart-home"), secure=True)
    cache = tmp_path_factory.mktemp("secure-restart-cache")
    try:
        first_token, first_ca = token_of(plane), (pki(plane) / "ca.crt").read_bytes()
        kept = plane.home.parent / f"{plane.home.name}-kubeconfig"
        kept.write_bytes(plane.kubeconfig.read_bytes())
        old = Kubectl(plane, cache)
        old.env["KUBECONFIG"] = str(kept)

        # a plain `yard up` on a secure home stays secure, with the same CA and token
        plane.down()
        plane.yard("up", "--port", str(plane.port))
        assert token_of(plane) == first_token and (pki(plane) / "ca.crt").read_bytes() == first_ca
        assert "default" in old("get", "namespaces")

        # deleting the token rotates it: the old kubeconfig is refused, the new one works
        plane.down()
        (pki(plane) / "token").unlink()
        plane.yard("up", "--port", str(plane.port))
        assert token_of(plane) != first_token and (pki(plane) / "ca.crt").read_bytes() == first_ca
        assert mode(pki(plane) / "token") == 0o600
        assert "(Unauthorized)" in old.run("get", "--raw", "/api/v1/namespaces").stderr
        assert "default" in Kubectl(plane, cache)("get", "namespaces")

        # switching needs an explicit flag, and a running plane is not switched behind the user's back
        switch = plane.yard("up", "--insecure", "--port", str(plane.port), check=False)
        assert switch.returncode == 1 and "yard down" in switch.stderr
        plane.down()
        started = plane.yard("up", "--no-secure", "--port", str(plane.port))  # --insecure's old name
        assert "WARNING: `--insecure`" in started.stderr
        config = yaml.safe_load(plane.kubeconfig.read_text())
        assert config["clusters"][0]["cluster"] == {"server": f"http://127.0.0.1:{plane.port}"}
        assert config["users"][0]["user"] == {}
        assert mode(plane.kubeconfig) == 0o600, "every kubeconfig the plane writes is private"
        with urllib.request.urlopen(f"http://127.0.0.1:{plane.port}/api/v1/namespaces", timeout=30) as response:
            assert response.status == 200
    finally:
        plane.down()


def test_official_python_client_uses_the_kubeconfig_unchanged(secure_plane: Plane, tmp_path: Path) -> None:
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    api = client.CoreV1Api(config.new_client_from_config(config_file=str(secure_plane.kubeconfig)))
    names = [ns.metadata.name for ns in api.list_namespace().items]
    assert "default" in names
    assert isinstance(api.list_namespaced_pod("default").items, list)

    stale = yaml.safe_load(secure_plane.kubeconfig.read_text())
    stale["users"][0]["user"]["token"] = "stale-token"
    (tmp_path / "stale").write_text(yaml.safe_dump(stale))
    refused = client.CoreV1Api(config.new_client_from_config(config_file=str(tmp_path / "stale")))
    with pytest.raises(ApiException) as failure:
        refused.list_namespaced_pod("default")
    assert failure.value.status == 401
    assert json.loads(failure.value.body)["reason"] == "Unauthorized"


def test_plain_http_is_an_opt_in_that_warns_at_every_start_and_is_remembered(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    plane = Plane(tmp_path_factory.mktemp("insecure-opt-in-home"), free_port(), secure=False)
    try:
        first = plane.yard("up", "--insecure", "--port", str(plane.port))
        for started in (first,):
            assert "WARNING: `--insecure`" in started.stderr and "any command" in started.stderr
            assert "yard up --secure" in started.stderr, "it says how to go back"
        assert json.loads((plane.home / "yard.json").read_text()) == {"secure": False, "insecureOptIn": True}
        with plane.urlopen("/api/v1/namespaces") as response:
            assert response.status == 200
        plane.down()
        # a plain `yard up` keeps the opt-in, and warns again
        again = plane.yard("up", "--port", str(plane.port))
        assert "WARNING: `--insecure`" in again.stderr
        assert yaml.safe_load(plane.kubeconfig.read_text())["clusters"][0]["cluster"]["server"].startswith("http:")
        assert "WARNING" in (plane.home / "yard.log").read_text(), "the plane's log says it too"
        plane.down()
        back = plane.yard("up", "--secure", "--port", str(plane.port))
        assert "WARNING" not in back.stderr
        assert json.loads((plane.home / "yard.json").read_text()) == {"secure": True}
    finally:
        plane.down()


def test_a_plane_left_on_the_old_http_default_moves_to_https_and_says_so(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    home = tmp_path_factory.mktemp("old-default-home")
    plane = Plane(home, free_port())
    # what a plain `yard up` of an older trainyard left: plain http remembered, no opt-in recorded,
    # world-readable files and an http kubeconfig
    (home / "yard.json").write_text('{"secure": false}\n')
    (home / "yard.log").write_text("an old log\n")
    (home / "kubeconfig").write_text(yaml.safe_dump({"clusters": [{"cluster": {"server": "http://127.0.0.1:1"}}]}))
    for path in (home / "yard.json", home / "yard.log", home / "kubeconfig"):
        path.chmod(0o644)
    home.chmod(0o755)
    try:
        started = plane.yard("up", "--port", str(plane.port))
        assert "now serves HTTPS" in started.stderr and str(plane.kubeconfig) in started.stderr, started.stderr
        assert "yard up --insecure" in started.stderr, "it says how to keep plain http"
        assert "WARNING" not in started.stderr
        assert json.loads((home / "yard.json").read_text()) == {"secure": True}
        config = yaml.safe_load(plane.kubeconfig.read_text())
        assert config["clusters"][0]["cluster"]["server"] == plane.url and plane.url.startswith("https:")
        assert config["users"][0]["user"]["token"] == token_of(plane)
        assert mode(home) == 0o700
        for name in ("yard.json", "yard.log", "kubeconfig"):
            assert mode(home / name) == 0o600, name
        assert "default" in Kubectl(plane, tmp_path_factory.mktemp("old-default-cache"))("get", "namespaces")
        plane.down()
        # told once: the next start is quiet
        assert "HTTPS" not in plane.yard("up", "--port", str(plane.port)).stderr
    finally:
        plane.down()


def test_yard_up_refuses_a_shared_home(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    result = Plane(shared, free_port()).yard("up", check=False)
    assert result.returncode == 2 and "shared directory" in result.stderr
    assert mode(shared) == 0o1777, "left as it was"


# -- another local user -------------------------------------------------------------------------

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: private-pod
spec:
  restartPolicy: Never
  containers:
    - name: main
      image: python:3.11
      command: ["python3", "-c", "print('a secret of the owner')"]
"""

# Run by the other user with the system's Python: what can it reach of the plane in HOME on PORT?
PROBE = r"""
import json, os, ssl, sys, urllib.error, urllib.request
home, port, token = sys.argv[1], sys.argv[2], sys.argv[3]
out = {}
context = ssl._create_unverified_context()  # the CA is the owner's; an attacker would not check anyway
for name, headers in (("anonymous", {}), ("guessed", {"Authorization": "Bearer " + token})):
    request = urllib.request.Request(f"https://127.0.0.1:{port}/api/v1/namespaces/default/pods", headers=headers)
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            out[name] = response.status
    except urllib.error.HTTPError as exc:
        out[name] = exc.code
try:
    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/namespaces/default/pods", timeout=30)
    out["http"] = "served"
except Exception as exc:
    out["http"] = type(exc).__name__
for rel in sys.argv[4:]:
    try:
        with open(os.path.join(home, rel), "rb") as handle:
            handle.read(1)
        out[rel] = "read"
    except OSError as exc:
        out[rel] = type(exc).__name__
try:
    os.listdir(home)
    out["listdir"] = "listed"
except OSError as exc:
    out["listdir"] = type(exc).__name__
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def open_parent_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    """A plane started by a plain `yard up` in a home whose parent every user can traverse (0755)."""
    parent = Path(tempfile.mkdtemp(prefix="yard-secure-parent-"))
    parent.chmod(0o755)
    plane = Plane(parent / "home", free_port())
    try:
        plane.yard("up", "--port", str(plane.port), "--workspace", str(tmp_path_factory.mktemp("ws")))
        yield plane
    finally:
        plane.down()
        shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture(scope="module")
def ran_pod(open_parent_plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The log file of a pod that ran to completion in ``open_parent_plane``."""
    k = Kubectl(open_parent_plane, tmp_path_factory.mktemp("private-cache"))
    k("apply", "-f", "-", input=POD)
    eventually(
        lambda: k.json("get", "pod", "private-pod")["status"].get("phase") == "Succeeded",
        timeout=180,
        what="the pod to succeed",
    )
    assert k("logs", "private-pod") == "a secret of the owner\n"
    logs = list((open_parent_plane.home / "pods").glob("default_private-pod_*/logs/main.log"))
    assert len(logs) == 1, logs
    return logs[0]


def test_a_plain_yard_up_serves_https_with_a_token(open_parent_plane: Plane) -> None:
    plane = open_parent_plane
    assert json.loads((plane.home / "yard.json").read_text()) == {"secure": True}
    state = json.loads((plane.home / "plane.json").read_text())
    assert state["secure"] is True and state["url"] == plane.url == f"https://127.0.0.1:{plane.port}"
    assert_unauthorized(request(plane, "/api/v1/namespaces"))
    assert request(plane, "/api/v1/namespaces", token=token_of(plane))[0] == 200


def test_everything_under_the_home_is_owner_only(open_parent_plane: Plane, ran_pod: Path) -> None:
    home = open_parent_plane.home
    assert mode(home) == 0o700
    checked = 0
    for root, dirs, files in os.walk(home):
        for name in dirs:
            path = Path(root) / name
            if not path.is_symlink():
                assert mode(path) & 0o077 == 0, f"{path} is {oct(mode(path))}"
        for name in files:
            path = Path(root) / name
            if path.is_symlink() or Path(root).name == "work":
                continue  # a container's own files in its working dir keep the container's umask
            assert mode(path) & 0o077 == 0, f"{path} is {oct(mode(path))}"
            checked += 1
    assert checked >= 10
    for path in (home / "store.db", home / "kubeconfig", home / "yard.log", ran_pod, home / "pki" / "token"):
        assert mode(path) == 0o600, path
    assert mode(ran_pod.parent) == 0o700 and mode(ran_pod.parent.parent) == 0o700


def _other_user() -> Iterator[str]:
    name = f"yardother{os.getpid() % 100000}"
    subprocess.run(["userdel", "-r", name], capture_output=True)
    created = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], capture_output=True)
    if created.returncode != 0:
        raise AssertionError(f"useradd failed: {created.stderr!r}")
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture(scope="module")
def other_user() -> Iterator[str | None]:
    """A real second Unix user (None when these tests are not root or the system has no useradd)."""
    if os.geteuid() != 0 or not (shutil.which("useradd") and shutil.which("runuser")):
        yield None
        return
    yield from _other_user()


def test_another_local_user_gets_401_and_reads_nothing(
    open_parent_plane: Plane, ran_pod: Path, other_user: str | None
) -> None:
    plane = open_parent_plane
    private = [
        "pki/token",
        "pki/ca.key",
        "pki/server.key",
        "kubeconfig",
        "store.db",
        "yard.log",
        str(ran_pod.relative_to(plane.home)),
    ]
    if other_user is None:
        # not root: what stops another user is what this checks (no group or other bit on the way in)
        assert mode(plane.home) == 0o700
        for rel in private:
            assert mode(plane.home / rel) & 0o077 == 0, rel
        assert_unauthorized(request(plane, "/api/v1/namespaces/default/pods", token="guessed"))
        return
    # the home's parent lets anyone through: only trainyard's own permissions stand in the way
    assert mode(plane.home.parent) == 0o755
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    probe = subprocess.run(
        ["runuser", "-u", other_user, "--", python, "-c", PROBE, str(plane.home), str(plane.port), "guessed", *private],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    assert seen.pop("anonymous") == 401 and seen.pop("guessed") == 401
    assert seen.pop("http") != "served"
    assert seen == dict.fromkeys([*private, "listdir"], "PermissionError"), seen
    # ... while the owner reads the log through the API
    assert "a secret of the owner" in plane.yard("logs", "private-pod").stdout
