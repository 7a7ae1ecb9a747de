"""CheckpointManager on s3:// against a real S3 server (moto's server mode, started here).

Atomicity is checked as a reader sees it (a checkpoint without its manifest does not exist), with
real interruptions: a writer killed (SIGKILL) right after its save returned, while its upload runs,
and one stopped with SIGTERM, which must finish the upload before it exits.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from s3server import free_port, moto_server
from trainyard.runtime import reporting
from trainyard.runtime.checkpoints import ENV_RESUME_FROM, CheckpointManager
from trainyard.runtime.s3store import CheckpointStorageError

KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}
SRC = Path(__file__).resolve().parents[3] / "src"


@pytest.fixture(autouse=True)
def no_reporting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reporting, "_default", reporting.Reporter(None))
    # Never ask an instance-metadata address for credentials; never read the user's AWS files.
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def env(endpoint: str) -> dict[str, str]:
    return {**KEYS, "AWS_ENDPOINT_URL": endpoint}


@pytest.fixture
def bucket(env: dict[str, str]) -> str:
    name = f"ckpt-{uuid.uuid4().hex[:12]}"
    client(env).create_bucket(Bucket=name)
    return name


def client(env: dict[str, str]) -> object:
    return boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )


def keys(env: dict[str, str], bucket: str) -> list[str]:
    listed = client(env).list_objects_v2(Bucket=bucket)  # type: ignore[attr-defined]
    return sorted(item["Key"] for item in listed.get("Contents") or [])


def manager(tmp_path: Path, env: dict[str, str], uri: str, **kwargs: object) -> CheckpointManager:
    cache = tmp_path / f"cache-{uuid.uuid4().hex[:6]}"
    return CheckpointManager(uri, rank=0, environ=env, cache=cache, **kwargs)  # type: ignore[arg-type]


def test_save_latest_and_rotation_by_manifests(tmp_path: Path, env: dict[str, str], bucket: str) -> None:
    writer = manager(tmp_path, env, f"s3://{bucket}/job", keep=2)
    assert writer.latest() is None and writer.load_latest() is None
    for epoch in range(1, 5):
        assert writer.save({"epoch": epoch}, epoch=epoch) == f"s3://{bucket}/job/checkpoint-{epoch:08d}.ckpt"
    writer.wait()
    assert writer.checkpoints() == [f"s3://{bucket}/job/checkpoint-0000000{n}.ckpt" for n in (3, 4)]
    names = [f"job/checkpoint-0000000{n}.ckpt{ext}" for n in (3, 4) for ext in ("", ".json", ".manifest.json")]
    assert keys(env, bucket) == sorted(names)
    reader = manager(tmp_path, env, f"s3://{bucket}/job")  # another pod: an empty cache
    assert reader.load_latest() == {"epoch": 4}
    assert reader.save(b"numbered on", step=None) == f"s3://{bucket}/job/checkpoint-00000005.ckpt"
    reader.wait()
    assert reader.load_latest() == b"numbered on"


def test_a_checkpoint_without_its_manifest_does_not_exist(tmp_path: Path, env: dict[str, str], bucket: str) -> None:
    writer = manager(tmp_path, env, f"s3://{bucket}/job", keep=5)
    writer.save(b"one", epoch=1)
    writer.wait()
    # What an upload killed before its manifest leaves: the files, no manifest.
    client(env).put_object(Bucket=bucket, Key="job/checkpoint-00000002.ckpt", Body=b"half")  # type: ignore[attr-defined]
    assert writer.latest() == f"s3://{bucket}/job/checkpoint-00000001.ckpt"
    assert manager(tmp_path, env, f"s3://{bucket}/job").load_latest() == b"one"
    writer.save(b"three", epoch=3)  # the rotation after it drops the orphan, older than the newest
    writer.wait()
    assert "job/checkpoint-00000002.ckpt" not in keys(env, bucket)
    assert [Path(str(p)).name for p in writer.checkpoints()] == ["checkpoint-00000001.ckpt", "checkpoint-00000003.ckpt"]


def run_writer(env: dict[str, str], bucket: str, cache: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(
        f"""
        import os, signal, sys, time
        from trainyard.runtime.checkpoints import CheckpointManager
        manager = CheckpointManager("s3://{bucket}/job", rank=0, cache={str(cache)!r}, report=False)
        manager.save(b"epoch 1", epoch=1)
        manager.wait()
        """
    ) + textwrap.dedent(body)
    child_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC), "AWS_EC2_METADATA_DISABLED": "true", **env}
    return subprocess.run([sys.executable, "-c", script], env=child_env, capture_output=True, text=True, timeout=180)


def test_a_writer_killed_during_its_upload_leaves_no_half_checkpoint(
    tmp_path: Path, env: dict[str, str], bucket: str
) -> None:
    done = run_writer(
        env,
        bucket,
        tmp_path / "cache",
        """
        manager.save(bytes(range(256)) * (160 * 1024), epoch=2)  # 40 MiB: a multipart upload
        os.kill(os.getpid(), signal.SIGKILL)  # the save returned; its upload is in flight
        """,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    reader = manager(tmp_path, env, f"s3://{bucket}/job")
    found = [Path(str(p)).name for p in reader.checkpoints()]
    # However far the upload got, a reader sees whole checkpoints only: 1, or 1 and a complete 2.
    assert found in (["checkpoint-00000001.ckpt"], ["checkpoint-00000001.ckpt", "checkpoint-00000002.ckpt"])
    expected = b"epoch 1" if len(found) == 1 else bytes(range(256)) * (160 * 1024)
    assert reader.load_latest() == expected


def test_sigterm_finishes_the_upload_in_flight(tmp_path: Path, env: dict[str, str], bucket: str) -> None:
    done = run_writer(
        env,
        bucket,
        tmp_path / "cache",
        """
        manager.save(b"x" * (12 << 20), epoch=2)
        os.kill(os.getpid(), signal.SIGTERM)  # a pod deleted, a spot notice: the upload has the grace period
        time.sleep(120)
        """,
    )
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    reader = manager(tmp_path, env, f"s3://{bucket}/job")
    assert reader.load_latest() == b"x" * (12 << 20)


def test_the_cache_is_read_first_and_refreshed_when_stale(tmp_path: Path, env: dict[str, str], bucket: str) -> None:
    writer = manager(tmp_path, env, f"s3://{bucket}/job")
    writer.save({"epoch": 1}, epoch=1)
    local = writer.directory / "checkpoint-00000001.ckpt"
    assert local.is_file()  # written before save returned; the upload is the background's
    writer.wait()
    assert "job/checkpoint-00000001.ckpt.manifest.json" in keys(env, bucket)
    client(env).delete_object(Bucket=bucket, Key="job/checkpoint-00000001.ckpt")  # type: ignore[attr-defined]
    assert writer.load_latest() == {"epoch": 1}  # the cache holds what the manifest names
    with pytest.raises(CheckpointStorageError, match=r"cannot download job/checkpoint-00000001.ckpt"):
        manager(tmp_path, env, f"s3://{bucket}/job").load_latest()  # an empty cache must download
    writer.save({"epoch": 2}, epoch=2)
    writer.wait()
    (writer.directory / "checkpoint-00000002.ckpt").write_bytes(b"stale")
    assert writer.load_latest() == {"epoch": 2}  # digest differs: downloaded again
    latest = writer.latest()
    assert latest is not None and writer.local_path(latest) == writer.directory / "checkpoint-00000002.ckpt"


def test_resume_from_an_s3_uri(
    tmp_path: Path, env: dict[str, str], bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    old = manager(tmp_path, env, f"s3://{bucket}/old", clock=lambda: 1000.0)
    for epoch in (1, 2, 3):
        old.save(f"old {epoch}".encode(), epoch=epoch)
    old.wait()
    fresh = manager(tmp_path, {**env, ENV_RESUME_FROM: f"s3://{bucket}/old"}, f"s3://{bucket}/new")
    assert fresh.load_latest() == b"old 3"  # a prefix: its newest complete checkpoint
    pinned = {**env, ENV_RESUME_FROM: f"s3://{bucket}/old/checkpoint-00000002.ckpt"}
    new = CheckpointManager(f"s3://{bucket}/new", rank=0, environ=pinned, cache=tmp_path / "n", clock=lambda: 2000.0)
    assert new.load_latest() == b"old 2"
    new.save(b"own 5", epoch=5)
    new.wait()
    assert new.load_latest() == b"own 5"  # its own, newer checkpoint wins
    on_disk = CheckpointManager(tmp_path / "local", rank=0, environ=pinned)
    assert on_disk.load_latest() == b"old 2"  # a directory manager resumes from S3 too
    missing = CheckpointManager(tmp_path / "local", rank=0, environ={**env, ENV_RESUME_FROM: f"s3://{bucket}/none"})
    assert missing.load_latest() is None
    assert f"{ENV_RESUME_FROM}=s3://{bucket}/none does not exist" in caplog.text


def test_the_reported_checkpoint_is_the_published_uri(
    tmp_path: Path, env: dict[str, str], bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[reporting.Snapshot] = []

    class Sink:
        def send(self, snapshot: reporting.Snapshot, timeout: float) -> None:
            seen.append(snapshot)

    monkeypatch.setattr(reporting, "_default", reporting.Reporter(Sink(), start=False))
    writer = manager(tmp_path, env, f"s3://{bucket}/job")
    writer.save(b"x", epoch=4)
    writer.wait()
    reporting.flush()
    assert seen[-1].checkpoint is not None
    assert seen[-1].checkpoint.path == f"s3://{bucket}/job/checkpoint-00000004.ckpt"


def test_a_missing_bucket_is_named(tmp_path: Path, env: dict[str, str]) -> None:
    writer = manager(tmp_path, env, "s3://no-such-bucket-here/job")
    with pytest.raises(CheckpointStorageError, match=r"bucket 'no-such-bucket-here' does not exist; create it"):
        writer.latest()
    writer.save(b"x", epoch=1)
    with pytest.raises(CheckpointStorageError, match="does not exist"):
        writer.wait()  # the background upload's error, raised once


def test_an_unreachable_endpoint_is_named(tmp_path: Path) -> None:
    env = {**KEYS, "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{free_port()}"}
    with pytest.raises(CheckpointStorageError, match=r"the S3 endpoint is unreachable .* check AWS_ENDPOINT_URL_S3"):
        manager(tmp_path, env, "s3://some-bucket/job").latest()


def test_missing_credentials_are_named(tmp_path: Path, endpoint: str) -> None:
    writer = manager(tmp_path, {"AWS_ENDPOINT_URL": endpoint}, "s3://some-bucket/job")
    with pytest.raises(CheckpointStorageError, match=r"no AWS credentials .* set AWS_ACCESS_KEY_ID"):
        writer.latest()


def test_refused_credentials_are_named(tmp_path: Path) -> None:
    with moto_server({"INITIAL_NO_AUTH_ACTION_COUNT": "0"}) as url:  # this server checks every signature
        writer = manager(tmp_path, {**KEYS, "AWS_ENDPOINT_URL": url}, "s3://some-bucket/job")
        with pytest.raises(CheckpointStorageError, match=r"the server refused the credentials \(InvalidAccessKeyId"):
            writer.latest()


def test_without_boto3_the_extra_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # as if not installed
    with pytest.raises(
        CheckpointStorageError, match=r"need boto3, which is not installed: pip install 'trainyard\[s3\]'"
    ):
        CheckpointManager("s3://some-bucket/job", rank=0, environ=KEYS)


def test_the_pod_env_names_the_bucket(tmp_path: Path, env: dict[str, str], bucket: str) -> None:
    # What a TrainingJob's checkpoint.storage.type s3 gives its workers (frameworks.trainingjob).
    pod = {**env, "TRAINYARD_CHECKPOINT_DIR": f"s3://{bucket}/train", "TRAINYARD_CHECKPOINT_KEEP": "1"}
    first = CheckpointManager(rank=0, environ=pod, cache=tmp_path / "a")
    first.save({"epoch": 1}, epoch=1)
    first.save({"epoch": 2}, epoch=2)
    first.wait()
    restarted = CheckpointManager(rank=0, environ={**pod, "TRAINYARD_CHECKPOINT_CACHE": str(tmp_path / "b")})
    assert restarted.directory == tmp_path / "b"
    assert restarted.load_latest() == {"epoch": 2}
    assert CheckpointManager(environ={**pod, "RANK": "1"}, cache=tmp_path / "c").save(b"x", epoch=3) is None
    assert restarted.checkpoints() == [f"s3://{bucket}/train/checkpoint-00000002.ckpt"]
