"""Optional capabilities of a framework plugin beyond ``base.Framework``, one small Protocol each.

``registry`` finds them by ``isinstance``, so generic code asks "which plugins have operator
flags" or "can this kind run a function" and never names a kind:

- ``OperatorFlags``: flags of the operator's command line that belong to one framework
  (upstream's ``--pytorch-init-container-*``); ``operator.main`` adds every registered plugin's.
- ``FunctionJobs``: the kind can run one Python function on N replicas (the SDK's
  ``TrainingClient.create_job(train_func=...)``); the plugin lays out the replicas, the SDK
  packages the function.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class OperatorFlags(Protocol):
    def add_operator_flags(self, parser: argparse.ArgumentParser) -> None: ...

    def controller_settings(self, args: argparse.Namespace) -> dict[str, Any]:
        """The ``controller.ControllerSettings`` fields the parsed flags set, by name.

        Raises ``SystemExit`` with the flag's name for a value the flags refuse.
        """
        ...


@runtime_checkable
class FunctionJobs(Protocol):
    @property
    def function_image(self) -> str:
        """The image the replicas run when the caller names none."""
        ...

    @property
    def function_roles(self) -> Mapping[str, str]:
        """Replica types beyond the workers a caller may ask for, by the SDK's keyword
        (TFJob's ``num_chief_replicas`` → ``Chief``); empty when the kind has none."""
        ...

    def function_entrypoint(self, num_workers: int, num_procs_per_worker: int | str | None) -> str:
        """The command each replica runs the function's file with (e.g. ``torchrun``)."""
        ...

    def function_spec(
        self,
        template: dict[str, Any],
        num_workers: int,
        num_procs_per_worker: int | str | None,
        roles: Mapping[str, int],
    ) -> dict[str, Any]:
        """The job's ``spec`` (JSON-shaped): ``num_workers`` replicas and ``roles`` (replica type →
        count, from ``function_roles``), all of pod ``template``."""
        ...
