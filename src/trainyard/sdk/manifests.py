"""Job manifests from files, directories or stdin, applied to a cluster, with errors that name the field.

Every problem with a manifest is a ``ManifestError`` whose one-line text names the file (and
document, if the file holds several) and the field: malformed YAML, an unknown kind, a missing
name, and the API server's own schema and validation verdicts (its 422 ``Status`` causes).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from lightkube import Client
from lightkube.core.exceptions import ApiError

from trainyard.api.meta import Obj
from trainyard.client.resources import build, is_status, to_dict
from trainyard.sdk.kinds import JobKind, by_kind

SUFFIXES = (".yaml", ".yml", ".json")


class ManifestError(ValueError):
    def __init__(self, source: str, field: str | None, message: str) -> None:
        self.source, self.field, self.message = source, field, message
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Document:
    source: str  # "job.yaml" or "job.yaml (document 2)"
    body: Obj


def _read(path: str) -> tuple[str, str]:
    if path == "-":
        return "<stdin>", sys.stdin.read()
    try:
        return path, Path(path).read_text()
    except OSError as exc:
        raise ManifestError(path, None, exc.strerror or str(exc)) from exc
    except UnicodeDecodeError as exc:
        raise ManifestError(path, None, "not a text file") from exc


def files_of(path: str) -> list[str]:
    """``path`` itself, or the manifests (.yaml, .yml, .json) of a directory in name order."""
    if path != "-" and Path(path).is_dir():
        found = sorted(str(p) for p in Path(path).iterdir() if p.suffix in SUFFIXES and p.is_file())
        if not found:
            raise ManifestError(path, None, f"no manifests ({', '.join(SUFFIXES)}) in this directory")
        return found
    return [path]


def load(path: str) -> list[Document]:
    """The non-empty documents of a file, a directory's files, or stdin ("-")."""
    out = []
    for name in files_of(path):
        source, text = _read(name)
        try:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ManifestError(where, None, f"malformed YAML: {problem}") from exc
        for i, doc in enumerate(docs):
            label = f"{source} (document {i + 1})" if len(docs) > 1 else source
            if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                out += [Document(f"{label} item {j}", item) for j, item in enumerate(doc["items"])]
            else:
                out.append(Document(label, doc))
    return out


def check(doc: Document, kinds: list[JobKind]) -> JobKind:
    """The served kind of a document, after the checks the server cannot phrase with the file's name."""
    body = doc.body
    if not isinstance(body, dict):
        raise ManifestError(doc.source, None, f"a manifest is a mapping, not {type(body).__name__}")
    for required in ("apiVersion", "kind"):
        if not body.get(required):
            raise ManifestError(doc.source, required, "Required value")
    kind = by_kind(str(body["kind"]), kinds)
    if kind is None:
        served = ", ".join(sorted(k.kind for k in kinds)) or "none"
        raise ManifestError(
            doc.source, "kind", f"unknown kind {body['kind']!r}: yard handles training jobs ({served}); use kubectl"
        )
    if body["apiVersion"] != kind.api_version:
        raise ManifestError(
            doc.source, "apiVersion", f"{body['apiVersion']!r} is not served for {kind.kind}; use {kind.api_version}"
        )
    meta = body.get("metadata")
    if not isinstance(meta, dict) or not (meta.get("name") or meta.get("generateName")):
        raise ManifestError(doc.source, "metadata.name", "Required value")
    return kind


def server_error(doc: Document, exc: ApiError) -> ManifestError:
    """The API server's refusal of a document, as one line naming the file and the first field."""
    status = exc.status
    details = getattr(status, "details", None)
    causes = list(getattr(details, "causes", None) or [])
    message = str(getattr(status, "message", None) or exc)
    if causes:
        first = causes[0]
        more = f" (and {len(causes) - 1} more)" if len(causes) > 1 else ""
        text = getattr(first, "message", None) or message
        return ManifestError(doc.source, getattr(first, "field", None), f"{text}{more}")
    return ManifestError(doc.source, None, message.replace("\n", " "))


def apply(client: Client, doc: Document, kind: JobKind, namespace: str) -> tuple[Obj, str]:
    """Create the job or replace its spec, labels and annotations: (object, created|configured|unchanged)."""
    body = doc.body
    ns = (body.get("metadata") or {}).get("namespace") or namespace
    res = kind.resource
    name = body["metadata"].get("name")
    try:
        if not name:
            return to_dict(client.create(build(res, body), namespace=ns)), "created"
        try:
            current = to_dict(client.get(res, name, namespace=ns))
        except ApiError as exc:
            if not is_status(exc, 404):
                raise
            return to_dict(client.create(build(res, body), namespace=ns)), "created"
        merged = {**current, "spec": body.get("spec", {})}
        merged["metadata"] = {
            **current["metadata"],
            **{k: v for k, v in body["metadata"].items() if k in ("labels", "annotations")},
        }
        updated = to_dict(client.replace(build(res, merged)))
    except ApiError as exc:
        raise server_error(doc, exc) from exc
    same = updated["metadata"].get("resourceVersion") == current["metadata"].get("resourceVersion")
    return updated, "unchanged" if same else "configured"
