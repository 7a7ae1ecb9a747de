"""What every ``yard`` command shares: global options, the API client, one-line errors, tables.

Errors a user can cause (a missing plane, an unknown kind, a bad manifest, a refusal from the
API server) become one line on stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, ParamSpec, TypeVar

import typer
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError, ConfigError
from rich.console import Console
from rich.text import Text

from trainyard.api import jobview
from trainyard.cluster.paths import Layout, default_home
from trainyard.sdk.kinds import JobKind, UnknownKindError, served_kinds
from trainyard.sdk.manifests import ManifestError

P = ParamSpec("P")
R = TypeVar("R")

out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

STATE_STYLES = {
    "Succeeded": "green",
    "Failed": "red",
    "Restarting": "yellow",
    "Pending": "yellow",
    "Running": "cyan",
    "Suspended": "magenta",
    "Warning": "yellow",
    "CrashLoopBackOff": "red",
    "Error": "red",
    "Completed": "green",
    "Complete": "green",
}


class UserError(Exception):
    """A problem the user can fix; its message is the whole story."""


@dataclass
class Globals:
    home: str | None = None
    kubeconfig: str | None = None
    namespace: str | None = None

    @property
    def layout(self) -> Layout:
        return Layout(Path(self.home) if self.home else default_home())


GLOBALS = Globals()


def api(namespace: str | None = None) -> Client:
    """A client for the cluster ``--kubeconfig`` names, else the local plane of ``--home``."""
    path = Path(GLOBALS.kubeconfig) if GLOBALS.kubeconfig else GLOBALS.layout.kubeconfig
    if not path.exists():
        raise UserError(f"no kubeconfig at {path}; start the control plane with `yard up` or pass --kubeconfig")
    try:
        config = KubeConfig.from_file(path)
    except (ConfigError, OSError, ValueError) as exc:
        raise UserError(f"{path}: not a usable kubeconfig ({exc})") from exc
    return Client(config, namespace=namespace or GLOBALS.namespace, field_manager="yard")


def kinds_of(client: Client) -> list[JobKind]:
    return served_kinds(client)


def handled(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn the errors a user can cause into one line on stderr and exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (UserError, ManifestError, UnknownKindError) as exc:
            fail(str(exc))
        except ApiError as exc:
            status = exc.status
            reason = getattr(status, "reason", None) or "Error"
            fail(f"Error from server ({reason}): {getattr(status, 'message', None) or exc}")
        except OSError as exc:
            fail(str(exc))
        except Exception as exc:
            # The HTTP client's transport errors (no server on the port, TLS, timeouts) are the
            # user's to fix; anything else is a bug and keeps its traceback.
            if not type(exc).__module__.split(".")[0].startswith(("httpx", "httpcore")):
                raise
            fail(f"cannot reach the API server: {exc or type(exc).__name__}")

    return wrapper


def fail(message: str, code: int = 1) -> NoReturn:
    err.print(Text(f"error: {message}"))
    raise typer.Exit(code)


age = jobview.age  # kubectl's short ages (45s, 3m, 2h, 4d), shared with the SDK's columns


def styled(value: str) -> Text:
    return Text(value, style=STATE_STYLES.get(value, ""))


def table(headers: Sequence[str], rows: Sequence[Sequence[str | Text]], *, header: bool = True) -> None:
    """A kubectl-style table: left-aligned columns, three spaces apart, no borders, never wrapped."""
    cells = [[c if isinstance(c, Text) else Text(str(c)) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c.plain)) for w, c in zip(widths, row, strict=True)]
    lines = ([[Text(h) for h in headers]] if header else []) + cells
    for row in lines:
        line = Text()
        for i, (cell, width) in enumerate(zip(row, widths, strict=True)):
            line.append_text(cell)
            if i < len(row) - 1:
                line.append(" " * (width - len(cell.plain) + 3))
        out.print(line, overflow="ignore", crop=False)


def flush() -> None:
    sys.stdout.flush()
