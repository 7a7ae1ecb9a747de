"""S3 objects for checkpoints, through boto3, and every failure as one message naming its cause.

boto3 is the ``trainyard[s3]`` extra, imported when the first ``s3://`` location is used (never by
``import trainyard.runtime``); without it that use fails with a message naming the extra.

Where and who, the usual way: the credentials are boto3's default chain (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, ``AWS_PROFILE``, the shared credentials and
config files, a container or instance role); ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``,
names an S3-compatible server (MinIO, moto, Ceph); ``AWS_REGION``, else ``AWS_DEFAULT_REGION``, the
region. Those are read from the manager's environment (the process's unless one is given).

Transfers use no thread pool of their own (``use_threads=False``): an upload may still run while
the interpreter exits (``checkpoints`` finishes it in ``atexit``), when a pool takes no more work.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

SCHEME = "s3://"
EXTRA = "pip install 'trainyard[s3]'"
# boto3's standard retry mode: throttling and transient errors retried, a refused connection too,
# a few times only, so that an unreachable endpoint is reported in seconds.
_RETRIES = {"max_attempts": 3, "mode": "standard"}
_CREDENTIAL_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "TokenRefreshRequired",
    "InvalidClientTokenId",
    "AuthorizationHeaderMalformed",
}
_CREDENTIALS_HELP = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (in a pod: env valueFrom secretKeyRef of a Secret), "
    "or AWS_PROFILE with a shared credentials file"
)


class CheckpointStorageError(RuntimeError):
    """A checkpoint store could not be used; the message says why and what to do."""


@dataclass(frozen=True)
class S3Uri:
    bucket: str
    key: str
    """The object key or key prefix, without a leading or trailing ``/``; may be empty."""

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.key}".rstrip("/")

    def child(self, name: str) -> S3Uri:
        return S3Uri(self.bucket, f"{self.key}/{name}" if self.key else name)

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]


def is_s3(location: object) -> bool:
    return isinstance(location, str) and location.startswith(SCHEME)


def parse(location: str) -> S3Uri:
    """``s3://bucket/prefix`` as a bucket and a key."""
    if not is_s3(location):
        raise ValueError(f"{location!r} is not an s3:// URI")
    bucket, _, key = location[len(SCHEME) :].partition("/")
    if not bucket:
        raise ValueError(f"{location!r}: no bucket (expected s3://bucket/prefix)")
    return S3Uri(bucket, key.strip("/"))


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    modified: float
    """Seconds since the epoch (the server's Last-Modified)."""


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise CheckpointStorageError(f"s3:// checkpoints need boto3, which is not installed: {EXTRA}") from None


def endpoint(environ: Mapping[str, str]) -> str | None:
    return (environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL") or "").strip() or None


class Bucket:
    """One bucket through one boto3 client; every failure raises :class:`CheckpointStorageError`."""

    def __init__(self, name: str, environ: Mapping[str, str]) -> None:
        boto3 = _import("boto3")
        config = _import("botocore.config")
        transfer = _import("boto3.s3.transfer")
        self.name = name
        self.endpoint = endpoint(environ)
        try:
            # None falls back to boto3's own chain (the process's environment, files, roles).
            session = boto3.session.Session(
                aws_access_key_id=environ.get("AWS_ACCESS_KEY_ID") or None,
                aws_secret_access_key=environ.get("AWS_SECRET_ACCESS_KEY") or None,
                aws_session_token=environ.get("AWS_SESSION_TOKEN") or None,
                profile_name=environ.get("AWS_PROFILE") or None,
                region_name=environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or None,
            )
            self._client = session.client(
                "s3",
                endpoint_url=self.endpoint,
                config=config.Config(connect_timeout=10, read_timeout=60, retries=_RETRIES),
            )
        except Exception as error:
            raise self._explain(error, "connect to") from None
        self._transfer = transfer.TransferConfig(use_threads=False)

    def __str__(self) -> str:
        return f"{SCHEME}{self.name}" + (f" at {self.endpoint}" if self.endpoint else "")

    def put_file(self, key: str, path: Path) -> None:
        try:
            self._client.upload_file(str(path), self.name, key, Config=self._transfer)
        except Exception as error:
            raise self._explain(error, f"upload {key} to") from None

    def put_bytes(self, key: str, data: bytes) -> None:
        try:
            self._client.put_object(Bucket=self.name, Key=key, Body=data)
        except Exception as error:
            raise self._explain(error, f"write {key} to") from None

    def get_bytes(self, key: str) -> bytes | None:
        """The object's bytes; None when there is no such object."""
        try:
            return bytes(self._client.get_object(Bucket=self.name, Key=key)["Body"].read())
        except Exception as error:
            if _code(error) == "NoSuchKey":
                return None
            raise self._explain(error, f"read {key} from") from None

    def download(self, key: str, path: Path) -> None:
        try:
            self._client.download_file(self.name, key, str(path), Config=self._transfer)
        except Exception as error:
            raise self._explain(error, f"download {key} from") from None

    def head(self, key: str) -> ObjectInfo | None:
        try:
            found = self._client.head_object(Bucket=self.name, Key=key)
        except Exception as error:
            if _code(error) in ("404", "NoSuchKey"):
                return None
            raise self._explain(error, f"read {key} from") from None
        return ObjectInfo(key, int(found["ContentLength"]), _seconds(found["LastModified"]))

    def objects(self, prefix: str) -> list[ObjectInfo]:
        """Every object whose key starts with ``prefix``."""
        out: list[ObjectInfo] = []
        try:
            for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix):
                for item in page.get("Contents") or []:
                    out.append(ObjectInfo(item["Key"], int(item["Size"]), _seconds(item["LastModified"])))
        except Exception as error:
            raise self._explain(error, "list") from None
        return out

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):  # S3's limit per DeleteObjects
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            try:
                self._client.delete_objects(Bucket=self.name, Delete={"Objects": batch, "Quiet": True})
            except Exception as error:
                raise self._explain(error, "delete checkpoint objects from") from None

    def _explain(self, error: BaseException, action: str) -> CheckpointStorageError:
        """One message for ``error``: what failed, why, and what to do."""
        error = _unwrapped(error)
        kind = type(error).__name__
        where = str(self)
        code = _code(error)
        if kind in ("NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"):
            return CheckpointStorageError(f"cannot {action} {where}: no AWS credentials ({error}); {_CREDENTIALS_HELP}")
        if kind == "ProfileNotFound":
            return CheckpointStorageError(f"cannot {action} {where}: {error}; set AWS_PROFILE to a profile that exists")
        if kind in ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError", "ReadTimeoutError"):
            return CheckpointStorageError(
                f"cannot {action} {where}: the S3 endpoint is unreachable ({error}); check AWS_ENDPOINT_URL_S3 / "
                "AWS_ENDPOINT_URL and that the server is up and reachable from here"
            )
        if code == "NoSuchBucket":
            return CheckpointStorageError(
                f"cannot {action} {where}: bucket {self.name!r} does not exist; create it "
                f"(aws s3 mb s3://{self.name}) or name an existing one (a TrainingJob's checkpoint.storage.s3Bucket)"
            )
        if code in _CREDENTIAL_CODES:
            return CheckpointStorageError(
                f"cannot {action} {where}: the server refused the credentials ({code}: {_message(error)}); "
                f"{_CREDENTIALS_HELP}, with a key the server knows"
            )
        if code in ("AccessDenied", "403", "AllAccessDisabled"):
            return CheckpointStorageError(
                f"cannot {action} {where}: access denied ({_message(error)}); grant these credentials "
                "s3:GetObject, s3:PutObject, s3:DeleteObject and s3:ListBucket on the bucket"
            )
        if code:
            return CheckpointStorageError(f"cannot {action} {where}: {code}: {_message(error)}")
        return CheckpointStorageError(f"cannot {action} {where}: {kind}: {error}")


def _unwrapped(error: BaseException) -> BaseException:
    # boto3's managed transfers wrap the ClientError that says why (S3UploadFailedError).
    inner = error.__cause__ or error.__context__
    if type(error).__name__ == "S3UploadFailedError" and inner is not None:
        return inner
    return error


def _code(error: BaseException) -> str:
    response = getattr(_unwrapped(error), "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Code") or "")
    return ""


def _message(error: BaseException) -> str:
    response = getattr(error, "response", None) or {}
    return str((response.get("Error") or {}).get("Message") or error)


def _seconds(value: Any) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)
