"""Checkpoints written by rank 0 so that a crash never leaves a half-written one as the latest.

A save writes a temporary file in the checkpoint directory, fsyncs it, renames it over its final
name with ``os.replace`` and fsyncs the directory, so a reader sees either the old set of files or
the new one. Files are named ``<prefix>-<number><suffix>`` where the number is the epoch, else the
step, else one more than the highest present; :meth:`CheckpointManager.latest` is the highest
number, and only the last ``keep`` survive a save. Other ranks' saves do nothing and return None.

Directory: the one given, else ``TRAINYARD_CHECKPOINT_DIR`` (a TrainingJob's ``checkpoint``
settings compile to it), else ``checkpoints`` in the working directory.

S3: a directory ``s3://bucket/prefix`` makes the local directory a cache (``cache=``, else
``TRAINYARD_CHECKPOINT_CACHE``, else under the temporary directory): a save writes there as above
and returns; a background thread uploads the files and publishes the checkpoint's manifest
(``s3checkpoints``: atomicity, rotation, cached reads; ``s3store``: boto3, credentials, errors).
Listing, rotation and resume go by manifests; locations are then ``s3://`` URIs (``Location``).
At exit the process waits, bounded, for the upload in flight (``_finish_at_exit``), after
SIGTERM too (``signals``).

Resume: the operator injects ``TRAINYARD_RESUME_FROM``, a checkpoint file or a directory whose
latest checkpoint to use: a job's ``resumeFrom``, or, once the job has reported a checkpoint,
its last one (``status.trainingProgress.lastCheckpoint``), so that pods created after a restart
continue. :meth:`CheckpointManager.resume_path` takes this directory's own latest checkpoint when
it is at least as new (modification time) as the one the variable names, else that one: a pod
restarted in place finds the checkpoints it wrote itself, even ones written after the variable
was set; a new pod, with an empty directory, gets the variable's.

What is saved: bytes are written as they are; a writer (a callable) is given the open binary
file; any other state is written with ``torch.save`` when it holds tensors (a tensor or a module
itself, or in the dicts, lists, tuples and sets it is made of), else pickled; ``format=`` chooses
outright. A torch or pickle checkpoint records its format in its metadata, ``<name>.json`` beside
it, written before the checkpoint takes its name, so :meth:`CheckpointManager.load_latest`
returns the kind of object that was saved; a checkpoint without metadata (bytes, a writer's, one
written elsewhere) reads as bytes. torch is imported only to write or read a torch checkpoint:
telling whether a state holds tensors needs none (there are none before the training code imports it).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import logging
import os
import pickle
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from trainyard.runtime import reporting, s3store, signals
from trainyard.runtime.env import global_rank
from trainyard.runtime.s3checkpoints import Manifest, S3Checkpoints
from trainyard.runtime.s3store import CheckpointStorageError, S3Uri

_logger = logging.getLogger(__name__)

ENV_RESUME_FROM = "TRAINYARD_RESUME_FROM"
ENV_CHECKPOINT_DIR = "TRAINYARD_CHECKPOINT_DIR"
ENV_CHECKPOINT_CACHE = "TRAINYARD_CHECKPOINT_CACHE"
"""The local cache of S3 checkpoints (default ``<tmp>/trainyard-checkpoints/<bucket>/<prefix>``)."""
ENV_EXIT_TIMEOUT = "TRAINYARD_CHECKPOINT_EXIT_TIMEOUT"
"""How long a process that ends waits for its checkpoint's upload (seconds, default 600)."""
ENV_TERM_TIMEOUT = "TRAINYARD_CHECKPOINT_TERM_TIMEOUT"
"""The same after SIGTERM (default 25: within Kubernetes' default grace period of 30 s)."""
ENV_CHECKPOINT_KEEP = "TRAINYARD_CHECKPOINT_KEEP"
"""How many checkpoints to retain when ``keep`` is not given (a TrainingJob's ``checkpoint.retention``)."""
DEFAULT_DIRECTORY = "checkpoints"
DEFAULT_KEEP = 3

FORMATS = ("bytes", "pickle", "torch")
"""How a checkpoint's state is written (``save(..., format=)``), and read back by ``load``."""
METADATA_SUFFIX = ".json"

Writer = Callable[[IO[bytes]], object]


def write_atomic(path: Path, data: bytes | Writer) -> None:
    """Write ``data`` (bytes, or a callable given the open binary file) to ``path`` atomically."""
    with _staged(path, data):
        pass


@contextlib.contextmanager
def _staged(path: Path, data: bytes | Writer) -> Iterator[None]:
    """Write ``data`` to a temporary file beside ``path``; rename it to ``path`` when the block ends
    (what the block does, e.g. writing metadata, comes before the checkpoint is visible)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            if isinstance(data, bytes | bytearray | memoryview):
                handle.write(data)
            else:
                data(handle)
            handle.flush()
            os.fsync(handle.fileno())
        yield
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def metadata_path(path: Path) -> Path:
    """Where a checkpoint's metadata lives: beside it, named after it."""
    return path.with_name(path.name + METADATA_SUFFIX)


def saved_format(path: Path) -> str:
    """The format a checkpoint was saved in, as its metadata says; ``bytes`` when it has none."""
    meta = metadata_path(path)
    try:
        recorded = json.loads(meta.read_bytes()).get("format")
    except FileNotFoundError:
        return "bytes"
    except (ValueError, AttributeError):
        recorded = None
    if recorded not in FORMATS:
        raise ValueError(
            f"{meta}: not the metadata of a checkpoint (expected a format among {', '.join(FORMATS)}); "
            f"remove it to read {path.name} as bytes, or pass load_latest(reader=...)"
        )
    return str(recorded)


def load(path: Path, **torch_load: Any) -> Any:
    """A checkpoint read back as it was saved: bytes, the unpickled state, or ``torch.load``'s
    (given ``torch_load``, e.g. ``map_location="cpu"`` or ``weights_only=False``)."""
    found = saved_format(path)
    if found == "bytes":
        return path.read_bytes()
    if found == "pickle":
        with open(path, "rb") as handle:
            return pickle.load(handle)
    try:
        torch: Any = importlib.import_module("torch")
    except ImportError as exc:
        raise ImportError(
            f"{path} was written with torch.save ({metadata_path(path).name} says so): install torch to load it"
        ) from exc
    return torch.load(path, **torch_load)


def _encoding(state: Any, wanted: str | None) -> tuple[str, bytes | Writer]:
    """(format, what ``_staged`` writes) for ``state``; see the module docstring."""
    chosen = wanted or _format_of(state)
    if chosen not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {wanted!r}")
    if chosen == "bytes":
        if isinstance(state, bytes | bytearray | memoryview) or callable(state):
            return chosen, state
        raise TypeError(f"format='bytes' takes bytes or a writer, not {type(state).__name__}")
    if chosen == "torch":
        torch: Any = importlib.import_module("torch")
        return chosen, lambda handle: torch.save(state, handle)
    return chosen, lambda handle: pickle.dump(state, handle, protocol=pickle.HIGHEST_PROTOCOL)


def _format_of(state: Any) -> str:
    if isinstance(state, bytes | bytearray | memoryview):
        return "bytes"
    # A tensor exists only once torch is imported: no import here, and a module (callable) is
    # a state, not a writer.
    torch = sys.modules.get("torch")
    if torch is not None and _holds_tensors(state, (torch.Tensor, torch.nn.Module)):
        return "torch"
    return "bytes" if callable(state) else "pickle"


def _holds_tensors(state: Any, kinds: tuple[type, ...]) -> bool:
    pending, seen = [state], set()
    while pending:
        item = pending.pop()
        if isinstance(item, kinds):
            return True
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Mapping):
            pending.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            pending.extend(item)
    return False


Location = Path | str
"""Where a checkpoint is: a local path, or an ``s3://bucket/key`` URI."""


@dataclass(frozen=True)
class _Found:
    """A checkpoint found to resume from: where, when written, and (on S3) its manifest."""

    location: Location
    time: float
    manifest: Manifest | None = None
    store: S3Checkpoints | None = None


class CheckpointManager:
    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        keep: int | None = None,
        prefix: str = "checkpoint",
        suffix: str = ".ckpt",
        rank: int | None = None,
        report: bool = True,
        environ: Mapping[str, str] | None = None,
        cache: str | os.PathLike[str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._environ = os.environ if environ is None else environ
        if keep is None:
            named = self._environ.get(ENV_CHECKPOINT_KEEP, "").strip()
            keep = int(named) if named.isdigit() else DEFAULT_KEEP
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        if directory is None:
            directory = self._environ.get(ENV_CHECKPOINT_DIR, "").strip() or DEFAULT_DIRECTORY
        self.keep = keep
        self.prefix = prefix
        self.suffix = suffix
        self.rank = global_rank(environ) if rank is None else rank
        self.report = report
        self._clock = clock
        self._pattern = re.compile(rf"^{re.escape(prefix)}-(\d+){re.escape(suffix)}$")
        self._pending: threading.Thread | None = None
        self._pending_error: BaseException | None = None
        self._pending_name: str | None = None
        self.uri: str | None = None
        """The ``s3://bucket/prefix`` checkpoints go to; None when they stay in ``directory``."""
        self.remote: S3Checkpoints | None = None
        if s3store.is_s3(str(directory)):
            where = s3store.parse(str(directory))
            self.uri = str(where)
            self.remote = S3Checkpoints(where, s3store.Bucket(where.bucket, self._environ), self._pattern)
            given = cache or self._environ.get(ENV_CHECKPOINT_CACHE, "").strip()
            self.directory = Path(given) if given else _default_cache(where)
            if self.is_writer:
                signals.exit_on_sigterm()  # so that atexit finishes an upload within the grace period
                atexit.register(self._finish_at_exit)
        else:
            self.directory = Path(directory)

    @property
    def is_writer(self) -> bool:
        return self.rank == 0

    # -- listing ---------------------------------------------------------------------------------

    def _numbered(self, directory: Path | None = None) -> list[tuple[int, Path]]:
        folder = self.directory if directory is None else directory
        try:
            entries = list(folder.iterdir())
        except FileNotFoundError:
            return []
        found = [(int(m.group(1)), p) for p in entries if (m := self._pattern.match(p.name)) and p.is_file()]
        return sorted(found)

    def checkpoints(self) -> list[Location]:
        """The checkpoints, oldest first: this directory's files, or on S3 those with a manifest (URIs)."""
        if self.remote is not None:
            return [str(self.remote.uri.child(name)) for _, name in self.remote.published()]
        return [path for _, path in self._numbered()]

    def latest(self) -> Location | None:
        found = self.checkpoints()
        return found[-1] if found else None

    def path_for(self, number: int) -> Location:
        name = f"{self.prefix}-{number:08d}{self.suffix}"
        if self.remote is not None:
            return str(self.remote.uri.child(name))
        return self.directory / name

    # -- saving ----------------------------------------------------------------------------------

    def save(
        self, state: Any, *, epoch: int | None = None, step: int | None = None, format: str | None = None
    ) -> Location | None:
        """Write a checkpoint of ``state`` now (rank 0 only); returns where it is, or None on other ranks.

        ``state``: bytes, a writer, or any picklable object such as ``model.state_dict() | {"epoch":
        epoch}`` (see the module docstring for how it is written; ``format`` is one of ``FORMATS``).
        On S3 it returns once the local copy is written; the upload runs in the background (``wait``).
        """
        if not self.is_writer:
            return None
        self.wait()
        chosen, payload = _encoding(state, format)
        if self.remote is None:
            return self._save(chosen, payload, epoch, step)
        number = self._number(epoch, step)
        path = self._write(chosen, payload, number)
        self._start(lambda: self._upload(path, number, epoch), name=path.name)
        return self.path_for(number)

    def save_async(
        self, state: Any, *, epoch: int | None = None, step: int | None = None, format: str | None = None
    ) -> Location | None:
        """Write a checkpoint on a background thread; returns where it will be.

        One save is in flight at a time: this waits for the previous one first. ``state`` must not
        change until the save ends (bytes are safe; otherwise hold a copy, e.g. tensors moved to the
        CPU). An error of a background save is raised by the next ``wait``/``save``.
        """
        if not self.is_writer:
            return None
        self.wait()
        chosen, payload = _encoding(state, format)
        number = self._number(epoch, step)
        where = self.path_for(number)
        if self.remote is None:
            self._start(lambda: self._save(chosen, payload, epoch, step))
        else:
            self._start(
                lambda: self._upload(self._write(chosen, payload, number), number, epoch), name=Path(where).name
            )
        return where

    def _start(self, work: Callable[[], object], name: str | None = None) -> None:
        def run() -> None:
            try:
                work()
            except BaseException as error:
                self._pending_error = error

        # An upload is a daemon thread that atexit waits for, bounded (_finish_at_exit); a local
        # save_async is not, so the interpreter waits for it as it always did.
        remote = self.remote is not None
        self._pending_name = name
        self._pending = threading.Thread(target=run, name="trainyard-checkpoint", daemon=remote)
        if remote:
            # Registered again, so it runs before the reporter's own atexit close (last in, first out),
            # and the checkpoint's report still goes out.
            atexit.unregister(self._finish_at_exit)
            atexit.register(self._finish_at_exit)
        self._pending.start()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a background save or upload; raise its error, if it failed."""
        pending = self._pending
        if pending is not None:
            pending.join(timeout)
            if pending.is_alive():
                raise TimeoutError("checkpoint save still in progress")
            self._pending = None
        error, self._pending_error = self._pending_error, None
        if error is not None:
            raise error

    def _number(self, epoch: int | None, step: int | None) -> int:
        if epoch is not None:
            return epoch
        if step is not None:
            return step
        numbers = [n for n, _ in self._numbered()]
        if self.remote is not None:
            numbers += [n for n, _ in self.remote.published()]
        return max(numbers) + 1 if numbers else 0

    def _write(self, chosen: str, payload: bytes | Writer, number: int) -> Path:
        """The checkpoint as a local file (on S3: in the cache), atomically; the directory rotated."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{self.prefix}-{number:08d}{self.suffix}"
        with _staged(path, payload):
            # Before the checkpoint takes its name, so that it is never visible without its metadata.
            if chosen == "bytes":
                metadata_path(path).unlink(missing_ok=True)
            else:
                write_atomic(metadata_path(path), json.dumps({"format": chosen}).encode())
        self._rotate()
        return path

    def _save(self, chosen: str, payload: bytes | Writer, epoch: int | None, step: int | None) -> Path:
        path = self._write(chosen, payload, self._number(epoch, step))
        if self.report:
            reporting.checkpoint_saved(str(path), epoch)
        return path

    def _upload(self, path: Path, number: int, epoch: int | None) -> None:
        assert self.remote is not None
        files = [path] + [meta for meta in (metadata_path(path),) if meta.exists()]
        manifest = self.remote.publish(files, number=number, epoch=epoch, time=self._clock())
        self.remote.rotate(self.keep)
        if self.report:
            reporting.checkpoint_saved(str(manifest.uri), epoch)

    def _rotate(self) -> None:
        for _, old in self._numbered()[: -self.keep]:
            try:
                old.unlink()
                metadata_path(old).unlink(missing_ok=True)
            except OSError as error:
                _logger.warning("could not remove old checkpoint %s: %s", old, error)

    def _finish_at_exit(self) -> None:
        """At exit, wait (bounded) for the upload in flight: after SIGTERM within the pod's grace
        period (``TRAINYARD_CHECKPOINT_TERM_TIMEOUT``), else ``TRAINYARD_CHECKPOINT_EXIT_TIMEOUT``."""
        pending = self._pending
        if pending is None:
            return
        term = signals.terminated()
        bound = _seconds(self._environ, ENV_TERM_TIMEOUT if term else ENV_EXIT_TIMEOUT, 25 if term else 600)
        _logger.info("waiting up to %gs for the upload of %s to %s", bound, self._pending_name, self.uri)
        pending.join(bound)
        if pending.is_alive():
            _logger.error(
                "%s was not uploaded to %s within %gs of exit: it has no manifest, so it is not a checkpoint there; "
                "the previous one stays the latest (raise %s, and the pod's terminationGracePeriodSeconds)",
                self._pending_name,
                self.uri,
                bound,
                ENV_TERM_TIMEOUT if term else ENV_EXIT_TIMEOUT,
            )
        elif self._pending_error is not None:
            _logger.error("%s was not uploaded: %s", self._pending_name, self._pending_error)
        else:
            self._pending = None
        reporting.flush()

    # -- resuming --------------------------------------------------------------------------------

    def resume_path(self) -> Location | None:
        """Where to resume from (see the module docstring): this directory's (or prefix's) latest
        checkpoint unless ``TRAINYARD_RESUME_FROM`` names a newer one; None when there is neither."""
        found = self._resume()
        return None if found is None else found.location

    def _resume(self) -> _Found | None:
        own = self._own_latest()
        named = self._named_resume()
        if named is None or own is None:
            return own or named
        if str(own.location) == str(named.location) or (
            isinstance(own.location, Path)
            and isinstance(named.location, Path)
            and own.location.resolve() == named.location.resolve()
        ):
            return own
        return own if own.time >= named.time else named

    def _own_latest(self) -> _Found | None:
        if self.remote is None:
            found = self._numbered()
            return _Found(found[-1][1], _mtime(found[-1][1])) if found else None
        return _published_latest(self.remote, self.remote.uri)

    def _named_resume(self) -> _Found | None:
        named = self._environ.get(ENV_RESUME_FROM, "").strip()
        if not named:
            return None
        if s3store.is_s3(named):
            found = self._named_s3(s3store.parse(named))
        else:
            target = Path(named)
            found = None
            if target.is_dir():
                files = self._numbered(target)
                found = _Found(files[-1][1], _mtime(files[-1][1])) if files else None
                if found is None:
                    return None
            elif target.is_file():
                found = _Found(target, _mtime(target))
        if found is None:
            _logger.warning("%s=%s does not exist; not resuming from it", ENV_RESUME_FROM, named)
        return found

    def _named_s3(self, where: S3Uri) -> _Found | None:
        """A checkpoint (its manifest), else a prefix's latest, else an object written without a manifest."""
        store = self.remote
        if store is None or store.uri.bucket != where.bucket:
            store = S3Checkpoints(where, s3store.Bucket(where.bucket, self._environ), self._pattern)
        manifest = store.manifest(where) if where.key else None
        if manifest is not None:
            return _Found(str(where), manifest.time, manifest, store)
        latest = _published_latest(store, where)
        if latest is not None:
            return latest
        manifest = store.unmanaged(where)
        return None if manifest is None else _Found(str(where), manifest.time, manifest, store)

    def local_path(self, location: Location) -> Path:
        """A checkpoint as a local file: a path as it is; on S3, from the cache, downloaded unless it
        holds that checkpoint already (as its manifest says)."""
        if not s3store.is_s3(location):
            return Path(location)
        where = s3store.parse(str(location))
        found = self._named_s3(where)
        if found is None or found.manifest is None or found.store is None:
            raise CheckpointStorageError(f"{location}: no such checkpoint (no manifest, no object)")
        return self._fetch(found)

    def _fetch(self, found: _Found) -> Path:
        assert found.manifest is not None and found.store is not None
        folder = found.manifest.uri.key.rpartition("/")[0]
        own = self.remote is not None and (found.manifest.uri.bucket, folder) == (
            self.remote.uri.bucket,
            self.remote.uri.key,
        )
        cache = self.directory if own else _default_cache(S3Uri(found.manifest.uri.bucket, folder))
        return found.store.fetch(found.manifest, cache)

    def load_latest(self, reader: Callable[[Path], Any] | None = None, **torch_load: Any) -> Any:
        """The resume checkpoint as it was saved (:func:`load`; ``torch_load`` goes to ``torch.load``),
        or what ``reader(path)`` makes of it (a local path: an S3 checkpoint is read from the cache);
        None when there is none."""
        found = self._resume()
        if found is None:
            return None
        path = self._fetch(found) if found.manifest is not None else Path(found.location)
        return load(path, **torch_load) if reader is None else reader(path)

    # -- torch, imported only when used ----------------------------------------------------------

    def save_torch(
        self, state_dict: Any, *, epoch: int | None = None, step: int | None = None, background: bool = False
    ) -> Location | None:
        save = self.save_async if background else self.save
        return save(state_dict, epoch=epoch, step=step, format="torch")

    def load_torch_latest(self, **load_kwargs: Any) -> Any:
        import torch

        return self.load_latest(lambda path: torch.load(path, **load_kwargs))


def _published_latest(store: S3Checkpoints, where: S3Uri) -> _Found | None:
    published = store.published(where)
    if not published:
        return None
    uri = where.child(published[-1][1])
    manifest = store.manifest(uri)
    return None if manifest is None else _Found(str(uri), manifest.time, manifest, store)


def _default_cache(where: S3Uri) -> Path:
    return Path(tempfile.gettempdir()) / "trainyard-checkpoints" / where.bucket / where.key


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    try:
        return float(environ.get(name, "").strip() or default)
    except ValueError:
        return default


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("-inf")
