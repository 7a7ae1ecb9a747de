"""The ClusterTrainingRuntimes trainyard ships: upstream's five, as package data (``manifests/*.yaml``).

``runtimes()`` loads them (fresh copies, in a fixed order); the embedded plane installs them at
start and ``deploy/runtimes/`` carries them for a real cluster. Each installed copy is annotated
with ``SHIPPED_ANNOTATION``: a fingerprint of what was shipped, so a later release can tell a copy
it may bring up to date (unchanged since it was installed) from one a user edited (``upgrade``).

The TrainJob controller resolves a TrainJob's runtime through the API like any other object
(namespaced ``TrainingRuntime`` or ``ClusterTrainingRuntime``, by ``spec.runtimeRef``); these
files are not a fallback for it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from functools import cache
from importlib import resources

import yaml

from trainyard.api.meta import Obj

FILES = (
    "torch_distributed.yaml",
    "jax_distributed.yaml",
    "xgboost_distributed.yaml",
    "deepspeed_distributed.yaml",
    "mlx_distributed.yaml",
)
SHIPPED_ANNOTATION = "trainyard.dev/shipped-runtime"
"""On an installed runtime: the fingerprint of the shipped content it was created or updated with."""
DEFAULT_RUNTIME = "torch-distributed"
"""The runtime the official SDK uses when none is named (``DEFAULT_TRAINING_RUNTIME`` overrides it)."""


@cache
def _load() -> tuple[Obj, ...]:
    folder = resources.files(__package__).joinpath("manifests")
    return tuple(yaml.safe_load(folder.joinpath(name).read_text()) for name in FILES)


def runtimes() -> list[Obj]:
    """The five shipped ClusterTrainingRuntimes (fresh copies the caller may change)."""
    return [copy.deepcopy(obj) for obj in _load()]


def fingerprint(obj: Obj) -> str:
    """A digest of what a shipped runtime says: its labels and spec."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    text = json.dumps({"labels": labels, "spec": obj.get("spec")}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shipped(obj: Obj) -> Obj:
    """``obj`` (a shipped runtime) with the annotation that marks it as installed by trainyard."""
    out = copy.deepcopy(obj)
    annotations = out.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[SHIPPED_ANNOTATION] = fingerprint(obj)
    return out


def upgrade(current: Obj, wanted: Obj) -> Obj | None:
    """The object to write over an installed runtime ``current`` to ship ``wanted``, or None.

    Only a copy trainyard installed and nobody changed since (its annotation is the fingerprint
    of its own labels and spec) is brought up to date; an edited copy, or one without the
    annotation (the user's own of the same name), is the user's and is left alone.
    """
    mark = ((current.get("metadata") or {}).get("annotations") or {}).get(SHIPPED_ANNOTATION)
    if mark is None or mark != fingerprint(current) or mark == fingerprint(wanted):
        return None
    out = copy.deepcopy(current)
    meta = out.setdefault("metadata", {})
    labels = (wanted.get("metadata") or {}).get("labels") or {}
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    meta.setdefault("annotations", {})[SHIPPED_ANNOTATION] = fingerprint(wanted)
    out["spec"] = copy.deepcopy(wanted.get("spec"))
    return out
