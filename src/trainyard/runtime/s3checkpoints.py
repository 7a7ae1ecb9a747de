"""Checkpoints under an S3 prefix, made atomic by a manifest: a checkpoint exists once its manifest does.

A checkpoint is the files ``CheckpointManager`` writes locally (``checkpoint-<n>.ckpt`` and, for a
torch or pickle one, its metadata ``checkpoint-<n>.ckpt.json``), uploaded as objects of the same
names under the prefix, then published by one more object, its manifest
``checkpoint-<n>.ckpt.manifest.json``: the files' names, sizes and SHA-256, the number, epoch and
time. S3 writes a single object atomically, so a reader that goes by manifests never sees a half
checkpoint: an upload killed midway leaves objects without a manifest, which no listing counts and
the next rotation deletes. Saving a number again first deletes its manifest (the old checkpoint
goes invisible), uploads, then publishes again; a reader caught in between finds a file that does
not match the manifest's digest and is told so.

Rotation keeps the newest ``keep`` published checkpoints and deletes each older one manifest first,
then its files, so that one interrupted half-way is invisible rather than half there.

Reads go through a local cache directory: a file is downloaded only when the cache does not hold
it with the manifest's size and digest, into a temporary name renamed over the cached one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from trainyard.runtime.s3store import Bucket, CheckpointStorageError, ObjectInfo, S3Uri

MANIFEST_SUFFIX = ".manifest.json"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class FileEntry:
    name: str
    size: int
    sha256: str | None
    """None for an object written without a manifest (a checkpoint uploaded by other means)."""


@dataclass(frozen=True)
class Manifest:
    name: str
    """The checkpoint's name, that of its first file (``checkpoint-00000005.ckpt``)."""
    uri: S3Uri
    """Where the checkpoint's first file is."""
    number: int | None
    epoch: int | None
    time: float
    files: tuple[FileEntry, ...]

    def to_json(self) -> bytes:
        files = [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in self.files]
        body = {"checkpoint": self.name, "number": self.number, "epoch": self.epoch, "time": self.time, "files": files}
        return json.dumps(body, indent=1).encode()


def digest(path: Path) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
    return hasher.hexdigest()


class S3Checkpoints:
    """The checkpoints under one prefix whose names ``pattern`` matches (group 1: the number)."""

    def __init__(self, uri: S3Uri, bucket: Bucket, pattern: re.Pattern[str]) -> None:
        self.uri = uri
        self.bucket = bucket
        self.pattern = pattern

    def _objects(self, uri: S3Uri | None = None) -> list[ObjectInfo]:
        where = uri or self.uri
        return self.bucket.objects(f"{where.key}/" if where.key else "")

    def _names(self, objects: list[ObjectInfo], uri: S3Uri) -> dict[str, list[ObjectInfo]]:
        """Objects directly under ``uri``, by the checkpoint name they belong to."""
        start = len(uri.key) + 1 if uri.key else 0
        out: dict[str, list[ObjectInfo]] = {}
        for item in objects:
            rest = item.key[start:]
            if "/" in rest:
                continue
            name = rest.removesuffix(MANIFEST_SUFFIX).removesuffix(".json")
            if self.pattern.match(name):
                out.setdefault(name, []).append(item)
        return out

    def published(self, uri: S3Uri | None = None) -> list[tuple[int, str]]:
        """(number, name) of the checkpoints with a manifest under ``uri`` (this prefix), oldest first."""
        where = uri or self.uri
        names = self._names(self._objects(where), where)
        found = []
        for name, items in names.items():
            if any(item.key.endswith(MANIFEST_SUFFIX) for item in items):
                match = self.pattern.match(name)
                assert match is not None
                found.append((int(match.group(1)), name))
        return sorted(found)

    def manifest(self, uri: S3Uri) -> Manifest | None:
        """The manifest of the checkpoint at ``uri``; None when it has none (not, or not yet, published)."""
        raw = self.bucket.get_bytes(uri.key + MANIFEST_SUFFIX)
        if raw is None:
            return None
        try:
            body = json.loads(raw)
            files = tuple(FileEntry(str(f["name"]), int(f["size"]), f.get("sha256")) for f in body["files"])
            number, epoch = body.get("number"), body.get("epoch")
            return Manifest(
                name=uri.name,
                uri=uri,
                number=None if number is None else int(number),
                epoch=None if epoch is None else int(epoch),
                time=float(body.get("time") or 0),
                files=files,
            )
        except (ValueError, KeyError, TypeError) as error:
            raise CheckpointStorageError(
                f"{uri}{MANIFEST_SUFFIX} is not a checkpoint manifest ({error}); delete it to drop that checkpoint"
            ) from None

    def unmanaged(self, uri: S3Uri) -> Manifest | None:
        """An object without a manifest, written by other means, as a one-file checkpoint (read as bytes)."""
        found = self.bucket.head(uri.key) if uri.key else None
        if found is None:
            return None
        return Manifest(uri.name, uri, None, None, found.modified, (FileEntry(uri.name, found.size, None),))

    def publish(self, files: list[Path], *, number: int, epoch: int | None, time: float) -> Manifest:
        """Upload ``files`` (the checkpoint first), then its manifest; see the module docstring."""
        name = files[0].name
        uri = self.uri.child(name)
        if self.bucket.head(uri.key + MANIFEST_SUFFIX) is not None:
            self.bucket.delete([uri.key + MANIFEST_SUFFIX])  # saved again: invisible until the new one is whole
        entries = []
        for path in files:
            entries.append(FileEntry(path.name, path.stat().st_size, digest(path)))
            self.bucket.put_file(self.uri.child(path.name).key, path)
        manifest = Manifest(name, uri, number, epoch, time, tuple(entries))
        self.bucket.put_bytes(uri.key + MANIFEST_SUFFIX, manifest.to_json())
        return manifest

    def rotate(self, keep: int) -> None:
        """Keep the newest ``keep`` published checkpoints: older ones go, manifest first; so do the
        objects, older than the newest checkpoint, that an interrupted upload left without a manifest."""
        names = self._names(self._objects(), self.uri)
        published = sorted(
            (int(m.group(1)), name)
            for name, items in names.items()
            if (m := self.pattern.match(name)) and any(i.key.endswith(MANIFEST_SUFFIX) for i in items)
        )
        if not published:
            return
        newest = published[-1][0]
        doomed = {name for _, name in published[:-keep]}
        for name, items in names.items():
            match = self.pattern.match(name)
            assert match is not None
            has_manifest = any(i.key.endswith(MANIFEST_SUFFIX) for i in items)
            if name in doomed:
                self.bucket.delete([self.uri.child(name).key + MANIFEST_SUFFIX])
                self.bucket.delete([i.key for i in items if not i.key.endswith(MANIFEST_SUFFIX)])
            elif not has_manifest and int(match.group(1)) < newest:
                self.bucket.delete([i.key for i in items])

    def fetch(self, manifest: Manifest, cache: Path) -> Path:
        """The checkpoint's files in ``cache`` (downloaded unless held already); the first one's path."""
        cache.mkdir(parents=True, exist_ok=True)
        folder = S3Uri(manifest.uri.bucket, manifest.uri.key.rpartition("/")[0])
        for entry in manifest.files:
            local = cache / entry.name
            if entry.sha256 is not None and _holds(local, entry):
                continue
            fd, tmp = tempfile.mkstemp(prefix=f".{entry.name}.", suffix=".download", dir=cache)
            os.close(fd)
            try:
                self.bucket.download(folder.child(entry.name).key, Path(tmp))
                if entry.sha256 is not None and digest(Path(tmp)) != entry.sha256:
                    raise CheckpointStorageError(
                        f"{folder.child(entry.name)} does not match its manifest (it was saved again while being "
                        "read, or changed by hand); read the checkpoint again"
                    )
                Path(tmp).replace(local)
            finally:
                Path(tmp).unlink(missing_ok=True)
        if len(manifest.files) == 1:
            # A bytes checkpoint has no metadata: one left in the cache by an older save would mislead load().
            (cache / (manifest.files[0].name + ".json")).unlink(missing_ok=True)
        return cache / manifest.files[0].name


def _holds(local: Path, entry: FileEntry) -> bool:
    try:
        return local.stat().st_size == entry.size and digest(local) == entry.sha256
    except OSError:
        return False
