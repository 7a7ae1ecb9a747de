"""The ``kubeflow.org`` group: Training Operator v1's job kinds, one module each, as upstream groups them.

What the group's kinds share lives here: the group and version, their CRDs' printer columns and
categories, and upstream's list of the group's kinds with the ``framework`` label of their
metrics (a kind trainyard does not serve yet is then refused by name, not as unknown). Kubeflow
Trainer v2's ``trainer.kubeflow.org`` kinds will live beside this package, in ``api/trainer/``.
"""

from __future__ import annotations

from trainyard.api.kindinfo import PrinterColumn

GROUP = "kubeflow.org"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

_STATE = PrinterColumn(name="State", type="string", json_path=".status.conditions[-1:].type")
_AGE = PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp")
_PROGRESS = ".status.trainingProgress"
PRINTER_COLUMNS = (
    _STATE,
    # trainyard's: what the training code reports (status.trainingProgress), seed 004's columns;
    # `-o wide` adds the usual metrics and the ETA.
    PrinterColumn(name="Progress", type="string", json_path=f"{_PROGRESS}.progress"),
    PrinterColumn(name="Epoch", type="integer", json_path=f"{_PROGRESS}.currentEpoch"),
    PrinterColumn(name="Loss", type="number", json_path=f"{_PROGRESS}.metrics.loss", priority=1),
    PrinterColumn(name="Accuracy", type="number", json_path=f"{_PROGRESS}.metrics.accuracy", priority=1),
    PrinterColumn(name="ETA", type="integer", json_path=f"{_PROGRESS}.estimatedRemainingSeconds", priority=1),
    _AGE,
)
"""The group's columns (MPIJob's too): upstream's State and Age, and the training progress."""
CATEGORIES = ("kubeflow", "trainyard")

UPSTREAM_FRAMEWORKS: dict[str, str] = {
    "PyTorchJob": "pytorch",
    "TFJob": "tensorflow",
    "MPIJob": "mpi",
    "XGBoostJob": "xgboost",
    "PaddleJob": "paddle",
    "JAXJob": "jax",
    "MXJob": "mxnet",
}
"""Every kind upstream's Training Operator serves (MXJob: until v1.7) in this group → its metrics' ``framework`` label
(reference §11); trainyard's own are ``api.kinds.KINDS``."""
