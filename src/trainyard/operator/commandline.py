"""The command lines of the operator's processes, on typer (the ``yard`` CLI's framework).

``python -m trainyard.operator``, ``.webhook`` and ``.manifests`` are each one function whose
parameters are its flags, run by ``run``. A command whose flags come from several places (the
operator takes the webhook's and every framework plugin's) is ``composed`` from their parameters.
Go's value syntax of upstream's flags (``--leader-elect=false``, ``1m30s``) is ``operator.flags``'.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import typer


def parameters(function: Callable[..., Any]) -> list[inspect.Parameter]:
    """``function``'s parameters with their annotations evaluated (typer reads them), but a ``**`` catch-all."""
    found = inspect.signature(function, eval_str=True).parameters.values()
    return [p for p in found if p.kind is not inspect.Parameter.VAR_KEYWORD]


def composed(body: Callable[..., int], flags: Sequence[inspect.Parameter]) -> Callable[..., None]:
    """A command taking ``flags`` (as keywords) that exits with the code ``body`` returns for them."""

    def command(**values: Any) -> None:
        raise typer.Exit(body(**values))

    # typer reads a command's flags from its signature; this one's are gathered at run time.
    signature = inspect.Signature([p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in flags])
    command.__signature__ = signature  # type: ignore[attr-defined]  # a function's attribute inspect reads
    return command


def run(
    command: Callable[..., None], argv: Sequence[str] | None, *, prog: str, help: str, standalone: bool = True
) -> Any:
    """Parse ``argv`` (default: this process's arguments) and run ``command``.

    Standalone, the process ends with the command's exit code, with 2 and the usage for a flag it
    refuses, and with 0 after ``-h``/``--help``, as before typer. Otherwise ``command``'s
    code is returned and a refused flag raises (``typer.BadParameter`` or its siblings).
    """
    app = typer.Typer(
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.command(help=help)(command)
    return typer.main.get_command(app).main(args=argv, prog_name=prog, standalone_mode=standalone)
