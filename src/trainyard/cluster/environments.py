"""Which local Python environment a container ``image`` runs in: the mapping under ``$TRAINYARD_HOME``.

Images are not pulled on the local node. What an image stands for, a set of installed Python
packages, is a local environment instead: ``environments.yaml`` lists environments by name, each a
directory with ``bin/python`` (a venv) and the image globs it stands for. The node resolves every
container's image against it at each start (so a new entry needs no restart); an image no entry
matches runs in trainyard's own environment, as before. ``yard env`` writes the file.

The same manifest keeps its real image for a cluster: nothing here changes what is stored.
"""

from __future__ import annotations

import fnmatch
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

FILE_NAME = "environments.yaml"
HEADER = (
    "# image -> local Python environment, for trainyard's local node (written by `yard env`).\n"
    "# Each entry: name, path (a venv: path/bin/python), images (globs; a tagless image means :latest).\n"
)


class EnvironmentsError(Exception):
    """The mapping file cannot be read or names something unusable: the message says what to fix."""


@dataclass(frozen=True)
class Environment:
    name: str
    path: Path
    images: tuple[str, ...] = field(default_factory=tuple)

    @property
    def bin_dir(self) -> Path:
        return self.path / "bin"

    @property
    def exists(self) -> bool:
        return (self.bin_dir / "python").exists()


@dataclass(frozen=True)
class Match:
    environment: Environment
    glob: str


def spellings(image: str) -> set[str]:
    """The names one image reference goes by: as written, tagged ``:latest`` when tagless, Docker Hub long and short.

    ``python`` and ``docker.io/library/python:latest`` are one image to a container runtime, so a
    glob written either way matches both. A digest (``@sha256:...``) is kept, with and without the tag.
    """
    image = image.strip()
    if not image:
        return set()
    name, _, digest = image.partition("@")
    tag = ""
    if ":" in name.rsplit("/", 1)[-1]:
        name, _, tag = name.rpartition(":")
    first = name.split("/", 1)[0]
    registry = "." in first or ":" in first or first == "localhost"
    long_name = name if registry else f"docker.io/{name if '/' in name else 'library/' + name}"
    short_name = long_name.removeprefix("docker.io/").removeprefix("library/")
    if digest:  # the digest names the image whatever the tag says
        suffixes = {f"@{digest}"} | ({f":{tag}", f":{tag}@{digest}"} if tag else set())
    elif tag:
        suffixes = {f":{tag}"}
    else:  # :latest to a runtime; a glob written without a tag names it too
        suffixes = {"", ":latest"}
    out = {image}
    for spelled in {name, long_name, short_name}:
        out |= {spelled + suffix for suffix in suffixes}
    return out


class Environments:
    """The entries of one ``environments.yaml``, re-read when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._entries: list[Environment] = []

    def entries(self) -> list[Environment]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._entries = None, []
            return []
        # `yard env` replaces the file (a new inode): caught even within one mtime tick at the same size.
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        if stamp != self._stamp:
            self._entries, self._stamp = load(self.path), stamp
        return list(self._entries)

    def resolve(self, image: str) -> Match | None:
        """The first entry (in file order) with a glob matching any spelling of ``image``; None: trainyard's own."""
        names = spellings(image)
        for env in self.entries():
            for glob in env.images:
                if any(fnmatch.fnmatchcase(n, glob) for n in names):
                    return Match(env, glob)
        return None


def load(path: Path) -> list[Environment]:
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise EnvironmentsError(f"{path} cannot be read: {exc}; fix or remove it (`yard env list` checks it)") from exc
    items = raw.get("environments") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        raise EnvironmentsError(f"{path} has no list `environments:`; see `yard env --help`")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not isinstance(item.get("path"), str):
            raise EnvironmentsError(f"{path}: environments[{i}] needs a string `name` and `path`")
        images = item.get("images") or []
        if not isinstance(images, list) or not all(isinstance(g, str) for g in images):
            raise EnvironmentsError(f"{path}: environments[{i}].images must be a list of image globs")
        # A relative path (a hand-written file) is relative to the file, not to where the node runs.
        out.append(Environment(item["name"], path.parent / Path(item["path"]).expanduser(), tuple(images)))
    return out


def save(path: Path, entries: list[Environment]) -> None:
    """Write the file atomically (a reader never sees half of it)."""
    body = {"environments": [{"name": e.name, "path": str(e.path), "images": list(e.images)} for e in entries]}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".environments.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(HEADER + yaml.safe_dump(body, sort_keys=False))
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def record(path: Path, environment: Environment) -> None:
    """Add ``environment``, or replace the entry of that name in place (its position keeps its precedence)."""
    entries = load(path) if path.exists() else []
    for i, existing in enumerate(entries):
        if existing.name == environment.name:
            entries[i] = environment
            break
    else:
        entries.append(environment)
    save(path, entries)


def forget(path: Path, name: str) -> Environment | None:
    entries = load(path) if path.exists() else []
    kept = [e for e in entries if e.name != name]
    if len(kept) == len(entries):
        return None
    save(path, kept)
    return next(e for e in entries if e.name == name)
