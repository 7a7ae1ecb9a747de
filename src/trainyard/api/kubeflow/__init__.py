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

PRINTER_COLUMNS = (
    PrinterColumn(name="State", type="string", json_path=".status.conditions[-1:].type"),
    PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
)
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
